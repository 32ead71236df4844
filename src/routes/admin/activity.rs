//! The Activity page: every staff action as a sentence an owner reads
//! ("grace@… refunded 2 × General of order 7F3A-91C2-E4B0 (€40.00)"),
//! newest first, 50 a page by cursor (the last action shown, so a page
//! never repeats or skips one while staff work), with what the record
//! keeps behind each sentence for whoever needs it.

use std::collections::HashMap;

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, web};
use askama::Template;
use serde::Deserialize;

use super::notices::NoticeQuery;
use super::pages::{Nav, nav, render};
use crate::audit::{self, ActionRow};
use crate::routes::ShopError;
use crate::staff::Session;
use crate::state::Shop;

/// Actions a page shows.
const PAGE: i64 = 50;

/// Outcomes that say it was done; any other is said after the sentence.
const DONE: [&str; 14] = [
    "ok", "done", "queued", "archived", "restored", "created", "updated", "saved", "changed",
    "made", "removed", "on", "off", "admitted",
];

/// One action as the page shows it.
pub(super) struct Line {
    row: ActionRow,
    sentence: String,
    /// Not done: what came of it instead ("refused: too many").
    outcome: Option<String>,
}

impl Line {
    /// Whether its record keeps more than what, on what and how.
    fn has_detail(&self) -> bool {
        match &self.row.detail {
            serde_json::Value::Null => false,
            serde_json::Value::Object(fields) => !fields.is_empty(),
            _ => true,
        }
    }
}

#[derive(Template)]
#[template(path = "admin/activity.html")]
pub(super) struct ActivityPage {
    nav: Nav,
    lines: Vec<Line>,
    total: i64,
    /// This page is not the first.
    paged: bool,
    /// The action the next (older) page starts before, when there is one.
    older: Option<i64>,
}

#[derive(Deserialize)]
pub struct ActivityQuery {
    before: Option<String>,
}

/// `GET /admin/activity?before=<id>`.
pub async fn activity(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    query: web::Query<ActivityQuery>,
) -> Result<HttpResponse, ShopError> {
    let before = match query.before.as_deref().map(str::trim) {
        None | Some("") => None,
        Some(id) => Some(id.parse::<i64>().map_err(|_| {
            ShopError::bad_request("that page of Activity is not one this list gave")
        })?),
    };
    let mut rows = audit::page(&shop.pool, before, PAGE + 1).await?;
    let older = if rows.len() > PAGE as usize {
        rows.truncate(PAGE as usize);
        rows.last().map(|r| r.id)
    } else {
        None
    };
    let ids: Vec<String> = rows.iter().flat_map(products_named).collect();
    let names: HashMap<String, String> = audit::product_names(&shop.pool, &ids)
        .await?
        .into_iter()
        .collect();
    let lines = rows
        .into_iter()
        .map(|row| Line {
            sentence: sentence(&row, &names),
            outcome: (!DONE.contains(&row.outcome.as_str())).then(|| row.outcome.replace('_', " ")),
            row,
        })
        .collect();
    let page = ActivityPage {
        nav: nav(&shop, &session, &NoticeQuery::default()).await?,
        lines,
        total: audit::count(&shop.pool).await?,
        paged: before.is_some(),
        older,
    };
    render(StatusCode::OK, &page)
}

/// The products an action's record names: a refund's units, an archived
/// or restored product.
fn products_named(row: &ActionRow) -> Vec<String> {
    match row.action.as_str() {
        "refund_order" => refund_units(row).into_iter().map(|(id, _)| id).collect(),
        "archive_product" | "restore_product" | "set_capacity" | "repair_resource" => {
            vec![row.target.clone()]
        }
        _ => Vec::new(),
    }
}

/// A refund's units as its record keeps them: `[["general", 2], …]`.
fn refund_units(row: &ActionRow) -> Vec<(String, i64)> {
    row.detail["units"]
        .as_array()
        .map(|units| {
            units
                .iter()
                .filter_map(|u| Some((u[0].as_str()?.to_owned(), u[1].as_i64()?)))
                .collect()
        })
        .unwrap_or_default()
}

/// A text field of the record's detail, if it has one.
fn said<'a>(row: &'a ActionRow, field: &str) -> Option<&'a str> {
    row.detail[field].as_str().filter(|s| !s.is_empty())
}

