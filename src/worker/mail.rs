//! E-mail to shoppers, through a real mail server: `HOLDFAST_SMTP_URL`
//! (lettre, TLS through rustls with aws-lc-rs and Mozilla's roots), from
//! `HOLDFAST_MAIL_FROM`. Without a URL, the sandbox's mail server stands
//! in when the sandbox does. The outbox sends (`worker::outbox`), with
//! retries and backoff; each message has a Message-ID made from its job,
//! so a retry after a lost answer is recognisably the same message.
//!
//! Every message has a plain-text part beside its HTML part, and needs no
//! JavaScript and no remote image: QR codes travel inline (PNG, `cid:`),
//! a calendar file as an attachment ([`confirmation`]: the order's
//! confirmation; [`settling`]: a payment that takes days).

mod confirmation;
mod invite;
mod settling;

use askama::Template;
use chrono::{DateTime, Utc};
use lettre::message::{Mailbox, MultiPart};
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};
use sqlx::PgPool;
use uuid::Uuid;

use crate::clock::ShopZone;
use crate::money;
use confirmation::Confirmation;

/// A paid order's calendar file, the one its confirmation attaches (an
/// entry per item whose kind sends one and that still admits), or one
/// code's part of it; `None` without such an item or without the order.
pub async fn calendar_file(
    pool: &PgPool,
    order_id: Uuid,
    zone: ShopZone,
    base_url: &str,
    code: Option<&str>,
) -> sqlx::Result<Option<String>> {
    Ok(Confirmation::read(pool, order_id, zone)
        .await?
        .and_then(|confirmation| confirmation.calendar_file(base_url, code)))
}

/// Where mail goes, and who it is from.
#[derive(Clone)]
pub struct Mailer {
    transport: AsyncSmtpTransport<Tokio1Executor>,
    from: Mailbox,
    zone: ShopZone,
    /// How shoppers reach the shop, for the order link.
    base_url: String,
    /// The shop's name, which mail is sent in (read before each message).
    storefronts: crate::storefront::Storefronts,
}

impl std::fmt::Debug for Mailer {
    // the URL may carry the server's password: never print it
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mailer")
            .field("from", &self.from.to_string())
            .field("zone", &self.zone)
            .finish_non_exhaustive()
    }
}

/// Why a message could not be sent (the server's answer, without secrets).
#[derive(Debug, thiserror::Error)]
pub enum MailError {
    #[error("the mail server: {0}")]
    Server(String),
    #[error("the message: {0}")]
    Compose(String),
    #[error(transparent)]
    Database(#[from] sqlx::Error),
}

impl Mailer {
    /// `smtp://host:port` (plain, or `?tls=required` for STARTTLS) or
    /// `smtps://user:password@host:465`.
    pub fn new(smtp_url: &str, from: &str, zone: ShopZone, base_url: &str) -> Result<Self, String> {
        let transport = AsyncSmtpTransport::<Tokio1Executor>::from_url(smtp_url)
            // the URL may carry a password: the error never repeats it
            .map_err(|_| {
                "HOLDFAST_SMTP_URL is not an SMTP URL like smtps://user:password@host:465 \
                 or smtp://host:587?tls=required"
                    .to_owned()
            })?
            .timeout(Some(std::time::Duration::from_secs(20)))
            .build();
        let from: Mailbox = from.parse().map_err(|e| {
            format!("HOLDFAST_MAIL_FROM is not a mailbox like \"Shop <shop@example.com>\" ({e})")
        })?;
        Ok(Self {
            transport,
            from,
            zone,
            base_url: base_url.trim_end_matches('/').to_owned(),
            storefronts: crate::storefront::Storefronts::default(),
        })
    }

    /// The shop's zone as mail shows times: the owner's choice on
    /// Settings (read again every few seconds), else the server's.
    async fn zone(&self, pool: &PgPool) -> ShopZone {
        self.storefronts.current(pool).await.zone_or(self.zone)
    }

    async fn send(&self, message: Message) -> Result<(), MailError> {
        self.transport
            .send(message)
            .await
            .map(|_| ())
            .map_err(|e| MailError::Server(e.to_string()))
    }

