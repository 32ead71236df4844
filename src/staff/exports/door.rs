//! The door's printable list of a slot or an event: its codes by name, to
//! tick off, never cut short; and the title the list is headed with.

use chrono::{DateTime, Utc};
use futures::stream::StreamExt;
use sqlx::PgPool;

use super::attendees::AttendeeLine;
use super::csv::rows;
use super::filter::{ExportFilter, check_names, record_export};
use super::{ExportError, invalid};
use crate::audit::Actor;
use crate::clock::ShopZone;
use crate::staff::StaffMember;

/// The door's list shows at most this many codes; a larger sale is
/// narrowed to one tier or slot, or exported as CSV. A list is never cut
/// short: a name missing at the door turns a paying guest away.
pub const DOOR_LIST_LIMIT: usize = 5_000;

/// A slot's or an event's codes, by name, for the door to tick off.
#[derive(Debug, Clone)]
pub enum DoorList {
    Listed {
        codes: Vec<AttendeeLine>,
        redeemed: usize,
        refunded: usize,
    },
    /// More codes than a list shows ([`DOOR_LIST_LIMIT`]).
    TooMany,
}

/// The door's list for a filter that names a product or a collection;
/// recorded in Activity as `door_list`.
pub async fn door_list(
    pool: &PgPool,
    staff: &StaffMember,
    filter: &ExportFilter,
    zone: ShopZone,
) -> Result<DoorList, ExportError> {
    if !filter.names_a_sale() {
        return Err(invalid(
            "Choose a slot, a tier or an event: a door's list is of one of them.",
        ));
    }
    check_names(pool, filter).await?;
    record_export(pool, Actor::from(staff), "door_list", filter).await?;
    // one more than a list shows tells that there are too many
    let codes: Vec<AttendeeLine> = rows::<AttendeeLine>(pool, filter, zone)
        .take(DOOR_LIST_LIMIT + 1)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<Result<_, _>>()?;
    if codes.len() > DOOR_LIST_LIMIT {
        return Ok(DoorList::TooMany);
    }
    Ok(DoorList::Listed {
        redeemed: codes.iter().filter(|c| c.redeemed_at.is_some()).count(),
        refunded: codes.iter().filter(|c| c.refunded).count(),
        codes,
    })
}

/// What a door's list is of, as its heading says it: "Harbour Lights —
/// VIP — Mon 14 Dec 2026, 19:30 CET", "Harbour Lights" (a collection's
/// title); the filter's words when it names neither.
pub async fn sale_title(
    pool: &PgPool,
    filter: &ExportFilter,
    zone: ShopZone,
) -> sqlx::Result<String> {
    if let Some(product) = &filter.product {
        #[derive(sqlx::FromRow)]
        struct Product {
            name: String,
            starts_at: Option<DateTime<Utc>>,
        }
        let found: Option<Product> =
            sqlx::query_as("select name, starts_at from products where id = $1")
                .bind(product)
                .fetch_optional(pool)
                .await?;
        return Ok(match found {
            Some(Product {
                name,
                starts_at: Some(at),
            }) => format!("{name} — {}", zone.long(at)),
            Some(Product { name, .. }) => name,
            None => product.clone(),
        });
    }
    if let Some(collection) = &filter.collection {
        let title: Option<String> =
            sqlx::query_scalar("select title from collections where id = $1")
                .bind(collection)
                .fetch_optional(pool)
                .await?;
        return Ok(title.unwrap_or_else(|| collection.clone()));
    }
    Ok(filter.words())
}