/// The action as a sentence, its doer first.
fn sentence(row: &ActionRow, names: &HashMap<String, String>) -> String {
    let who = &row.email;
    let target = &row.target;
    let product = || names.get(target).cloned().unwrap_or_else(|| target.clone());
    let order = || match &row.order_number {
        Some(number) => format!("order {number}"),
        None => format!("order {}", target.get(..8).unwrap_or(target)),
    };
    let what = match row.action.as_str() {
        "login" => "signed in".to_owned(),
        "logout" => "signed out".to_owned(),
        "refund_order" => {
            let units: Vec<String> = refund_units(row)
                .into_iter()
                .filter(|(_, n)| *n > 0)
                .map(|(id, n)| format!("{n} × {}", names.get(&id).unwrap_or(&id)))
                .collect();
            let amount = match (row.detail["amount_minor"].as_i64(), said(row, "currency")) {
                (Some(minor), Some(currency)) => {
                    format!(" ({})", crate::money::format(minor, currency))
                }
                _ => String::new(),
            };
            format!("refunded {} of {}{amount}", units.join(", "), order())
        }
        "retry_refund" => format!("retried a refund of {}", order()),
        "release_hold" => format!("released the hold {}", target.get(..8).unwrap_or(target)),
        "redeem" => format!("checked in the code {target}"),
        "archive_product" => format!("archived {}", product()),
        "restore_product" => format!("restored {}", product()),
        "archive_collection" => format!("archived {}", said(row, "title").unwrap_or(target)),
        "restore_collection" => format!("restored {}", said(row, "title").unwrap_or(target)),
        "archive_voucher" => format!("archived the voucher {target}"),
        "restore_voucher" => format!("restored the voucher {target}"),
        "create_voucher" | "add_voucher" => format!("created the voucher {target}"),
        "save_event" | "save_tier" | "save_stock" | "save_schedule" => {
            let noun = match row.action.as_str() {
                "save_event" => "the event",
                "save_tier" => "the tier",
                "save_stock" => "the stock item",
                _ => "the schedule",
            };
            let verb = if row.outcome == "created" {
                "created"
            } else {
                "changed"
            };
            format!("{verb} {noun} {target}")
        }
        "set_capacity" => format!("changed the capacity of {}", product()),
        "repair_resource" => format!("recounted {}", product()),
        "add_staff" => format!("added the account {target}"),
        "invite_staff" => format!("invited {target}"),
        "resend_invite" => format!("sent the invite of {target} again"),
        "cancel_invite" => format!("cancelled the invite of {target}"),
        "accept_invite" => "chose a password and joined the staff".to_owned(),
        "change_role" => format!("changed the role of account {target}"),
        "disable_staff" => format!("disabled the account {target}"),
        "enable_staff" => format!("enabled the account {target}"),
        "set_password" => format!("set a new password for {target}"),
        "reset_two_factor" => format!("reset two-factor sign-in of account {target}"),
        "two_factor_on" => "turned two-factor sign-in on".to_owned(),
        "two_factor_off" => "turned two-factor sign-in off".to_owned(),
        "new_recovery_codes" => "made new recovery codes".to_owned(),
        "change_setting" | "two_factor_for_refunds" => format!("changed the setting {target}"),
        "storefront" => "changed the shop's name and looks".to_owned(),
        "add_api_key" => format!("made the API key {target}"),
        "revoke_api_key" => format!("revoked the API key {target}"),
        "api_checkout" => "started a checkout through the API".to_owned(),
        "api_refused" => format!("was refused by the API ({target})"),
        "add_webhook" => format!("added the webhook endpoint {target}"),
        "enable_webhook" => format!("enabled the webhook endpoint {target}"),
        "disable_webhook" => format!("disabled the webhook endpoint {target}"),
        "replay_webhook" => format!("replayed deliveries to {target}"),
        "save_dining_room" if row.outcome == "created" => {
            format!("made the dining room {target}")
        }
        "save_dining_room" => format!("changed the set-up of {target}"),
        "waitlist_rules" => format!("changed the waiting list's rules for {target}"),
        "turn_queue_on" => format!("turned the queue on for {target}"),
        "remove_waitlist_entry" => "removed an entry from the waiting list".to_owned(),
        "export_orders" => "exported the orders".to_owned(),
        "export_attendees" => "exported the attendees".to_owned(),
        "door_list" => "printed a door list".to_owned(),
        "refused" => format!("was refused {target}"),
        action if action.starts_with("seat_") => seat_words(row, &product()),
        other => format!("{} {target}", other.replace('_', " ")),
    };
    format!("{who} {what}")
}

/// A change to a seat plan as a sentence ("blocked A-1, A-2 of Stalls
/// (camera)"); a refusal says what was tried.
fn seat_words(row: &ActionRow, section: &str) -> String {
    let seats = row.detail["seats"]
        .as_array()
        .map(|seats| {
            let named: Vec<&str> = seats.iter().filter_map(|s| s.as_str()).take(12).collect();
            let more = seats.len().saturating_sub(named.len());
            if more > 0 {
                format!("{} and {more} more", named.join(", "))
            } else {
                named.join(", ")
            }
        })
        .unwrap_or_default();
    let note = said(row, "note")
        .map(|note| format!(" ({note})"))
        .unwrap_or_default();
    let done = match row.action.as_str() {
        "seat_block" => format!("blocked {seats} of {section}{note}"),
        "seat_unblock" => format!("unblocked {seats} of {section}"),
        "seat_hold_back" => format!("held back {seats} of {section}{note}"),
        "seat_release" => format!("released {seats} of {section}"),
        "seat_plan" => format!("replaced the seat plan of {section}"),
        "seat_section_category" => format!("moved {section} to another category"),
        "seat_category" if row.outcome == "created" => {
            format!("added the seat category {}", row.target)
        }
        "seat_category" => format!("changed the seat category {}", row.target),
        "seat_section" => format!("added the seated section {section}"),
        "seat_splits" => "changed whether seats may be sold apart".to_owned(),
        other => format!("{} {section}", other.replace('_', " ")),
    };
    if row.outcome.starts_with("refused") {
        format!("was refused: {done}")
    } else {
        done
    }
}
