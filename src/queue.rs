//! The drop queue of a product whose sale opens at a set time
//! (docs/waiting-list.md, "The drop queue"), and the check anyone can run
//! that its order was fair.
//!
//! Turning the queue on draws a 256-bit seed from the operating system and
//! publishes its SHA-256, the **commitment**, before anyone joins. Until
//! the sale opens, shoppers join the pre-queue (the waiting list's form and
//! confirmation); each is shown their entry's id. At opening the confirmed
//! entries are **drawn** ([`draw`]): each entry's rank is
//! `HMAC-SHA256(key = seed, message = entry id)` ([`rank`]), in ascending
//! byte order, and the entries take their places in line in that order;
//! then the seed is published with the list ([`Published`], served as JSON
//! at `/queue/<product>/order.json`). Anyone can recompute every position from
//! the seed and the list ([`verify`]; `holdfast queue verify PRODUCT`), and
//! check the seed against the commitment published before the draw.
//!
//! Admission is by units, not by rate: the draw ends with the waiting
//! list's handover, which holds units for the first entries in line as far
//! as they go, each for the product's claim window; an offer not paid in
//! time goes to the next entry.

use chrono::{DateTime, Utc};
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use sqlx::PgPool;
use uuid::Uuid;

/// An entry's rank: HMAC-SHA256 with the seed as the key and the entry's
/// id, as its hyphenated lower-case text (`3f2a…-…`), as the message.
pub fn rank(seed: &[u8], entry: &Uuid) -> [u8; 32] {
    let mut mac = Hmac::<Sha256>::new_from_slice(seed).expect("HMAC takes any key length");
    mac.update(entry.hyphenated().to_string().as_bytes());
    mac.finalize().into_bytes().into()
}

/// The entries in the order their ranks give (ascending; equal ranks, which
/// SHA-256 makes as good as impossible, by id).
pub fn order(seed: &[u8], entries: &[Uuid]) -> Vec<Uuid> {
    let mut ranked: Vec<([u8; 32], Uuid)> = entries.iter().map(|e| (rank(seed, e), *e)).collect();
    ranked.sort();
    ranked.into_iter().map(|(_, e)| e).collect()
}

/// The commitment to a seed: its SHA-256, in hex.
pub fn commitment(seed: &[u8]) -> String {
    hex::encode(Sha256::digest(seed))
}

/// What a product's queue publishes: before the draw only the commitment;
/// after it, the seed, the frozen list of entries (by id) and the order
/// they were drawn in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Published {
    pub product_id: String,
    /// SHA-256 of the seed, in hex, published when the queue was turned on.
    pub commitment: String,
    pub sale_opens_at: DateTime<Utc>,
    pub drawn_at: Option<DateTime<Utc>>,
    /// The seed, in hex, once drawn.
    pub seed: Option<String>,
    /// Every entry drawn, sorted by id (the frozen list).
    pub entries: Vec<Uuid>,
    /// The same entries in the order they were placed in line.
    pub order: Vec<Uuid>,
    /// How the order is computed, in words.
    pub rule: String,
}

pub const RULE: &str = "rank = HMAC-SHA256(key = the seed's 32 bytes, message = the entry id as \
     lower-case hyphenated text); entries in ascending rank order (bytes compared in order); \
     commitment = SHA-256(seed)";

/// Check a published queue: the seed matches the commitment, and the order
/// is the one the seed gives the list. The number of positions checked.
pub fn verify(published: &Published) -> Result<usize, String> {
    let Some(seed) = &published.seed else {
        return Err("the queue has not been drawn yet: only its commitment is published".into());
    };
    let seed = hex::decode(seed).map_err(|_| "the published seed is not hex".to_owned())?;
    if commitment(&seed) != published.commitment {
        return Err(format!(
            "the seed's SHA-256 is {}, not the commitment {} published before the draw",
            commitment(&seed),
            published.commitment
        ));
    }
    let mut listed = published.entries.clone();
    listed.sort();
    listed.dedup();
    if listed.len() != published.entries.len() {
        return Err("the list names an entry twice".into());
    }
    let mut placed = published.order.clone();
    placed.sort();
    if placed != listed {
        return Err("the order and the list are not the same entries".into());
    }
    let want = order(&seed, &published.entries);
    if let Some(at) = want.iter().zip(&published.order).position(|(w, g)| w != g) {
        return Err(format!(
            "position {} is {}, but the seed puts {} there",
            at + 1,
            published.order[at],
            want[at]
        ));
    }
    Ok(want.len())
}