    /// The order's confirmation: what was bought, when, every code with
    /// its QR code, the order link, and a calendar file for pickup slots.
    pub async fn order_confirmation(&self, pool: &PgPool, order_id: Uuid) -> Result<(), MailError> {
        self.storefronts.current(pool).await;
        let Some(order) = Confirmation::read(pool, order_id, self.zone(pool).await).await? else {
            return Err(MailError::Compose(format!("no order {order_id}")));
        };
        let message = order.compose(self)?;
        self.send(message).await
    }

    /// A staff refund was issued: which units, how much, why, and which
    /// codes stopped working (no internal id).
    pub async fn refund_notice(
        &self,
        pool: &PgPool,
        order_id: Uuid,
        refund_id: i64,
    ) -> Result<(), MailError> {
        self.storefronts.current(pool).await;
        #[derive(sqlx::FromRow)]
        struct Refund {
            customer_name: String,
            customer_email: String,
            currency: String,
            amount_minor: i64,
            reason: String,
            token: String,
            /// Its guest cancelled (a booking): the items are cancelled.
            cancelled: bool,
        }
        let refund: Option<Refund> = sqlx::query_as(
            "select o.customer_name, o.customer_email, o.currency, r.amount_minor, r.reason, \
                    o.token, coalesce(r.request_key like 'guest-cancel-%', false) as cancelled \
               from order_refunds r join orders o on o.id = r.order_id \
              where r.id = $1 and r.order_id = $2",
        )
        .bind(refund_id)
        .bind(order_id)
        .fetch_optional(pool)
        .await?;
        let Some(refund) = refund else {
            return Err(MailError::Compose(format!(
                "no refund {refund_id} of {order_id}"
            )));
        };
        // which units, by their lines' names (a line of seats by the seats
        // that went back), and the codes that stopped
        #[derive(sqlx::FromRow)]
        struct Unit {
            name: String,
            qty: i32,
            codes: Vec<String>,
            seats: Vec<String>,
        }
        let units: Vec<Unit> = sqlx::query_as(
            "select l.name, (u->>'qty')::int4 as qty, \
                    array(select jsonb_array_elements_text(coalesce(u->'codes', '[]'))) as codes, \
                    array(select jsonb_array_elements_text(coalesce(u->'seats', '[]'))) as seats \
               from order_refunds r cross join lateral jsonb_array_elements(r.units) u \
               join order_lines l on l.order_id = r.order_id and l.product_id = u->>'product_id' \
              where r.id = $1 and (u->>'qty')::int4 > 0 \
              order by l.name",
        )
        .bind(refund_id)
        .fetch_all(pool)
        .await?;
        let notice = StaffRefund {
            link: format!("{}/orders/{}", self.base_url, refund.token),
            amount: money::format(refund.amount_minor, &refund.currency),
            what: units
                .iter()
                .map(|unit| match unit.seats.as_slice() {
                    [] => format!("{} × {}", unit.name, unit.qty),
                    seats => format!(
                        "{}, {} {}",
                        // the line names every seat it had: only these went
                        unit.name
                            .rsplit_once(" — ")
                            .map_or(unit.name.as_str(), |(n, _)| n),
                        if seats.len() == 1 { "seat" } else { "seats" },
                        seats.join(", ")
                    ),
                })
                .collect::<Vec<_>>()
                .join(", "),
            cancelled: refund.cancelled,
            stopped: units
                .iter()
                .flat_map(|unit| unit.codes.iter().cloned())
                .collect::<Vec<_>>()
                .join(", "),
            name: refund.customer_name,
            reason: refund.reason,
        };
        let email = refund.customer_email;
        let (text, html) = (text(&StaffRefundText(&notice))?, render(&notice)?);
        let name = &notice.name;
        let amount = &notice.amount;
        let message = self
            .builder(name, &email, &format!("refund-{refund_id}-{order_id}"))?
            .subject(if notice.cancelled {
                format!("Your booking is cancelled: {amount} refunded")
            } else {
                format!("Refund issued: {amount}")
            })
            .multipart(MultiPart::alternative_plain_html(text, html))
            .map_err(|e| MailError::Compose(e.to_string()))?;
        self.send(message).await
    }

