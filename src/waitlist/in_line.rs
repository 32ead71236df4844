//! An entry taking its place in line, when its link confirms it, and
//! leaving the line, when the shopper or staff take it off; each hands
//! over what is free to the line in the same transaction.

use serde_json::json;
use sqlx::PgPool;
use uuid::Uuid;

use super::{hand_over, line_moved, token_shaped};
use crate::audit::{self, Actor};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Confirmed {
    /// In line now (and perhaps offered units at once, if some were free).
    InLine,
    /// It was confirmed before: nothing changed.
    Already,
    /// No such entry, or one that left the list.
    NotFound,
}

/// Confirm an entry by its link: it takes its place in line, and units
/// free now are handed over at once, in the same transaction.
pub async fn confirm(pool: &PgPool, token: &str) -> sqlx::Result<Confirmed> {
    if !token_shaped(token) {
        return Ok(Confirmed::NotFound);
    }
    let mut tx = pool.begin().await?;
    // lock: the product, shared (a queue's draw takes it exclusively), so
    // an entry confirmed while its queue is drawn is either in the draw or
    // behind it, never left out
    /// The entry's product: its resource, and whether a drop queue not
    /// drawn yet takes its entries.
    #[derive(sqlx::FromRow)]
    struct Product {
        resource_id: String,
        queued: bool,
    }
    let product: Option<Product> = sqlx::query_as(
        "select p.resource_id, \
                (p.queue_commitment is not null and p.queue_drawn_at is null) as queued \
           from waitlist_entries w join products p on p.id = w.product_id \
          where w.token = $1 and w.state = 'unconfirmed' for share of p",
    )
    .bind(token)
    .fetch_optional(&mut *tx)
    .await?;
    let confirmed: Option<String> = match product {
        None => None,
        Some(Product {
            resource_id: resource,
            queued,
        }) => {
            // lock: the resource before the entry, as every path that moves
            // a line takes them (an entry leaving, ending a hold, the draw)
            sqlx::query("select 1 from resources where id = $1 for no key update")
                .bind(&resource)
                .execute(&mut *tx)
                .await?;
            sqlx::query_scalar(
                "update waitlist_entries \
                set state = case when $2 then 'queued' else 'waiting' end, \
                    line_no = case when $2 then null else nextval('waitlist_line') end, \
                    confirmed_at = now() \
              where token = $1 and state = 'unconfirmed' returning $3::text",
            )
            .bind(token)
            .bind(queued)
            .bind(&resource)
            .fetch_optional(&mut *tx)
            .await?
        }
    };
    let answer = match confirmed {
        Some(resource) => {
            hand_over(&mut tx, &resource).await?;
            Confirmed::InLine
        }
        None => {
            let state: Option<String> =
                sqlx::query_scalar("select state from waitlist_entries where token = $1")
                    .bind(token)
                    .fetch_optional(&mut *tx)
                    .await?;
            match state.as_deref() {
                Some("queued" | "waiting" | "offered" | "claimed" | "lapsed") => Confirmed::Already,
                _ => Confirmed::NotFound,
            }
        }
    };
    tx.commit().await?;
    Ok(answer)
}

/// Take an entry off its list (not one whose units are held: that offer
/// runs its course). True when it was taken off.
pub async fn remove(pool: &PgPool, by: Actor<'_>, entry_id: Uuid) -> sqlx::Result<bool> {
    let mut tx = pool.begin().await?;
    let who = by.name();
    // lock: the entry's resource before the entry, as ending a hold takes
    // them (the resource, then the entries in line), so the two never wait
    // on each other in a circle
    let locked: Option<String> = sqlx::query_scalar(
        "select r.id from waitlist_entries w join products p on p.id = w.product_id \
           join resources r on r.id = p.resource_id \
          where w.id = $1 for no key update of r",
    )
    .bind(entry_id)
    .fetch_optional(&mut *tx)
    .await?;
    if locked.is_none() {
        return Ok(false);
    }
    /// The entry taken off: its product and the product's resource.
    #[derive(sqlx::FromRow)]
    struct Removed {
        product_id: String,
        resource_id: String,
    }
    let removed: Option<Removed> = sqlx::query_as(
        "update waitlist_entries w set state = 'removed', ended_at = now(), ended_by = $2 \
           from products p \
          where w.id = $1 and w.state in ('unconfirmed', 'queued', 'waiting') \
            and p.id = w.product_id \
         returning w.product_id, p.resource_id",
    )
    .bind(entry_id)
    .bind(&who)
    .fetch_optional(&mut *tx)
    .await?;
    let Some(Removed {
        product_id: product,
        resource_id: resource,
    }) = removed
    else {
        return Ok(false);
    };
    // what was set aside for the line is looked at again: for those behind
    // this entry, or back on sale when nobody waits
    hand_over(&mut tx, &resource).await?;
    line_moved(&mut tx, &resource).await?;
    if let Actor::Staff(_) = by {
        audit::record(
            &mut tx,
            by,
            "remove_waitlist_entry",
            &entry_id.to_string(),
            "removed",
            json!({ "product": product }),
        )
        .await?;
    }
    tx.commit().await?;
    if let Actor::Staff(_) = by {
        audit::log_action(
            by,
            "remove_waitlist_entry",
            &entry_id.to_string(),
            "removed",
        );
    }
    Ok(true)
}
