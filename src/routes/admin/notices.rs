//! What the page an action returns to says happened: a notice named in the
//! query (`?notice=capacity_refused&committed=3`), in fixed words, some
//! with the numbers the query gives. Only these words are shown; anything
//! else in the query is ignored.

use serde::Deserialize;

/// After an action, the page it returns to says what happened. Only these
/// fixed words are shown; anything else in the query is ignored.
#[derive(Deserialize, Default)]
pub struct NoticeQuery {
    pub(super) notice: Option<String>,
    pub(super) requested: Option<i64>,
    pub(super) committed: Option<i64>,
    pub(super) lines: Option<i64>,
    pub(super) left: Option<i64>,
    /// What publishing a schedule did.
    pub(super) created: Option<i64>,
    pub(super) updated: Option<i64>,
    pub(super) withdrawn: Option<i64>,
    pub(super) kept: Option<i64>,
}

/// The notices that say something was refused (shown as such); the rest
/// say it was done.
const REFUSED: [&str; 16] = [
    "capacity_refused",
    "splits_not_saved",
    "unpublish_refused",
    "section_not_moved",
    "restore_collection_first",
    "paid",
    "refund_not_paid",
    "refund_nothing_left",
    "refund_too_many",
    "refund_redeemed",
    "staff_exists",
    "last_owner",
    "enrol_first",
    "two_factor_wrong_code",
    "two_factor_locked",
    "two_factor_required",
];

impl NoticeQuery {
    /// The notice's words (empty for none, or one not known) and whether
    /// it is `ok` or `refused`.
    pub(super) fn text(&self) -> (String, &'static str) {
        let Some(notice) = self.notice.as_deref() else {
            return (String::new(), "ok");
        };
        let text = self
            .counted(notice)
            .or_else(|| fixed(notice).map(str::to_owned))
            .unwrap_or_default();
        let kind = if REFUSED.contains(&notice) {
            "refused"
        } else {
            "ok"
        };
        (text, kind)
    }

    /// The notices that say the numbers the query gives.
    fn counted(&self, notice: &str) -> Option<String> {
        Some(match notice {
            "capacity_refused" => format!(
                "Refused: {} units are reserved or sold, so the capacity cannot go below that (asked for {}). Nothing was changed.",
                self.committed.unwrap_or(0),
                self.requested.unwrap_or(0)
            ),
            "unpublish_refused" => format!(
                "Refused: it has been ordered ({} order lines), so it stays in the shop for \
                 those orders. Archive it to stop selling it. Nothing was changed.",
                self.lines.unwrap_or(0)
            ),
            "released" => match self.lines {
                Some(n) if n > 1 => {
                    format!("Released, with the other {} lines of its purchase.", n - 1)
                }
                _ => "Released: the units are available again.".to_owned(),
            },
            "two_factor_locked" => format!(
                "Refused: too many wrong codes. Try again in {} minutes. Nothing was changed.",
                crate::staff::LOCK_MINUTES
            ),
            "recovery_code_used" => format!(
                "You signed in with a recovery code; {} left. Make new ones below if you are \
                 running short.",
                self.left.unwrap_or(0)
            ),
            "schedule_saved" => format!(
                "Schedule saved: {} new slots, {} changed, {} withdrawn, {} kept as \
                 they were because they have orders.",
                self.created.unwrap_or(0),
                self.updated.unwrap_or(0),
                self.withdrawn.unwrap_or(0),
                self.kept.unwrap_or(0)
            ),
            "restored" => match self.lines {
                Some(n) if n > 1 => format!(
                    "Restored, with the {n} products archived with it: back in the shop as they \
                     were. What was sold stays sold."
                ),
                _ => "Restored: back in the shop as it was. What was sold stays sold.".to_owned(),
            },
            "seats_block" | "seats_unblock" | "seats_hold_back" | "seats_release" => format!(
                "{} {} seats. The section has {} seats on sale now; the shop shows them from \
                 its next page.",
                match notice {
                    "seats_block" => "Blocked",
                    "seats_unblock" => "Unblocked: back on sale,",
                    "seats_hold_back" => "Held back",
                    _ => "Released: back on sale,",
                },
                self.updated.unwrap_or(0),
                self.left.unwrap_or(0)
            ),
            "plan_replaced" => format!(
                "Plan saved: {} seats added, {} moved, {} taken off the plan. The section has {} \
                 seats on sale now.",
                self.created.unwrap_or(0),
                self.updated.unwrap_or(0),
                self.withdrawn.unwrap_or(0),
                self.left.unwrap_or(0)
            ),
            "webhook_replayed" => format!(
                "{} deliveries queued again, with their own webhook-id: the worker sends them on \
                 its next pass.",
                self.committed.unwrap_or(0)
            ),
            _ => return None,
        })
    }
}

