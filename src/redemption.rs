//! Codes redeemed exactly once: a ticket admits one person at the door, a
//! pickup code collects one order at the counter (the words are the
//! kind's: [`ProductKind::code_words`]). The database decides
//! (`hf_redeem`, migration 0012, 0080): the redemption's primary key is the
//! code, so two doors scanning one code at one moment get one admission
//! and one "already used", and a code whose unit was refunded is refused.
//! Redemptions are append-only, with who and where.

use chrono::{DateTime, Utc};
use sqlx::{PgExecutor, PgPool};
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
    /// No such code, or its order is not paid.
    NotValid,
}

impl Outcome {
    /// The name the admin and the command line print.
    pub fn as_str(&self) -> &'static str {
        match self {
            Outcome::Redeemed { word } => word,
            Outcome::AlreadyUsed { .. } => "already_used",
            Outcome::Refunded => "refunded",
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
    }
    let row: Row = sqlx::query_as(
        "select outcome, product_kind, order_id, customer_name, what, redeemed_at, \
                redeemed_by, place \
           from hf_redeem($1, $2, $3, $4)",
    )
    .bind(&code)
    .bind(door.by)
    .bind(door.place)
    .bind(door.attempt)
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
        _ => Outcome::NotValid,
    };
    Ok(Redemption {
        code,
        outcome,
        kind,
        order_id: row.order_id,
        customer_name: row.customer_name,
        what: row.what,
    })
}

/// When each code of an order was redeemed, for the order's pages.
pub async fn redeemed_codes(
    pool: &PgPool,
    order_id: Uuid,
) -> sqlx::Result<std::collections::HashMap<String, DateTime<Utc>>> {
    #[derive(sqlx::FromRow)]
    struct Used {
        code: String,
        redeemed_at: DateTime<Utc>,
    }
    let rows: Vec<Used> =
        sqlx::query_as("select code, redeemed_at from redemptions where order_id = $1")
            .bind(order_id)
            .fetch_all(pool)
            .await?;
    Ok(rows.into_iter().map(|u| (u.code, u.redeemed_at)).collect())
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