#[derive(Debug, thiserror::Error)]
pub enum QueueError {
    #[error("{0}")]
    Refused(String),
    #[error(transparent)]
    Database(#[from] sqlx::Error),
}

/// Turn a product's queue on: a fresh seed, its commitment, and every free
/// unit set aside for the queue. Only before its sale opens. Recorded in
/// Activity as `turn_queue_on`, with the commitment, in the same
/// transaction.
pub async fn turn_on(
    pool: &PgPool,
    by: crate::audit::Actor<'_>,
    product_id: &str,
) -> Result<String, QueueError> {
    let seed: [u8; 32] = rand::random();
    let commitment = commitment(&seed);
    let mut tx = pool.begin().await?;
    /// its sale's opening, whether its queue is on, its resource, the
    /// database's now
    type Row = (Option<DateTime<Utc>>, bool, String, DateTime<Utc>);
    let product: Option<Row> = sqlx::query_as(
        "select sale_opens_at, queue_commitment is not null, resource_id, now() from products \
          where id = $1 and active and archived_at is null for no key update",
    )
    .bind(product_id)
    .fetch_optional(&mut *tx)
    .await?;
    let Some((opens, on, resource, now)) = product else {
        return Err(QueueError::Refused(format!(
            "no product {product_id} on sale"
        )));
    };
    if on {
        return Err(QueueError::Refused(format!(
            "{product_id}'s queue is on already; its commitment stays as published"
        )));
    }
    match opens {
        Some(at) if at > now => {}
        _ => {
            return Err(QueueError::Refused(format!(
                "{product_id} needs a sale opening time in the future for a queue"
            )));
        }
    }
    sqlx::query("update products set queue_seed = $2, queue_commitment = $3 where id = $1")
        .bind(product_id)
        .bind(&seed[..])
        .bind(&commitment)
        .execute(&mut *tx)
        .await?;
    crate::waitlist::hand_over(&mut tx, &resource).await?;
    crate::audit::commit(
        tx,
        by,
        "turn_queue_on",
        product_id,
        "on",
        serde_json::json!({ "commitment": commitment, "sale_opens_at": opens }),
    )
    .await?;
    Ok(commitment)
}

/// Draw every queue whose sale has opened: the worker's tick runs this,
/// and so does any page of such a queue. How many were drawn.
pub async fn draw_due(pool: &PgPool) -> sqlx::Result<usize> {
    let due: Vec<String> = sqlx::query_scalar(
        "select id from products where queue_commitment is not null and queue_drawn_at is null \
            and sale_opens_at <= now() order by id",
    )
    .fetch_all(pool)
    .await?;
    let mut drawn = 0;
    for product in due {
        if draw(pool, &product).await? {
            drawn += 1;
        }
    }
    Ok(drawn)
}

/// Draw one product's queue, once its sale has opened: in one transaction,
/// the confirmed entries take their places in the seed's order, the draw
/// is recorded, and units are held for the first in line. False when it
/// was drawn already (or is not due).
pub async fn draw(pool: &PgPool, product_id: &str) -> sqlx::Result<bool> {
    let mut tx = pool.begin().await?;
    // lock: the product, so two processes draw once; `no key update`, not
    // `update`: a hold ending on the resource offers units to an entry of
    // this product, and its order line's foreign key takes the product's
    // row key-share while that hold holds the resource we wait for next
    let due: Option<(Vec<u8>, String)> = sqlx::query_as(
        "select queue_seed, resource_id from products \
          where id = $1 and queue_seed is not null and queue_drawn_at is null \
            and sale_opens_at <= now() for no key update",
    )
    .bind(product_id)
    .fetch_optional(&mut *tx)
    .await?;
    let Some((seed, resource)) = due else {
        return Ok(false);
    };
    // lock: the resource before the entries, the order every path that
    // moves a line takes (ending a hold, an entry leaving)
    sqlx::query("select 1 from resources where id = $1 for no key update")
        .bind(&resource)
        .execute(&mut *tx)
        .await?;
    let entries: Vec<Uuid> = sqlx::query_scalar(
        "select id from waitlist_entries where product_id = $1 and state = 'queued' for update",
    )
    .bind(product_id)
    .fetch_all(&mut *tx)
    .await?;
    let placed = order(&seed, &entries);
    let n = placed.len() as i64;
    // places below every later arrival's (those take the sequence's)
    let places: Vec<i64> = (0..n).map(|i| i - n).collect();
    sqlx::query(
        "update waitlist_entries w set state = 'waiting', line_no = x.place \
           from unnest($1::uuid[], $2::bigint[]) as x(id, place) where w.id = x.id",
    )
    .bind(&placed)
    .bind(&places)
    .execute(&mut *tx)
    .await?;
    sqlx::query("update products set queue_drawn_at = now() where id = $1")
        .bind(product_id)
        .execute(&mut *tx)
        .await?;
    crate::waitlist::hand_over(&mut tx, &resource).await?;
    // nothing may have been free: no process keeps a place from before the
    // draw all the same
    crate::waitlist::line_moved(&mut tx, &resource).await?;
    tx.commit().await?;
    tracing::info!(product = product_id, entries = n, "drop queue drawn");
    Ok(true)
}

/// What a product's queue publishes, if it has one.
pub async fn published(pool: &PgPool, product_id: &str) -> sqlx::Result<Option<Published>> {
    /// commitment, seed, the sale's opening, the draw
    type Row = (String, Vec<u8>, DateTime<Utc>, Option<DateTime<Utc>>);
    let row: Option<Row> = sqlx::query_as(
        "select queue_commitment, queue_seed, sale_opens_at, queue_drawn_at from products \
          where id = $1 and queue_commitment is not null",
    )
    .bind(product_id)
    .fetch_optional(pool)
    .await?;
    let Some((commitment, seed, sale_opens_at, drawn_at)) = row else {
        return Ok(None);
    };
    let (entries, order) = if drawn_at.is_some() {
        // drawn entries are those with a place below zero
        let order: Vec<Uuid> = sqlx::query_scalar(
            "select id from waitlist_entries where product_id = $1 and line_no < 0 \
              order by line_no",
        )
        .bind(product_id)
        .fetch_all(pool)
        .await?;
        let mut entries = order.clone();
        entries.sort();
        (entries, order)
    } else {
        (Vec::new(), Vec::new())
    };
    Ok(Some(Published {
        product_id: product_id.to_owned(),
        commitment,
        sale_opens_at,
        seed: drawn_at.map(|_| hex::encode(&seed)),
        drawn_at,
        entries,
        order,
        rule: RULE.to_owned(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rank_is_hmac_sha256_of_the_id_under_the_seed() {
        // RFC 4231's first test case fixes the HMAC itself; here the
        // message is what an entry's id reads as
        let seed = [0x0b; 32];
        let id = Uuid::parse_str("00000000-0000-0000-0000-000000000001").unwrap();
        let mut mac = Hmac::<Sha256>::new_from_slice(&seed).unwrap();
        mac.update(b"00000000-0000-0000-0000-000000000001");
        assert_eq!(
            rank(&seed, &id).to_vec(),
            mac.finalize().into_bytes().to_vec()
        );
    }

    #[test]
    fn a_published_order_is_verified_and_any_change_to_it_is_caught() {
        let seed: [u8; 32] = rand::random();
        let entries: Vec<Uuid> = (0..50).map(|_| Uuid::new_v4()).collect();
        let mut listed = entries.clone();
        listed.sort();
        let published = Published {
            product_id: "p".into(),
            commitment: commitment(&seed),
            sale_opens_at: Utc::now(),
            drawn_at: Some(Utc::now()),
            seed: Some(hex::encode(seed)),
            entries: listed,
            order: order(&seed, &entries),
            rule: RULE.into(),
        };
        assert_eq!(verify(&published), Ok(50));
        let mut swapped = published.clone();
        swapped.order.swap(3, 4);
        assert!(verify(&swapped).unwrap_err().contains("position 4"));
        let mut other_seed = published.clone();
        other_seed.seed = Some(hex::encode([7u8; 32]));
        assert!(verify(&other_seed).unwrap_err().contains("commitment"));
        let mut dropped = published.clone();
        dropped.order.pop();
        assert!(verify(&dropped).is_err());
        let mut undrawn = published;
        undrawn.seed = None;
        assert!(verify(&undrawn).is_err());
    }
}
