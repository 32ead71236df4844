//! Finding orders (the admin's orders page): by a customer's name or
//! e-mail, a ticket or pickup code, the order's number (typed loosely) or
//! the start of its id; by
//! state (or paid, waiting and ended apart), product and the day it was
//! placed; newest first, a page at a time by cursor (the last order shown:
//! a page never repeats or skips an order while new ones arrive), with how
//! many match in all. Every filter is a bound parameter; what is typed is
//! matched as text, never as a pattern.

use chrono::{DateTime, Utc};
use sqlx::error::BoxDynError;
use sqlx::postgres::PgArguments;
use sqlx::{Arguments, PgPool};
use uuid::Uuid;

use crate::checkout::OrderState;
use crate::checkout::settling::SettlingView;

/// Orders a page shows at most.
pub const PAGE: i64 = 50;

/// Which orders: states grouped as an owner thinks of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Paid (refunded in part or not).
    Paid,
    /// Waiting for money: held, or a payment settling over days.
    Waiting,
    /// Over without a sale, or money given back whole.
    Ended,
}

impl Stage {
    pub const ALL: [Stage; 3] = [Stage::Paid, Stage::Waiting, Stage::Ended];

    pub fn as_str(self) -> &'static str {
        match self {
            Stage::Paid => "paid",
            Stage::Waiting => "waiting",
            Stage::Ended => "ended",
        }
    }

    pub fn words(self) -> &'static str {
        match self {
            Stage::Paid => "Paid",
            Stage::Waiting => "Waiting for payment",
            Stage::Ended => "Ended or refunded",
        }
    }

    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.as_str() == name)
    }

    fn states(self) -> &'static [&'static str] {
        match self {
            Stage::Paid => &["paid"],
            Stage::Waiting => &["pending", "settling"],
            Stage::Ended => &["expired", "cancelled", "refund_pending", "refunded"],
        }
    }
}

/// What staff asked for.
#[derive(Debug, Clone, Default)]
pub struct OrderSearch {
    /// A name, an e-mail, a code or the start of an order's id.
    pub text: Option<String>,
    pub state: Option<OrderState>,
    pub stage: Option<Stage>,
    pub flagged_only: bool,
    pub product: Option<String>,
    /// Placed from this moment, and before that one.
    pub from: Option<DateTime<Utc>>,
    pub until: Option<DateTime<Utc>>,
    /// The last order of the page before: orders older than it.
    pub after: Option<(DateTime<Utc>, Uuid)>,
}

/// An order as the list shows it.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct FoundOrder {
    pub id: Uuid,
    /// The number the shopper reads out (`7F3A-91C2-E4B0`).
    pub number: String,
    pub state: OrderState,
    pub customer_name: String,
    pub customer_email: String,
    pub currency: String,
    pub amount_minor: i64,
    pub refunded_minor: i64,
    pub provider: crate::payments::ProviderKind,
    pub flag: Option<String>,
    pub created_at: DateTime<Utc>,
    pub paid_at: Option<DateTime<Utc>>,
    /// A payment that settles in days, and money that came after the
    /// holds ended.
    #[sqlx(flatten)]
    pub settling: SettlingView,
    /// Refund jobs not yet done.
    pub refunds_pending: i64,
    /// `2 × Harbour Lights — VIP; 1 × Wild heather honey`
    pub items: String,
}

/// One page of what matches.
#[derive(Debug, Clone)]
pub struct Found {
    pub orders: Vec<FoundOrder>,
    /// How many match in all.
    pub total: i64,
    /// Where the next page starts, when there is one.
    pub next: Option<(DateTime<Utc>, Uuid)>,
}

/// An order number as a person may type it (`7f3a 91c2-e4b0`), in the
/// form orders keep it; `None`: not twelve hexadecimal digits.
fn order_number(text: &str) -> Option<String> {
    let digits: String = text
        .chars()
        .filter(|c| !matches!(c, '-' | ' '))
        .map(|c| c.to_ascii_uppercase())
        .collect();
    (digits.len() == 12 && digits.chars().all(|c| c.is_ascii_hexdigit()))
        .then(|| format!("{}-{}-{}", &digits[..4], &digits[4..8], &digits[8..]))
}

/// `text` for `ilike`: its `%`, `_` and `\` matched as themselves.
pub(crate) fn contained(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len() + 2);
    escaped.push('%');
    for c in text.chars() {
        if matches!(c, '%' | '_' | '\\') {
            escaped.push('\\');
        }
        escaped.push(c);
    }
    escaped.push('%');
    escaped
}