    /// A payment that was not sold goes back: how much, which, and why.
    pub async fn payment_returned(
        &self,
        pool: &PgPool,
        order_id: Uuid,
        payment: &crate::payments::ProviderPayment,
        reason: &str,
    ) -> Result<(), MailError> {
        self.storefronts.current(pool).await;
        let row: Option<(String, String, String)> =
            sqlx::query_as("select customer_name, customer_email, token from orders where id = $1")
                .bind(order_id)
                .fetch_optional(pool)
                .await?;
        let Some((name, email, token)) = row else {
            return Err(MailError::Compose(format!("no order {order_id}")));
        };
        let why = match reason {
            "duplicate_payment" => "your order was already paid, so this second payment goes back",
            "hold_expired" => "it arrived after your reservation had run out, so nothing was sold",
            "hold_released" => "it arrived after your order had ended, so nothing was sold",
            "payment_mismatch" => "it did not match your order (another amount or another page)",
            other => settling::late_words(other).unwrap_or("it could not be used for your order"),
        };
        let notice = PaymentReturned {
            link: format!("{}/orders/{token}", self.base_url),
            amount: money::format(payment.amount_minor, &payment.currency),
            payment: payment.payment_ref.clone(),
            name,
            why,
        };
        let (text, html) = (text(&PaymentReturnedText(&notice))?, render(&notice)?);
        let (name, amount) = (&notice.name, &notice.amount);
        let id = format!("returned-{}-{}", payment.provider, payment.payment_ref);
        let message = self
            .builder(name, &email, &id)?
            .subject(format!("Refund issued: {amount}"))
            .multipart(MultiPart::alternative_plain_html(text, html))
            .map_err(|e| MailError::Compose(e.to_string()))?;
        self.send(message).await
    }

    /// A waiting-list entry's mail: the link that confirms it, or, once
    /// units are held for it, the link that pays for them.
    pub async fn waitlist_mail(
        &self,
        pool: &PgPool,
        entry_id: Uuid,
        offer: bool,
    ) -> Result<(), MailError> {
        self.storefronts.current(pool).await;
        /// name, e-mail, token, qty, product, offer's end, its order
        type EntryRow = (
            String,
            String,
            String,
            i32,
            String,
            Option<DateTime<Utc>>,
            Option<Uuid>,
        );
        let row: Option<EntryRow> = sqlx::query_as(
            "select w.name, w.email, w.token, w.qty, p.name, w.offer_expires_at, w.order_id \
                   from waitlist_entries w join products p on p.id = w.product_id \
                  where w.id = $1",
        )
        .bind(entry_id)
        .fetch_optional(pool)
        .await?;
        let Some((name, email, token, qty, product, until, order)) = row else {
            return Err(MailError::Compose(format!(
                "no waiting-list entry {entry_id}"
            )));
        };
        // an offer of seats says them
        let seats = match order.filter(|_| offer) {
            Some(order) => crate::catalogue::seats::seats_words(pool, order)
                .await?
                .unwrap_or_default(),
            None => String::new(),
        };
        let mail = WaitlistMail {
            seats,
            offer,
            link: format!("{}/waitlist/entry/{token}", self.base_url),
            until: match until {
                Some(at) => self.zone(pool).await.minute(at),
                None => String::new(),
            },
            qty_word: if qty == 1 { "it is" } else { "they are" },
            name,
            qty,
            product,
        };
        let (text, html) = (text(&WaitlistMailText(&mail))?, render(&mail)?);
        let subject = if offer {
            format!("{} × {} held for you", mail.qty, mail.product)
        } else {
            format!("Confirm your place on the waiting list: {}", mail.product)
        };
        let id = format!(
            "waitlist-{}-{entry_id}",
            if offer { "offer" } else { "confirm" }
        );
        let message = self
            .builder(&mail.name, &email, &id)?
            .subject(subject)
            .multipart(MultiPart::alternative_plain_html(text, html))
            .map_err(|e| MailError::Compose(e.to_string()))?;
        self.send(message).await
    }

