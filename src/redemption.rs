//! Codes redeemed exactly once: a ticket admits one person at the door, a
//! pickup code collects one order at the counter. The database decides
//! (`hf_redeem`, migration 0012): the redemption's primary key is the
//! code, so two doors scanning one code at one moment get one admission
//! and one "already used", and a code whose unit was refunded is refused.
//! Redemptions are append-only, with who and where.

use chrono::{DateTime, Utc};
use sqlx::{PgExecutor, PgPool};
use uuid::Uuid;

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

/// What a code is, once found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CodeKind {
    Ticket,
    Pickup,
}

/// What redeeming a code came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// A ticket: let them in.
    Admitted,
    /// A pickup code: hand the order over.
    Collected,
    /// Redeemed before: when, by whom and where.
    AlreadyUsed {
        at: DateTime<Utc>,
        by: String,
        place: String,
    },
    /// Its unit (or its whole order) was refunded.
    Refunded,
    /// No such code, or its order is not paid.
    NotValid,
}

impl Outcome {
    /// The name the admin and the command line print.
    pub fn as_str(&self) -> &'static str {
        match self {
            Outcome::Admitted => "admitted",
            Outcome::Collected => "collected",
            Outcome::AlreadyUsed { .. } => "already_used",
            Outcome::Refunded => "refunded",
            Outcome::NotValid => "not_valid",
        }
    }

    /// Whoever holds the code may go in or take the order.
    pub fn lets_through(&self) -> bool {
        matches!(self, Outcome::Admitted | Outcome::Collected)
    }
}

/// One redemption attempt's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redemption {
    /// The code as looked up (normalised).
    pub code: String,
    pub outcome: Outcome,
    pub kind: Option<CodeKind>,
    pub order_id: Option<Uuid>,
    pub customer_name: Option<String>,
    /// What the code is for: the ticket's product, or the pickup's lines.
    pub what: Option<String>,
}

/// Who redeems and where, as recorded.
#[derive(Debug, Clone)]
pub struct Door<'a> {
    pub by: &'a str,
    pub place: &'a str,
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
        });
    }
    #[allow(clippy::type_complexity)]
    let row: (
        String,
        Option<String>,
        Option<Uuid>,
        Option<String>,
        Option<String>,
        Option<DateTime<Utc>>,
        Option<String>,
        Option<String>,
    ) = sqlx::query_as(
        "select outcome, kind, order_id, customer_name, what, redeemed_at, redeemed_by, place \
           from hf_redeem($1, $2, $3, $4)",
    )
    .bind(&code)
    .bind(door.by)
    .bind(door.place)
    .bind(door.attempt)
    .fetch_one(executor)
    .await?;
    crate::faults::lost_answer("redemption")?;
    let (outcome, kind, order_id, customer_name, what, at, by, place) = row;
    let outcome = match outcome.as_str() {
        "admitted" => Outcome::Admitted,
        "collected" => Outcome::Collected,
        "already_used" => Outcome::AlreadyUsed {
            at: at.unwrap_or_default(),
            by: by.unwrap_or_default(),
            place: place.unwrap_or_default(),
        },
        "refunded" => Outcome::Refunded,
        _ => Outcome::NotValid,
    };
    let kind = match kind.as_deref() {
        Some("ticket") => Some(CodeKind::Ticket),
        Some("pickup") => Some(CodeKind::Pickup),
        _ => None,
    };
    Ok(Redemption {
        code,
        outcome,
        kind,
        order_id,
        customer_name,
        what,
    })
}

/// When each code of an order was redeemed, for the order's pages.
pub async fn redeemed_codes(
    pool: &PgPool,
    order_id: Uuid,
) -> sqlx::Result<std::collections::HashMap<String, DateTime<Utc>>> {
    let rows: Vec<(String, DateTime<Utc>)> =
        sqlx::query_as("select code, redeemed_at from redemptions where order_id = $1")
            .bind(order_id)
            .fetch_all(pool)
            .await?;
    Ok(rows.into_iter().collect())
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
}