/// The notices whose words are fixed.
fn fixed(notice: &str) -> Option<&'static str> {
    Some(match notice {
        "capacity_updated" => "Capacity changed.",
        "published" => "Published: it is in the shop now.",
        "unpublished" => "Back to draft: it is no longer in the shop.",
        "publishing_unchanged" => "It was already so; nothing was changed.",
        "invite_sent" => "Invite sent: the link in the mail works once, for 72 hours.",
        "invite_resent" => "Invite sent again with a new link; the old one no longer works.",
        "invite_cancelled" => "Invite cancelled: its link no longer works.",
        "section_not_moved" => "Move a section Up or Down. Nothing was changed.",
        "image_saved" => "Image saved: the shop shows it from the next page on.",
        "image_removed" => "Image removed.",
        "pay_saved" => "Ways to pay saved: the basket offers them from the next page on.",
        "repaired" => "Recounted from the reservations and corrected.",
        "no_drift" => "The counts already matched the reservations; nothing to correct.",
        "already_ended" => "This hold had already ended; nothing was changed.",
        "paid" => "Refused: this hold is paid for. Refund the order instead.",
        "refund_queued" => "The refund will be tried on the worker's next pass.",
        "refund_done" => "That refund is already done; nothing was changed.",
        "staff_refund_queued" => {
            "Refund queued: the units are off the order and the \
            worker asks the provider on its next pass."
        }
        "staff_refund_whole" => {
            "The whole order is being refunded: the worker asks \
            the provider on its next pass."
        }
        "refund_not_paid" => {
            "Refused: only a paid order can be refunded here. Nothing was changed."
        }
        "refund_not_in_order" => {
            "Refused: the order has no such line (it may have changed). Nothing was changed."
        }
        "refund_nothing_left" => "Refused: everything on this order was refunded already.",
        "refund_too_many" => {
            "Refused: that is more units than are left to refund. Nothing was changed."
        }
        "refund_redeemed" => {
            "Refused: some of those codes were already used at the \
            door or counter. Tick \"refund used codes\" to refund them anyway (it is \
            recorded). Nothing was changed."
        }
        "staff_exists" => {
            "Refused: an account with that e-mail exists already. Nothing was changed."
        }
        "role_changed" => "Role changed; it applies from the account's next page.",
        "staff_disabled" => "Account disabled; its sessions have ended.",
        "staff_enabled" => "Account enabled; it can sign in again.",
        "staff_unchanged" => "It was so already; nothing was changed.",
        "last_owner" => {
            "Refused: that is the shop's last owner. Make another account \
            an owner first. Nothing was changed."
        }
        "two_factor_reset" => {
            "Two-factor sign-in turned off for that account; its \
            sessions have ended. It signs in with its password and sets it up again."
        }
        "settings_saved" => "Settings saved.",
        "shop_saved" => "The shop's name and looks are saved: its pages show them now.",
        "enrol_first" => {
            "Refused: set up two-factor sign-in for your own account \
            first, so that requiring it does not shut you out. Nothing was changed."
        }
        "two_factor_wrong_code" => {
            "That code is not right, or was used already: type the next code your app \
            shows. Nothing was changed."
        }
        "two_factor_off" => "Two-factor sign-in is off for your account.",
        "two_factor_required" => {
            "Refused: the shop requires two-factor sign-in of \
            your role. Nothing was changed."
        }
        "event_created" => "Event created. Add its tiers: it is on sale once it has one.",
        "event_saved" => "Event saved.",
        "tier_created" => "Tier added.",
        "tier_saved" => {
            "Tier saved. A new price applies to checkouts started from \
            now on; orders already started keep theirs."
        }
        "stock_created" => "Stock item created.",
        "stock_saved" => {
            "Stock item saved. A new price applies to checkouts started \
            from now on; orders already started keep theirs."
        }
        "product_archived" => {
            "Archived: it is no longer in the shop. Its orders and \
            codes are kept."
        }
        "collection_archived" => {
            "Archived, with everything on sale in it: no longer \
            in the shop. Its orders and codes are kept."
        }
        "restore_collection_first" => {
            "Refused: what it belongs to is archived too. Restore that, and it comes back \
            with it. Nothing was changed."
        }
        "section_moved" => "Moved: the shop shows its sections in this order.",
        "section_category_changed" => {
            "Category changed: the section's seats are sold at its price in checkouts started \
             from now on; orders already started keep theirs."
        }
        "category_saved" => {
            "Category saved. A new price applies to checkouts started from now on; orders \
             already started keep theirs."
        }
        "room_saved" => {
            "The room's set-up is saved: times not yet booked follow it; times already \
             published keep their service's deposit and cancel-by."
        }
        "category_added" => "Category added: a section can be sold at it now.",
        "section_added" => {
            "Section added: its seats are on sale with the event, at its category's price. \
             Block or hold back seats below."
        }
        "splits_saved" => "Saved: best available follows it from the next checkout on.",
        "splits_not_saved" => {
            "Choose whether seats may be sold apart, yes or no. Nothing was changed."
        }
        "voucher_restored" => {
            "Voucher restored: checkouts can start with it again; its uses are as they were."
        }
        "voucher_created" => "Voucher created; shoppers can use it now.",
        "voucher_archived" => {
            "Voucher archived: no checkout can start with it again; \
            uses already held run their course."
        }
        "waitlist_removed" => "Entry removed from the waiting list.",
        "waitlist_rules" => "Saved: the line's rules apply from its next handover.",
        "queue_on" => {
            "Queue on: its commitment is published, and its units wait \
            for the draw at the opening."
        }
        "api_key_revoked" => "Key revoked: it signs nothing from now on.",
        "webhook_enabled" => {
            "Endpoint enabled: new events go to it again. Replay \
            what it missed below."
        }
        "webhook_disabled" => {
            "Endpoint disabled: nothing is sent to it until it is \
            enabled."
        }
        "must_enrol" => {
            "The shop requires two-factor sign-in of accounts that can \
            refund: set it up to go on."
        }
        _ => return None,
    })
}
