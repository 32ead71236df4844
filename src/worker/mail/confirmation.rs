//! A paid order's confirmation: what was bought and when (in the shop's
//! zone), every code with its QR code inline (PNG, `cid:`), what it is for
//! and the words its kind says around it ([`crate::items`]), the order
//! link, and a calendar file with an entry for every item whose kind sends
//! one (a pickup slot, an event's tickets, a table), its times in UTC so
//! every calendar shows the reader's hour. Items refunded or cancelled
//! carry no code and no calendar entry.

use askama::Template;
use chrono::{DateTime, Utc};
use lettre::Message;
use lettre::message::header::ContentType;
use lettre::message::{Attachment, MultiPart, SinglePart};
use sqlx::PgPool;
use uuid::Uuid;

use super::{MailError, Mailer, render, text};
use crate::catalogue::{CalendarEntry, Sharing};
use crate::items::{self, Item, Section};
use crate::money;

/// What a confirmation says.
pub(super) struct Confirmation {
    id: Uuid,
    /// The order's number, to read out.
    number: String,
    name: String,
    email: String,
    token: String,
    total: String,
    /// What the voucher took off, in words; empty: nothing.
    discount: String,
    /// Nothing was paid (a booking without a deposit, a voucher for all).
    free: bool,
    lines: Vec<Line>,
    /// When and where each line happens, by product id.
    occasions: std::collections::HashMap<String, String>,
    /// Its items that still admit.
    items: Vec<Item>,
    /// The shop's logo as the mail carries it (inline, never remote).
    logo: Option<crate::images::Variant>,
    /// How to cancel its table (the cancel page's words), and whether the
    /// guest still may; empty: it has no booking.
    cancel: (String, bool),
}

/// One line of the order, as the mail needs it.
#[derive(sqlx::FromRow)]
struct Line {
    product_id: String,
    name: String,
    qty: i32,
    kind: crate::catalogue::ProductKind,
}

/// What the confirmation's parts show.
#[derive(Template)]
#[template(path = "mail/order_confirmation.html")]
pub(super) struct ConfirmationMail {
    pub(super) name: String,
    pub(super) number: String,
    pub(super) total: String,
    /// Nothing was paid: the mail says confirmed, not paid.
    pub(super) free: bool,
    pub(super) discount: String,
    pub(super) lines: Vec<MailLine>,
    /// Its codes under their kinds' headings.
    pub(super) sections: Vec<Section>,
    /// Every code with its QR image's content id.
    pub(super) qr: Vec<MailCode>,
    pub(super) link: String,
    /// A booking's cancel policy in words, and the link to cancel while the
    /// guest may (empty: no booking, or no longer).
    pub(super) cancel_words: String,
    pub(super) cancel_link: String,
    /// The shop's name, accent colour (`#rrggbb`) and contact address.
    pub(super) shop_name: String,
    pub(super) accent: String,
    pub(super) contact: String,
    /// The logo's content id (empty: the shop has none, or it is not sent).
    pub(super) logo_cid: String,
}

#[derive(Template)]
#[template(path = "mail/order_confirmation.txt")]
pub(super) struct ConfirmationText<'a>(pub(super) &'a ConfirmationMail);

impl std::ops::Deref for ConfirmationText<'_> {
    type Target = ConfirmationMail;
    fn deref(&self) -> &ConfirmationMail {
        self.0
    }
}

pub(super) struct MailLine {
    pub(super) name: String,
    /// Its count as said after the name: "× 2", or "· Party of 4" for a
    /// booking (one booking, not four).
    pub(super) count: String,
    /// When it happens, where the name does not say.
    pub(super) when: String,
}

pub(super) struct MailCode {
    pub(super) label: String,
    pub(super) code: String,
    /// What it is for: its items.
    pub(super) what: String,
    pub(super) cid: String,
}