const MATCHES: &str = "
      ($1::text is null
         or o.customer_name ilike $2 or o.customer_email ilike $2
         or exists (select 1 from order_items c where c.order_id = o.id and c.code = $3)
         or o.number = $9
         or starts_with(o.id::text, lower($1)))
  and ($4::text[] is null or o.state = any($4))
  and (not $5 or o.flag is not null)
  and ($6::text is null
         or exists (select 1 from order_lines ol where ol.order_id = o.id and ol.product_id = $6)
         or starts_with($6, 'collection:')
            and exists (select 1 from order_lines ol join products p on p.id = ol.product_id
                         where ol.order_id = o.id and p.collection = substr($6, 12)))
  and ($7::timestamptz is null or o.created_at >= $7)
  and ($8::timestamptz is null or o.created_at < $8)";

/// What [`MATCHES`] binds, `$1` to `$9`, from what staff asked for.
fn matching(asked: &OrderSearch) -> Result<PgArguments, BoxDynError> {
    let text = asked
        .text
        .as_deref()
        .map(str::trim)
        .filter(|t| !t.is_empty());
    let states: Option<Vec<&str>> = match (asked.state, asked.stage) {
        (Some(state), _) => Some(vec![state.as_str()]),
        (None, Some(stage)) => Some(stage.states().to_vec()),
        (None, None) => None,
    };
    let mut arguments = PgArguments::default();
    arguments.add(text)?;
    arguments.add(text.map(contained))?;
    arguments.add(text.map(crate::redemption::normalise))?;
    arguments.add(states)?;
    arguments.add(asked.flagged_only)?;
    arguments.add(asked.product.as_deref())?;
    arguments.add(asked.from)?;
    arguments.add(asked.until)?;
    arguments.add(text.and_then(order_number))?;
    Ok(arguments)
}

/// [`matching`], then `$10` to `$12`: orders older than the last of the
/// page before, one more than a page (whether there is a next).
fn paging(asked: &OrderSearch) -> Result<PgArguments, BoxDynError> {
    let mut arguments = matching(asked)?;
    arguments.add(asked.after.map(|(at, _)| at))?;
    arguments.add(asked.after.map(|(_, id)| id))?;
    arguments.add(PAGE + 1)?;
    Ok(arguments)
}

pub async fn search(pool: &PgPool, asked: &OrderSearch) -> sqlx::Result<Found> {
    let total: i64 = sqlx::query_scalar_with(
        &format!("select count(*) from orders o where {MATCHES}"),
        matching(asked).map_err(sqlx::Error::Encode)?,
    )
    .fetch_one(pool)
    .await?;
    let mut orders: Vec<FoundOrder> = sqlx::query_as_with(
        &format!(
            "select o.id, o.number, o.state, o.customer_name, o.customer_email, o.currency, o.amount_minor,
                o.refunded_minor, o.provider, o.flag, o.created_at, o.paid_at,
                o.settle_method, o.settling_until, o.late_money, o.late_money_at,
                (select count(*) from outbox_jobs j where j.kind = 'refund'
                    and j.state = 'pending' and j.payload->>'order_id' = o.id::text)
                    as refunds_pending,
                coalesce((select string_agg(ol.qty || ' × ' || ol.name, '; '
                                            order by ol.name, ol.product_id)
                            from order_lines ol where ol.order_id = o.id), '') as items
           from orders o
          where {MATCHES}
            and ($10::timestamptz is null or (o.created_at, o.id) < ($10, $11))
          order by o.created_at desc, o.id desc
          limit $12"
        ),
        paging(asked).map_err(sqlx::Error::Encode)?,
    )
    .fetch_all(pool)
    .await?;
    let next = if orders.len() as i64 > PAGE {
        orders.truncate(PAGE as usize);
        orders.last().map(|o| (o.created_at, o.id))
    } else {
        None
    };
    Ok(Found {
        orders,
        total,
        next,
    })
}

#[cfg(test)]
mod tests {
    use super::{contained, order_number};

    #[test]
    fn an_order_number_is_read_as_typed() {
        assert_eq!(
            order_number("7f3a 91c2-e4b0").as_deref(),
            Some("7F3A-91C2-E4B0")
        );
        assert_eq!(
            order_number("7F3A91C2E4B0").as_deref(),
            Some("7F3A-91C2-E4B0")
        );
        assert_eq!(order_number("7F3A-91C2"), None);
        assert_eq!(order_number("ada@example.com"), None);
    }

    #[test]
    fn what_is_typed_is_matched_as_text() {
        assert_eq!(contained("ada"), "%ada%");
        assert_eq!(contained("50%_off\\"), "%50\\%\\_off\\\\%");
    }
}
