//! Items redeemed exactly once ([`crate::items`]): a ticket admits one
//! person at the door, a pickup code hands its boxes over at that day's
//! counter, a booking's code seats its party at the host stand (the words
//! are the kind's: [`ProductKind::code_words`]). The database decides
//! (`hf_redeem`, migration 0200): a scan redeems the items of its code that
//! the door admits, the redemption's primary key is the item, so two doors
//! scanning one code at one moment get one admission and one "already
//! used", and an item refunded or cancelled is refused. Redemptions are
//! append-only, with who and where.
//!
//! A door checks its own ([`door`]): an event, a day's pickup slots or some
//! tiers. A code for something else is refused with what it is for
//! ([`Outcome::NotThisDoor`], [`MadeFor`]); box office and owners may admit
//! it anyway, and the redemption says it was overridden.

pub mod door;

use chrono::{DateTime, Utc};
use sqlx::PgExecutor;
use uuid::Uuid;

use crate::catalogue::ProductKind;

/// Longest code accepted as typed (ours are 13 characters).
pub const MAX_CODE_CHARS: usize = 64;

/// A code as staff typed or scanned it: spaces dropped, upper case, the
/// dash of a ticket code optional after its prefix ("tkt abcd efgh").
pub fn normalise(typed: &str) -> String {
    let plain: String = typed
        .chars()
        .filter(|c| !c.is_whitespace())
        .flat_map(char::to_uppercase)
        .collect();
    // TKTABCDEFGH (dashes lost in typing) is TKT-ABCD-EFGH
    if plain.len() == 11
        && plain.starts_with("TKT")
        && plain.bytes().all(|b| b.is_ascii_alphanumeric())
    {
        return format!("TKT-{}-{}", &plain[3..7], &plain[7..]);
    }
    plain
}

/// What redeeming a code came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Let them in, or hand the order over: `word` is what its kind says
    /// ("admitted", "collected").
    Redeemed { word: &'static str },
    /// Redeemed before: when, by whom and where.
    AlreadyUsed {
        at: DateTime<Utc>,
        by: String,
        place: String,
    },
    /// Its unit (or its whole order) was refunded.
    Refunded,
    /// Its guest cancelled it (a booking).
    Cancelled,
    /// Its order is not paid (yet, or ever).
    NotPaid,
    /// Another event's, another day's or another tier's: not what this
    /// door checks.
    NotThisDoor,
    /// No such code.
    NotValid,
}

impl Outcome {
    /// The name the admin and the command line print.
    pub fn as_str(&self) -> &'static str {
        match self {
            Outcome::Redeemed { word } => word,
            Outcome::AlreadyUsed { .. } => "already_used",
            Outcome::Refunded => "refunded",
            Outcome::Cancelled => "cancelled",
            Outcome::NotPaid => "not_paid",
            Outcome::NotThisDoor => "not_this_door",
            Outcome::NotValid => "not_valid",
        }
    }

    /// Whoever holds the code may go in or take the order.
    pub fn lets_through(&self) -> bool {
        matches!(self, Outcome::Redeemed { .. })
    }

    /// As a door's answer starts: "Admitted", "Already used".
    pub fn headline(&self) -> String {
        let word = self.as_str().replace('_', " ");
        let mut chars = word.chars();
        match chars.next() {
            Some(first) => first.to_uppercase().chain(chars).collect(),
            None => word,
        }
    }
}

/// One redemption attempt's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redemption {
    /// The code as looked up (normalised).
    pub code: String,
    pub outcome: Outcome,
    /// The kind whose code it is, once found: its words name the code
    /// ([`ProductKind::code_words`]).
    pub kind: Option<ProductKind>,
    pub order_id: Option<Uuid>,
    pub customer_name: Option<String>,
    /// What the code is for: every item in question, with its units.
    pub what: Option<String>,
    /// The event or schedule the code is for, when and which tier.
    pub made_for: Option<MadeFor>,
    /// Admitted by someone who overrode the door's check.
    pub overridden: bool,
}

/// What a code is for, as a door names it: "Winter Jazz, Sun 20 Dec 19:30
/// CET, General".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MadeFor {
    /// Its event's or schedule's title.
    pub title: String,
    /// The tier or slot's product name.
    pub tier: String,
    /// When the event or the slot starts.
    pub starts_at: Option<DateTime<Utc>>,
}

impl MadeFor {
    /// "Winter Jazz, Sun 20 Dec 19:30 CET, General" (the tier left out
    /// when its name is the title's, the time when the tier's name says
    /// it).
    pub fn describe(&self, zone: crate::clock::ShopZone) -> String {
        // a tier or time named after its room or event ("A table at the
        // Harbour Bistro, Wed 9 Dec 19:30 CET") says its title already
        let title_said = !self.title.is_empty() && self.tier.starts_with(&self.title);
        let mut words = if title_said {
            self.tier.clone()
        } else {
            self.title.clone()
        };
        // a slot's name says its time already
        if let Some(when) = self.starts_at.map(|at| zone.short(at))
            && !self.tier.contains(&when)
        {
            words.push_str(", ");
            words.push_str(&when);
        }
        if !title_said && !self.tier.is_empty() && self.tier != self.title {
            words.push_str(", ");
            words.push_str(&self.tier);
        }
        words
    }
}