impl Confirmation {
    pub(super) async fn read(
        pool: &PgPool,
        order_id: Uuid,
        zone: crate::clock::ShopZone,
    ) -> sqlx::Result<Option<Self>> {
        #[derive(sqlx::FromRow)]
        struct OrderRow {
            number: String,
            customer_name: String,
            customer_email: String,
            token: String,
            amount_minor: i64,
            currency: String,
            voucher_code: Option<String>,
            discount_minor: i64,
        }
        let order: Option<OrderRow> = sqlx::query_as(
            "select number, customer_name, customer_email, token, amount_minor, currency, \
                    voucher_code, discount_minor \
               from orders where id = $1",
        )
        .bind(order_id)
        .fetch_optional(pool)
        .await?;
        let Some(order) = order else {
            return Ok(None);
        };
        let lines = sqlx::query_as(
            "select l.product_id, l.name, l.qty, p.kind \
               from order_lines l join products p on p.id = l.product_id \
              where l.order_id = $1 order by p.starts_at nulls last, l.name",
        )
        .bind(order_id)
        .fetch_all(pool)
        .await?;
        let occasions = crate::checkout::LineTimes::of(pool, order_id)
            .await?
            .occasions(zone);
        let items = items::of_order(pool, order_id)
            .await?
            .into_iter()
            .filter(|item| item.state.is_live())
            .collect();
        let logo = match crate::storefront::Storefront::read(pool).await?.logo_id {
            Some(id) => crate::images::variant(pool, &id, crate::images::LOGO_WIDTH as i32).await?,
            None => None,
        };
        let cancel = crate::staff::cancellations::policy(pool, order_id)
            .await?
            .map(|policy| (policy.words(zone), policy.open))
            .unwrap_or_default();
        Ok(Some(Self {
            cancel,
            logo,
            id: order_id,
            number: order.number,
            name: order.customer_name,
            email: order.customer_email,
            token: order.token,
            total: money::format(order.amount_minor, &order.currency),
            free: order.amount_minor == 0,
            discount: crate::vouchers::discount_words(
                order.voucher_code.as_deref(),
                order.discount_minor,
                &order.currency,
            ),
            lines,
            occasions,
            items,
        }))
    }

    pub(super) fn compose(&self, mailer: &Mailer) -> Result<Message, MailError> {
        let link = format!("{}/orders/{}", mailer.base_url, self.token);
        let shop = mailer.storefronts.last();
        // every code, with its QR image's content id
        let sections = items::sections(&self.items);
        let qr: Vec<MailCode> = sections
            .iter()
            .flat_map(|section| section.cards.iter())
            .enumerate()
            .map(|(i, card)| MailCode {
                label: card.words.label.to_owned(),
                code: card.code.clone(),
                what: card.what(),
                cid: format!("qr-{i}"),
            })
            .collect();
        let message = ConfirmationMail {
            name: self.name.clone(),
            number: self.number.clone(),
            total: self.total.clone(),
            free: self.free,
            discount: self.discount.clone(),
            lines: self
                .lines
                .iter()
                .map(|line| MailLine {
                    name: line.name.clone(),
                    count: if line.kind.is_party() {
                        format!("· {}", line.kind.count_words(line.qty))
                    } else {
                        format!("× {}", line.qty)
                    },
                    // when, doors and venue
                    when: self
                        .occasions
                        .get(&line.product_id)
                        .cloned()
                        .unwrap_or_default(),
                })
                .collect(),
            sections,
            qr,
            cancel_words: self.cancel.0.clone(),
            cancel_link: if self.cancel.1 {
                format!("{link}/cancel")
            } else {
                String::new()
            },
            link: link.clone(),
            shop_name: shop.name.clone(),
            accent: shop.accent.clone(),
            contact: shop.contact_email.clone(),
            logo_cid: if self.logo.is_some() {
                "logo".to_owned()
            } else {
                String::new()
            },
        };
        let (text, html) = (text(&ConfirmationText(&message))?, render(&message)?);

        let mut related = MultiPart::related().singlepart(SinglePart::html(html));
        if let Some(logo) = &self.logo {
            related = related.singlepart(Attachment::new_inline("logo".to_owned()).body(
                logo.bytes.clone(),
                ContentType::parse(&logo.content_type).expect("a MIME type"),
            ));
        }
        for code in &message.qr {
            related = related.singlepart(Attachment::new_inline(code.cid.clone()).body(
                crate::qr::png(&code.code).map_err(|e| MailError::Compose(e.to_string()))?,
                ContentType::parse("image/png").expect("a MIME type"),
            ));
        }
        let body = MultiPart::alternative()
            .singlepart(SinglePart::plain(text))
            .multipart(related);
        let mut mixed = MultiPart::mixed().multipart(body);
        if let Some(file) = self.calendar_file(&mailer.base_url, None) {
            mixed = mixed.singlepart(
                Attachment::new("calendar.ics".into()).body(
                    file,
                    ContentType::parse("text/calendar; charset=utf-8; method=PUBLISH")
                        .expect("a MIME type"),
                ),
            );
        }
        mailer
            .builder(&self.name, &self.email, &format!("order-{}", self.id))?
            .subject(format!("Your order is paid: {}", self.total))
            .multipart(mixed)
            .map_err(|e| MailError::Compose(e.to_string()))
    }

