//! Staff keep a seated event's plan (docs/design.md, "Reserved seating",
//! "The seat plan in the admin"): seats blocked, unblocked, held back and
//! released, a section's plan replaced, a section moved to another price
//! category, a category's name, colour and price, and whether "best
//! available" may sell seats apart. Each change is one transaction with
//! its audit line; a refusal (a shopper's seat, named) changes nothing
//! and is recorded as refused.

use serde_json::json;
use sqlx::PgPool;

use super::publishing::{self, Thing};
use super::{StaffError, StaffMember};
use crate::audit;
use crate::catalogue::CollectionKind;
use crate::catalogue::edit::{self, ProductEdit};
use crate::catalogue::seats::admin::{self, CategoryInfo, PlanOutcome, SetOutcome};

/// What staff do to the seats they ticked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SeatAction {
    /// Off sale (a camera position, a broken seat), with a note.
    Block,
    /// A blocked seat back on sale.
    Unblock,
    /// Kept for the house (sponsors, press), with a note.
    HoldBack,
    /// A seat held back, back on sale.
    Release,
}

impl SeatAction {
    pub const ALL: [SeatAction; 4] = [
        SeatAction::Block,
        SeatAction::Unblock,
        SeatAction::HoldBack,
        SeatAction::Release,
    ];

    /// As the form's button sends it.
    pub fn as_str(self) -> &'static str {
        match self {
            SeatAction::Block => "block",
            SeatAction::Unblock => "unblock",
            SeatAction::HoldBack => "hold_back",
            SeatAction::Release => "release",
        }
    }

    pub fn parse(word: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|a| a.as_str() == word)
    }

    /// The state the seats go to.
    fn state(self) -> &'static str {
        match self {
            SeatAction::Block => "blocked",
            SeatAction::HoldBack => "held_back",
            SeatAction::Unblock | SeatAction::Release => "open",
        }
    }

    /// The states a seat may be in for it.
    fn from(self) -> &'static [&'static str] {
        match self {
            SeatAction::Block | SeatAction::HoldBack => &["open", "blocked", "held_back"],
            SeatAction::Unblock => &["blocked"],
            SeatAction::Release => &["held_back"],
        }
    }

    /// Whether it takes a note.
    pub fn noted(self) -> bool {
        matches!(self, SeatAction::Block | SeatAction::HoldBack)
    }

    /// The audit log's name for it.
    fn action(self) -> &'static str {
        match self {
            SeatAction::Block => "seat_block",
            SeatAction::Unblock => "seat_unblock",
            SeatAction::HoldBack => "seat_hold_back",
            SeatAction::Release => "seat_release",
        }
    }
}

/// Ticked seats of `section` blocked, held back or put back on sale, all
/// or none, recorded.
pub async fn set_seats(
    pool: &PgPool,
    staff: &StaffMember,
    section: &str,
    action: SeatAction,
    labels: &[String],
    note: &str,
) -> super::Result<SetOutcome> {
    let note = if action.noted() { note } else { "" };
    let mut tx = pool.begin().await?;
    let outcome = admin::set_state(
        &mut tx,
        section,
        labels,
        action.state(),
        note,
        action.from(),
    )
    .await
    .map_err(refused_input)?;
    let (word, detail) = match &outcome {
        SetOutcome::Changed { changed, total } => (
            "changed",
            json!({ "seats": labels, "note": note, "changed": changed, "on_sale": total }),
        ),
        SetOutcome::Taken(seats) => ("refused_taken", json!({ "seats": seats })),
        SetOutcome::WrongState(seats) => ("refused_state", json!({ "seats": seats })),
        SetOutcome::Unknown(seats) => ("refused_unknown", json!({ "seats": seats })),
    };
    audit::record(&mut tx, staff, action.action(), section, word, detail).await?;
    tx.commit().await?;
    audit::log_action(staff, action.action(), section, word);
    Ok(outcome)
}

/// The section's plan replaced by `rows` (checked already, as
/// `catalogue::seats::fielded_rows` makes them), recorded.
pub async fn replace_plan(
    pool: &PgPool,
    staff: &StaffMember,
    section: &str,
    rows: &serde_json::Value,
) -> super::Result<PlanOutcome> {
    let mut tx = pool.begin().await?;
    let outcome = admin::replace_plan(&mut tx, section, rows)
        .await
        .map_err(refused_input)?;
    let (word, detail) = match &outcome {
        PlanOutcome::Changed {
            added,
            placed,
            removed,
            total,
        } => (
            "changed",
            json!({ "rows": rows.as_array().map_or(0, Vec::len), "added": added,
                    "placed": placed, "removed": removed, "on_sale": total }),
        ),
        PlanOutcome::Taken(seats) => ("refused_taken", json!({ "seats": seats })),
    };
    audit::record(&mut tx, staff, "seat_plan", section, word, detail).await?;
    tx.commit().await?;
    audit::log_action(staff, "seat_plan", section, word);
    Ok(outcome)
}