/// Who redeems and where, as recorded.
#[derive(Debug, Clone)]
pub struct Door<'a> {
    pub by: &'a str,
    pub place: &'a str,
    /// The products this door admits ([`door::Checked::products`]);
    /// `None`: any code (the command line and the API name no door).
    pub checks: Option<&'a [String]>,
    /// Admit a code this door does not check: box office and owners may.
    pub overrule: bool,
    /// This scan, made once per scan: a redemption run again after its
    /// commit's answer was lost is told what it did, not "already used".
    pub attempt: Uuid,
}

/// Redeem `typed` (normalised first) at `door`. Bad input about the door
/// (an empty name, a place over 100 characters) is an error; a code that
/// is not ours is an outcome.
pub async fn redeem<'e>(
    executor: impl PgExecutor<'e>,
    typed: &str,
    door: &Door<'_>,
) -> sqlx::Result<Redemption> {
    let code = normalise(typed);
    if code.is_empty() || code.chars().count() > MAX_CODE_CHARS {
        return Ok(Redemption {
            code,
            outcome: Outcome::NotValid,
            kind: None,
            order_id: None,
            customer_name: None,
            what: None,
            made_for: None,
            overridden: false,
        });
    }
    #[derive(sqlx::FromRow)]
    struct Row {
        outcome: String,
        product_kind: Option<ProductKind>,
        order_id: Option<Uuid>,
        customer_name: Option<String>,
        what: Option<String>,
        redeemed_at: Option<DateTime<Utc>>,
        redeemed_by: Option<String>,
        place: Option<String>,
        for_title: Option<String>,
        for_tier: Option<String>,
        for_starts: Option<DateTime<Utc>>,
        overridden: bool,
    }
    let row: Row = sqlx::query_as(
        "select outcome, product_kind, order_id, customer_name, what, redeemed_at, \
                redeemed_by, place, for_title, for_tier, for_starts, overridden \
           from hf_redeem($1, $2, $3, $4, $5, $6)",
    )
    .bind(&code)
    .bind(door.by)
    .bind(door.place)
    .bind(door.attempt)
    .bind(door.checks)
    .bind(door.overrule)
    .fetch_one(executor)
    .await?;
    crate::faults::lost_answer("redemption")?;
    let kind = row.product_kind;
    let outcome = match row.outcome.as_str() {
        "redeemed" => Outcome::Redeemed {
            word: kind
                .and_then(ProductKind::code_words)
                .map_or("redeemed", |words| words.redeemed),
        },
        "already_used" => Outcome::AlreadyUsed {
            at: row.redeemed_at.unwrap_or_default(),
            by: row.redeemed_by.unwrap_or_default(),
            place: row.place.unwrap_or_default(),
        },
        "refunded" => Outcome::Refunded,
        "cancelled" => Outcome::Cancelled,
        "not_paid" => Outcome::NotPaid,
        "not_this_door" => Outcome::NotThisDoor,
        _ => Outcome::NotValid,
    };
    let made_for = row.for_title.map(|title| MadeFor {
        title,
        tier: row.for_tier.unwrap_or_default(),
        starts_at: row.for_starts,
    });
    Ok(Redemption {
        code,
        outcome,
        kind,
        order_id: row.order_id,
        customer_name: row.customer_name,
        what: row.what,
        made_for,
        overridden: row.overridden,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_read_as_staff_type_them() {
        assert_eq!(normalise(" tkt-abcd-efgh "), "TKT-ABCD-EFGH");
        assert_eq!(normalise("tkt abcd efgh"), "TKT-ABCD-EFGH");
        assert_eq!(normalise("TKTABCDEFGH"), "TKT-ABCD-EFGH");
        assert_eq!(normalise("k7p 2qx"), "K7P2QX");
        assert_eq!(normalise(""), "");
    }

    #[test]
    fn a_code_says_what_it_is_for_once() {
        let zone = crate::clock::ShopZone::UTC;
        let at = "2026-12-20T19:30:00Z".parse().unwrap();
        let ticket = MadeFor {
            title: "Winter Jazz".into(),
            tier: "General".into(),
            starts_at: Some(at),
        };
        assert_eq!(
            ticket.describe(zone),
            "Winter Jazz, Sun 20 Dec 19:30 UTC, General"
        );
        let slot = MadeFor {
            title: "Bakery pickup".into(),
            tier: "Sourdough box, pickup Sun 20 Dec 19:30 UTC".into(),
            starts_at: Some(at),
        };
        assert_eq!(
            slot.describe(zone),
            "Bakery pickup, Sourdough box, pickup Sun 20 Dec 19:30 UTC"
        );
        let table = MadeFor {
            title: "A table at the Harbour Bistro".into(),
            tier: "A table at the Harbour Bistro, Sun 20 Dec 19:30 UTC".into(),
            starts_at: Some(at),
        };
        assert_eq!(
            table.describe(zone),
            "A table at the Harbour Bistro, Sun 20 Dec 19:30 UTC"
        );
    }

    #[test]
    fn a_door_answer_starts_with_its_word() {
        assert_eq!(
            Outcome::Redeemed { word: "admitted" }.headline(),
            "Admitted"
        );
        assert_eq!(
            Outcome::AlreadyUsed {
                at: DateTime::default(),
                by: String::new(),
                place: String::new()
            }
            .headline(),
            "Already used"
        );
    }
}