    /// The calendar file the mail attaches, for the order page's "add to
    /// calendar" links (all of the order's, or one code's); `None` when no
    /// item of it sends one.
    pub(super) fn calendar_file(&self, base_url: &str, code: Option<&str>) -> Option<String> {
        let entries: Vec<CalendarEntry> = self
            .calendar_entries()
            .into_iter()
            .filter(|(codes, _)| code.is_none_or(|code| codes.iter().any(|c| c == code)))
            .map(|(_, entry)| entry)
            .collect();
        let link = format!("{base_url}/orders/{}", self.token);
        (!entries.is_empty()).then(|| calendar(self.id, &entries, &link))
    }

    /// An entry for each product whose kind sends a calendar file, from its
    /// items that still admit (a booking's own stay), with their codes.
    fn calendar_entries(&self) -> Vec<(Vec<String>, CalendarEntry)> {
        let mut products: Vec<&str> = Vec::new();
        for item in &self.items {
            if !products.contains(&item.product_id.as_str()) {
                products.push(&item.product_id);
            }
        }
        products
            .into_iter()
            .filter_map(|product| {
                let of: Vec<&Item> = self
                    .items
                    .iter()
                    .filter(|item| item.product_id == product)
                    .collect();
                let first = of.first()?;
                let mut codes: Vec<String> = of.iter().map(|item| item.code.clone()).collect();
                codes.dedup();
                let code_refs: Vec<&str> = codes.iter().map(String::as_str).collect();
                // a unit's own code: the line's name, once for all of them,
                // with the seats that still admit
                let seats: Vec<&str> = of.iter().filter_map(|item| item.seat.as_deref()).collect();
                let summary = match first.words().map(|words| words.sharing) {
                    Some(Sharing::EachUnit) if seats.is_empty() => first.line_name.clone(),
                    Some(Sharing::EachUnit) => {
                        format!("{} — {}", first.line_name, seats.join(", "))
                    }
                    _ => first.what(),
                };
                let mut entry = first.kind.calendar_entry(
                    &summary,
                    first.starts_at,
                    first.ends_at,
                    &code_refs,
                )?;
                entry.location = first.venue.clone();
                Some((codes, entry))
            })
            .collect()
    }
}

/// A calendar with one event per entry, its times in UTC (every calendar
/// shows them in its reader's zone, daylight saving included).
fn calendar(order: Uuid, entries: &[CalendarEntry], link: &str) -> String {
    let utc = |at: DateTime<Utc>| at.format("%Y%m%dT%H%M%SZ").to_string();
    let stamp = utc(Utc::now());
    let mut ics = String::from(
        "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//Holdfast//Checkout//EN\r\nMETHOD:PUBLISH\r\n",
    );
    for (i, entry) in entries.iter().enumerate() {
        let end = entry
            .ends
            .map(|at| format!("DTEND:{}\r\n", utc(at)))
            .unwrap_or_default();
        let about = [entry.code.as_str(), link]
            .into_iter()
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join(". ");
        let location = match entry.location.trim() {
            "" => String::new(),
            venue => format!("LOCATION:{}\r\n", ics_text(venue)),
        };
        ics.push_str(&format!(
            "BEGIN:VEVENT\r\nUID:{order}-{i}@holdfast\r\nDTSTAMP:{stamp}\r\n\
             DTSTART:{}\r\n{end}SUMMARY:{}\r\n{location}DESCRIPTION:{}\r\nEND:VEVENT\r\n",
            utc(entry.starts),
            ics_text(&entry.summary),
            ics_text(&about),
        ));
    }
    ics.push_str("END:VCALENDAR\r\n");
    ics
}