/// The section moved to the event's category `category` (its price
/// follows); `false` when the event has no such category.
pub async fn move_section(
    pool: &PgPool,
    staff: &StaffMember,
    section: &str,
    category: &str,
) -> super::Result<bool> {
    let mut tx = pool.begin().await?;
    let Some((was, price_was)) = admin::set_category(&mut tx, section, category).await? else {
        return Ok(false);
    };
    audit::record(
        &mut tx,
        staff,
        "seat_section_category",
        section,
        "updated",
        json!({ "category": { "from": was, "to": category }, "price_minor_was": price_was }),
    )
    .await?;
    tx.commit().await?;
    audit::log_action(staff, "seat_section_category", section, "updated");
    Ok(true)
}

/// A category of the event `event` renamed, recoloured or repriced (its
/// sections' prices follow); `false` when the event has no such category.
pub async fn save_category(
    pool: &PgPool,
    staff: &StaffMember,
    event: &str,
    category: &CategoryInfo,
) -> super::Result<bool> {
    let mut tx = pool.begin().await?;
    let Some(before) = admin::save_category(&mut tx, event, category).await? else {
        return Ok(false);
    };
    let target = format!("{event}/{}", category.id);
    audit::record(
        &mut tx,
        staff,
        "seat_category",
        &target,
        "updated",
        json!({
            "name": { "from": before.name, "to": category.name },
            "colour": { "from": before.colour, "to": category.colour },
            "price_minor": { "from": before.price_minor, "to": category.price_minor },
        }),
    )
    .await?;
    tx.commit().await?;
    audit::log_action(staff, "seat_category", &target, "updated");
    Ok(true)
}

/// Whether "best available" may sell seats apart, set and recorded.
pub async fn set_splits(pool: &PgPool, staff: &StaffMember, splits: bool) -> super::Result<()> {
    let mut tx = pool.begin().await?;
    let before = admin::set_splits(&mut tx, splits).await?;
    audit::record(
        &mut tx,
        staff,
        "seat_splits",
        "seating",
        "updated",
        json!({ "splits": { "from": before, "to": splits } }),
    )
    .await?;
    tx.commit().await?;
    audit::log_action(staff, "seat_splits", "seating", "updated");
    Ok(())
}

/// The database's refusal of bad input (`hf_bad_input`) in its words.
fn refused_input(error: sqlx::Error) -> StaffError {
    match &error {
        sqlx::Error::Database(db) if db.code().as_deref() == Some("22023") => {
            StaffError::InvalidInput(db.message().to_owned())
        }
        _ => StaffError::Database(error),
    }
}

/// A new price category of the event `event`; `false` when the event has
/// one of that id already (nothing written).
pub async fn add_category(
    pool: &PgPool,
    staff: &StaffMember,
    event: &str,
    category: &CategoryInfo,
) -> super::Result<bool> {
    let mut tx = pool.begin().await?;
    if !admin::add_category(&mut tx, event, category).await? {
        return Ok(false);
    }
    let target = format!("{event}/{}", category.id);
    audit::record(
        &mut tx,
        staff,
        "seat_category",
        &target,
        "created",
        json!({ "name": category.name, "colour": category.colour,
                "price_minor": category.price_minor }),
    )
    .await?;
    tx.commit().await?;
    audit::log_action(staff, "seat_category", &target, "created");
    Ok(true)
}

/// What adding a section came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SectionAdded {
    /// On sale with its seats (a draft while the event's tiers start as
    /// drafts).
    Added,
    /// Its id belongs to something the shop has or had: nothing written.
    Taken,
}

/// A new seated section of its event: `product` (of the kind seat, its
/// capacity the plan's seats, its price its category's), the section in
/// `category`, and its plan from `rows`; one transaction with its audit
/// line.
pub async fn add_section(
    pool: &PgPool,
    staff: &StaffMember,
    product: &ProductEdit,
    category: &str,
    rows: &serde_json::Value,
) -> super::Result<SectionAdded> {
    product.check().map_err(|e| StaffError::InvalidInput(e.0))?;
    let mut tx = pool.begin().await?;
    let taken: bool = sqlx::query_scalar("select exists (select 1 from products where id = $1)")
        .bind(&product.id)
        .fetch_one(&mut *tx)
        .await?;
    if taken {
        return Ok(SectionAdded::Taken);
    }
    edit::put_product_in(&mut tx, product)
        .await
        .map_err(super::catalogue::edit_error)?;
    if CollectionKind::Event.products_start_as_drafts() {
        publishing::start_as_draft(&mut tx, Thing::Product(&product.id)).await?;
    }
    let outcome = admin::add_section(
        &mut tx,
        &product.collection,
        &product.id,
        category,
        &product.name,
        rows,
    )
    .await?;
    let PlanOutcome::Changed { total, .. } = outcome else {
        // a new section has no seat a shopper holds
        return Err(StaffError::InvalidInput(
            "the plan could not be made".into(),
        ));
    };
    audit::record(
        &mut tx,
        staff,
        "seat_section",
        &product.id,
        "created",
        json!({ "event": product.collection, "category": category, "name": product.name,
                "rows": rows.as_array().map_or(0, Vec::len), "on_sale": total }),
    )
    .await?;
    tx.commit().await?;
    audit::log_action(staff, "seat_section", &product.id, "created");
    Ok(SectionAdded::Added)
}