    fn builder(
        &self,
        name: &str,
        email: &str,
        id: &str,
    ) -> Result<lettre::message::MessageBuilder, MailError> {
        let to: Mailbox = format!("{} <{email}>", quoted(name))
            .parse()
            .or_else(|_| email.parse())
            .map_err(|e| MailError::Compose(format!("the shopper's address: {e}")))?;
        let domain = self.from.email.domain().to_owned();
        // in the shop's name, from the configured address
        let from = Mailbox::new(
            Some(self.storefronts.last().name.clone()),
            self.from.email.clone(),
        );
        Ok(Message::builder()
            .from(from)
            .to(to)
            .message_id(Some(format!("<{id}@{domain}>"))))
    }
}

/// A display name inside a mailbox: quoted, with quotes and backslashes
/// escaped.
fn quoted(name: &str) -> String {
    let clean: String = name
        .chars()
        .filter(|c| !c.is_control())
        .flat_map(|c| match c {
            '"' | '\\' => vec!['\\', c],
            c => vec![c],
        })
        .collect();
    format!("\"{clean}\"")
}

/// A message's HTML part, from its template (escaped as every page is).
fn render(template: &impl Template) -> Result<String, MailError> {
    template
        .render()
        .map_err(|e| MailError::Compose(format!("a mail template: {e}")))
}

/// A message's text part, from its template, with the line breaks mail
/// wants (CRLF), the last line ended too.
fn text(template: &impl Template) -> Result<String, MailError> {
    let mut text = render(template)?.replace('\n', "\r\n");
    text.push_str("\r\n");
    Ok(text)
}

/// A staff refund, as its notice says it.
#[derive(Template)]
#[template(path = "mail/staff_refund.html")]
struct StaffRefund {
    name: String,
    amount: String,
    /// Which units: "Harbour Lights — VIP × 1, …".
    what: String,
    /// Its guest cancelled them (a booking): said so.
    cancelled: bool,
    /// The codes that no longer admit anyone (empty: none).
    stopped: String,
    reason: String,
    link: String,
}

#[derive(Template)]
#[template(path = "mail/staff_refund.txt")]
struct StaffRefundText<'a>(&'a StaffRefund);

impl std::ops::Deref for StaffRefundText<'_> {
    type Target = StaffRefund;
    fn deref(&self) -> &StaffRefund {
        self.0
    }
}

/// A waiting-list entry's mail, as it says it.
#[derive(Template)]
#[template(path = "mail/waitlist.html")]
struct WaitlistMail {
    /// Units are held: the link pays; otherwise it confirms the entry.
    offer: bool,
    name: String,
    qty: i32,
    qty_word: &'static str,
    product: String,
    /// An offer of seats: "Stalls — C-11, C-12, together"; empty
    /// otherwise.
    seats: String,
    until: String,
    link: String,
}

#[derive(Template)]
#[template(path = "mail/waitlist.txt")]
struct WaitlistMailText<'a>(&'a WaitlistMail);

impl std::ops::Deref for WaitlistMailText<'_> {
    type Target = WaitlistMail;
    fn deref(&self) -> &WaitlistMail {
        self.0
    }
}

/// A payment that goes back, as its notice says it.
#[derive(Template)]
#[template(path = "mail/payment_returned.html")]
struct PaymentReturned {
    name: String,
    amount: String,
    payment: String,
    why: &'static str,
    link: String,
}

#[derive(Template)]
#[template(path = "mail/payment_returned.txt")]
struct PaymentReturnedText<'a>(&'a PaymentReturned);

impl std::ops::Deref for PaymentReturnedText<'_> {
    type Target = PaymentReturned;
    fn deref(&self) -> &PaymentReturned {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_smtp_url_is_refused_without_repeating_it() {
        let error = Mailer::new(
            "smtpx://user:hunter2secret@mail.example.com",
            "Shop <shop@example.com>",
            ShopZone::UTC,
            "https://shop.example",
        )
        .unwrap_err();
        assert!(error.contains("HOLDFAST_SMTP_URL"), "{error}");
        assert!(!error.contains("hunter2secret"), "{error}");
        let mailer = Mailer::new(
            "smtps://user:hunter2secret@mail.example.com",
            "Shop <shop@example.com>",
            ShopZone::UTC,
            "https://shop.example",
        )
        .unwrap();
        assert!(!format!("{mailer:?}").contains("hunter2secret"));
        assert!(Mailer::new("smtp://localhost:2525", "not a mailbox", ShopZone::UTC, "x").is_err());
    }

    #[test]
    fn names_are_quoted() {
        assert_eq!(quoted("Ada \"the\" L\\"), "\"Ada \\\"the\\\" L\\\\\"");
    }
}