/// Text as an iCalendar value: `\`, `;`, `,` and line breaks escaped.
fn ics_text(text: &str) -> String {
    text.replace('\\', "\\\\")
        .replace(';', "\\;")
        .replace(',', "\\,")
        .replace(['\r', '\n'], " ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalogue::ProductKind;

    fn item(code: &str, name: &str, kind: ProductKind, units: i32) -> Item {
        Item {
            product_id: name.to_lowercase(),
            line_name: name.into(),
            line_qty: units,
            ..Item::example(code, kind)
        }
    }

    #[test]
    fn calendar_text_is_escaped() {
        assert_eq!(ics_text("a;b,c\\d\ne"), "a\\;b\\,c\\\\d e");
    }

    #[test]
    fn the_templates_escape_the_html_part_and_keep_the_text_part_plain() {
        let items = [
            item(
                "PCK234",
                "Sourdough, pickup 12:30",
                ProductKind::PickupSlot,
                1,
            ),
            item(
                "TKT-AAAA-BBBB",
                "Harbour Lights — General",
                ProductKind::Ticket,
                2,
            ),
        ];
        let mail = ConfirmationMail {
            number: "7F3A-91C2-E4B0".into(),
            name: "<Ada & \"Bo\">".into(),
            total: "€28.00".into(),
            free: false,
            discount: "Voucher <FANS>: €2.00 off".into(),
            lines: vec![
                MailLine {
                    name: "Harbour Lights — General".into(),
                    count: "× 2".into(),
                    when: "Friday 20 March, 19:30 CET".into(),
                },
                MailLine {
                    name: "Sourdough, pickup 12:30".into(),
                    count: "× 1".into(),
                    when: String::new(),
                },
            ],
            sections: items::sections(&items),
            qr: vec![MailCode {
                label: "Pickup code".into(),
                code: "PCK234".into(),
                what: "Sourdough, pickup 12:30".into(),
                cid: "qr-pickup".into(),
            }],
            link: "https://shop.example/orders/abc?x=1&y=2".into(),
            cancel_words: String::new(),
            cancel_link: String::new(),
            shop_name: "Harbour <Market>".into(),
            accent: "#0b6e4f".into(),
            contact: String::new(),
            logo_cid: String::new(),
        };
        let html = render(&mail).unwrap();
        assert!(
            html.contains(">Thank you, &#60;Ada &#38; &#34;Bo&#34;&#62;</h1>"),
            "{html}"
        );
        assert!(
            html.contains("<a href=\"https://shop.example/orders/abc?x=1&#38;y=2\""),
            "{html}"
        );
        assert!(!html.contains("<Ada"), "{html}");
        assert!(
            html.contains(">Voucher &#60;FANS&#62;: €2.00 off.</p>"),
            "{html}"
        );
        assert!(html.contains("<img src=\"cid:qr-pickup\""), "{html}");
        assert!(html.contains(">For Sourdough, pickup 12:30</p>"), "{html}");
        // in the shop's name and colour, and no image from elsewhere
        assert!(
            html.contains("<span style=\"vertical-align:middle;\">Harbour &#60;Market&#62;</span>"),
            "{html}"
        );
        assert!(html.contains("background:#0b6e4f;"), "{html}");
        assert!(!html.contains("src=\"http"), "{html}");
        let text = text(&ConfirmationText(&mail)).unwrap();
        let expected = "Thank you, <Ada & \"Bo\">.\r\n\r\nYour order 7F3A-91C2-E4B0 is paid: €28.00.\r\nVoucher <FANS>: €2.00 off.\r\n\r\n\
                        - Harbour Lights — General × 2, Friday 20 March, 19:30 CET\r\n\
                        - Sourdough, pickup 12:30 × 1\r\n\r\n\
                        Your pickup:\r\n  PCK234  Sourdough, pickup 12:30 (say it at the counter)\r\n\r\n\
                        Your tickets:\r\n  TKT-AAAA-BBBB  Harbour Lights — General (show it at the door)\r\n\r\n\
                        Your order, any time: https://shop.example/orders/abc?x=1&y=2\r\n";
        assert_eq!(text, expected);
    }

    #[test]
    fn an_event_without_an_end_is_a_moment_and_a_slot_lasts_its_length() {
        let at = DateTime::parse_from_rfc3339("2026-12-20T19:30:00+01:00")
            .unwrap()
            .with_timezone(&Utc);
        let entries = [
            ProductKind::Ticket
                .calendar_entry("Winter Jazz — General", Some(at), None, &["TKT-A"])
                .unwrap(),
            ProductKind::PickupSlot
                .calendar_entry("Box, pickup 12:30", Some(at), None, &["K7P2QX"])
                .unwrap(),
        ];
        let ics = calendar(Uuid::nil(), &entries, "https://shop.example/orders/x");
        let events: Vec<&str> = ics.split("BEGIN:VEVENT").skip(1).collect();
        assert_eq!(events.len(), 2);
        assert!(!events[0].contains("DTEND"), "{ics}");
        assert!(
            events[0].contains("DESCRIPTION:Ticket TKT-A. https://"),
            "{ics}"
        );
        assert!(events[1].contains("DTSTART:20261220T183000Z\r\nDTEND:20261220T190000Z"));
        assert!(events[1].contains("Pickup code K7P2QX"), "{ics}");
    }
}
