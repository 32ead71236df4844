//! The mail that says a payment is being processed: which method, how
//! much, and until when the units are the shopper's (a bank debit settles
//! in days; docs/design.md, "Money that takes days"). Queued with the
//! order's move into the settling phase (`checkout::settling`), sent by the
//! outbox like every message, its Message-ID made from the order. And the
//! words of a refund notice for money that came after its holds ended.

use askama::Template;
use lettre::message::MultiPart;
use sqlx::PgPool;
use uuid::Uuid;

use super::{MailError, Mailer, render, text};
use crate::checkout::settling::method_words;
use crate::money;

/// What the settling mail says.
#[derive(Template)]
#[template(path = "mail/order_settling.html")]
struct Settling {
    name: String,
    amount: String,
    method: String,
    items: String,
    until: String,
    link: String,
}

#[derive(Template)]
#[template(path = "mail/order_settling.txt")]
struct SettlingText<'a>(&'a Settling);

impl std::ops::Deref for SettlingText<'_> {
    type Target = Settling;
    fn deref(&self) -> &Settling {
        self.0
    }
}

#[derive(sqlx::FromRow)]
struct SettlingRow {
    customer_name: String,
    customer_email: String,
    token: String,
    amount_minor: i64,
    currency: String,
    settle_method: Option<String>,
    settling_until: Option<chrono::DateTime<chrono::Utc>>,
    items: Option<String>,
}

/// Why late money goes back, in the refund notice's words, for the
/// reasons the one rule for late money gives (`checkout::late`).
pub(super) fn late_words(reason: &str) -> Option<&'static str> {
    Some(match reason {
        "sold_out_after_expiry" => {
            "it arrived after your reservation had run out, and the items had been sold since"
        }
        "line_waiting" => {
            "it arrived after your reservation had run out, and the items went to people waiting for them"
        }
        "table_released" => {
            "it arrived after your booking had run out, and its table is no longer held for you"
        }
        "off_sale" => {
            "it arrived after your reservation had run out, and the items are no longer sold"
        }
        _ => return None,
    })
}

impl Mailer {
    /// The payment is being processed: by which method, and until when
    /// the order's units are held for the shopper.
    pub async fn order_settling(&self, pool: &PgPool, order_id: Uuid) -> Result<(), MailError> {
        self.storefronts.current(pool).await;
        let row: Option<SettlingRow> = sqlx::query_as(
            "select o.customer_name, o.customer_email, o.token, o.amount_minor, o.currency, \
                    o.settle_method, o.settling_until, \
                    (select string_agg(l.name || ' × ' || l.qty, ', ' order by l.name) \
                       from order_lines l where l.order_id = o.id) as items \
               from orders o where o.id = $1",
        )
        .bind(order_id)
        .fetch_optional(pool)
        .await?;
        let Some(row) = row else {
            return Err(MailError::Compose(format!("no order {order_id}")));
        };
        let (Some(method), Some(until)) = (row.settle_method, row.settling_until) else {
            return Err(MailError::Compose(format!(
                "order {order_id} was never settling"
            )));
        };
        let mail = Settling {
            link: format!("{}/orders/{}", self.base_url, row.token),
            amount: money::format(row.amount_minor, &row.currency),
            method: method_words(&method),
            items: row.items.unwrap_or_default(),
            until: self.zone(pool).await.long(until),
            name: row.customer_name,
        };
        let (text, html) = (text(&SettlingText(&mail))?, render(&mail)?);
        let message = self
            .builder(
                &mail.name,
                &row.customer_email,
                &format!("settling-{order_id}"),
            )?
            .subject(format!(
                "Your payment of {} is being processed",
                mail.amount
            ))
            .multipart(MultiPart::alternative_plain_html(text, html))
            .map_err(|e| MailError::Compose(e.to_string()))?;
        self.send(message).await
    }
}
