//! The order page, reachable only by its unguessable link, and our page
//! for a provider whose checkout runs in its script on a page of ours.

use actix_web::http::StatusCode;
use actix_web::http::header;
use actix_web::{HttpResponse, web};
use askama::Template;

use std::collections::HashMap;

use super::order_of_link;
use crate::checkout::{self, OrderState};
use crate::items::{self, Card, Item, Section};
use crate::money;
use crate::payments::EmbedRequest;
use crate::retry::{Bound, retry};
use crate::routes::ShopError;
use crate::routes::render::{render, see_other};
use crate::state::Shop;

#[derive(Template)]
#[template(path = "order.html")]
struct OrderPage {
    basket_count: i64,
    /// The order's number, to read out.
    number: String,
    waiting: bool,
    paid: bool,
    /// Paid, and it owed nothing: confirmed without a payment.
    free: bool,
    name: String,
    total: String,
    /// What a voucher took off, in words; empty: nothing.
    discount: String,
    /// Its items, a card per code under their kinds' headings.
    sections: Vec<Section>,
    /// The shop's zone, for when things happen and happened.
    zone: crate::clock::ShopZone,
    /// Staff refunded part of a paid order: how much, and why.
    refund_note: String,
    headline: String,
    explanation: String,
    lines: Vec<checkout::OrderLine>,
    /// When and where each line happens, by product id.
    occasions: HashMap<String, String>,
    currency: String,
    /// The order's link, for "add to calendar" and the printable tickets.
    token: String,
    /// Some item that still admits goes in a calendar (an event, a pickup
    /// slot, a table).
    has_calendar: bool,
    /// Each line's picture, by product id.
    pictures: HashMap<String, String>,
    /// The lines that are a party at a time (a table booking).
    parties: std::collections::HashSet<String>,
    /// Its bookings' cancellation policy in words; empty: none stands.
    cancel_words: String,
    /// The guest may cancel now.
    can_cancel: bool,
    /// After a refused cancel, why; empty otherwise.
    cancel_refused: String,
}

/// The order page's query: `cancel=refused` after a cancel that changed
/// nothing (anything else is ignored).
#[derive(serde::Deserialize)]
pub struct OrderQuery {
    #[serde(default)]
    cancel: Option<String>,
}

impl OrderPage {
    /// A card's state in words, once it admits nobody: "Collected Mon 7
    /// Dec 12:34 CET", "Cancelled: this code admits nobody".
    fn card_state(&self, card: &Card) -> String {
        let words = card
            .items
            .iter()
            .find(|item| item.state == card.state())
            .map(|item| item.state_words(self.zone))
            .unwrap_or_default();
        if card.state().is_void() {
            format!("{words}: this code admits nobody")
        } else {
            words
        }
    }

    /// An item's state in words beside it, when it differs from its
    /// card's (one of two boxes refunded); empty otherwise.
    fn item_state(&self, card: &Card, item: &Item) -> String {
        if item.state == card.state() {
            String::new()
        } else {
            item.state_words(self.zone)
        }
    }

    /// When and where an item happens; empty: its name says it all.
    fn item_occasion(&self, item: &Item) -> String {
        item.occasion(self.zone)
    }

    /// When and where a card's first item happens (a ticket's date, doors
    /// and venue); empty: its name says it all.
    fn card_occasion(&self, card: &Card) -> String {
        card.items
            .first()
            .map(|item| item.occasion(self.zone))
            .unwrap_or_default()
    }

    /// The card goes in a calendar: it still admits, and its kind sends
    /// one for a time it has.
    fn card_calendar(&self, card: &Card) -> bool {
        card.is_live()
            && card
                .items
                .iter()
                .any(|item| item.kind.has_calendar() && item.starts_at.is_some())
    }

    /// The guest may cancel this card's booking now.
    fn card_cancel(&self, card: &Card) -> bool {
        self.can_cancel && card.is_live() && card.items.iter().any(|item| item.booking.is_some())
    }

    /// The card's code in a query string.
    fn card_query(&self, card: &Card) -> String {
        form_urlencoded::Serializer::new(String::new())
            .append_pair("code", &card.code)
            .finish()
    }

    /// A code's QR image, inline (`data:`, which the pages' policy
    /// allows): the same image the mail carries. Empty for a code that
    /// admits nobody any more, or if it cannot be drawn.
    fn qr(&self, card: &Card) -> String {
        use base64::Engine;
        if !card.is_live() {
            return String::new();
        }
        match crate::qr::png(&card.code) {
            Ok(png) => format!(
                "data:image/png;base64,{}",
                base64::engine::general_purpose::STANDARD.encode(png)
            ),
            Err(_) => String::new(),
        }
    }

    /// A line's picture's address; empty: none.
    fn picture(&self, line: &checkout::OrderLine) -> &str {
        self.pictures
            .get(&line.product_id)
            .map_or("", String::as_str)
    }

    /// A line all of whose items were refunded or cancelled, said so
    /// beside it: "Cancelled", "Refunded"; empty while any still stands.
    fn line_state(&self, line: &checkout::OrderLine) -> &'static str {
        let items: Vec<&Item> = self
            .sections
            .iter()
            .flat_map(|section| section.cards.iter())
            .flat_map(|card| card.items.iter())
            .filter(|item| item.product_id == line.product_id)
            .collect();
        if items.is_empty() || !items.iter().all(|item| item.state.is_void()) {
            ""
        } else if items
            .iter()
            .any(|item| item.state == items::ItemState::Cancelled)
        {
            "Cancelled"
        } else {
            "Refunded"
        }
    }

    /// When and where a line happens; empty: its name says it all.
    fn occasion(&self, line: &checkout::OrderLine) -> &str {
        self.occasions
            .get(&line.product_id)
            .map_or("", String::as_str)
    }

    /// A line's count as the page says it: "Party of 4" for a booking,
    /// else "× 2".
    fn count(&self, line: &checkout::OrderLine) -> String {
        if self.parties.contains(&line.product_id) {
            crate::catalogue::ChoiceKind::Party.count_words(line.qty)
        } else {
            format!("× {}", line.qty)
        }
    }
}

/// `GET /orders/{token}`: reachable only by its unguessable link.
pub async fn order_page(
    shop: web::Data<Shop>,
    token: web::Path<String>,
    query: web::Query<OrderQuery>,
) -> Result<HttpResponse, ShopError> {
    let order = order_of_link(&shop, &token).await?;
    let lines = retry("order_read", Bound::Shopper, || {
        checkout::order_lines(&shop.pool, order.id)
    })
    .await?;
    let occasions = retry("order_read", Bound::Shopper, || {
        checkout::LineTimes::of(&shop.pool, order.id)
    })
    .await?
    .occasions(shop.zone());
    let product_ids: Vec<String> = lines.iter().map(|l| l.product_id.clone()).collect();
    let pictures = retry("order_read", Bound::Shopper, || {
        crate::images::pictures_of(&shop.pool, &product_ids, crate::images::THUMB_WIDTH)
    })
    .await?;
    let order_items = retry("order_read", Bound::Shopper, || {
        items::of_order(&shop.pool, order.id)
    })
    .await?;
    let parties = crate::routes::tables::book::party_products(&shop, &product_ids).await?;
    // what staff refunded, and why (the latest reason)
    let staff_refund = retry("order_read", Bound::Shopper, || {
        crate::staff::refunds::latest(&shop.pool, order.id)
    })
    .await?;
    let refund_note = match &staff_refund {
        Some((reason, amount)) if order.state == OrderState::Paid => format!(
            "Part of this order was refunded ({}): {reason}",
            money::format(*amount, &order.currency)
        ),
        _ => String::new(),
    };
    let staff_explanation = staff_refund.as_ref().map(|(reason, _)| {
        format!("The shop refunded it: {reason}. The money is on its way back to you.")
    });
    let (cancel_words, can_cancel) =
        crate::routes::tables::cancel::order_words(&shop, &order).await?;
    let asked = query.cancel.as_deref() == Some("refused");
    let cancel_refused = crate::routes::tables::cancel::refused_words(&shop, &order, asked).await?;
    let guest_cancelled = crate::routes::tables::cancel::cancelled_words(&shop, &order).await?;
    let settling = match order.state {
        OrderState::Settling => {
            let view = retry("order_read", Bound::Shopper, || {
                checkout::settling::settling_of(&shop.pool, order.id)
            })
            .await?;
            format!(
                "You are paying {} by {}, and your bank takes a few days to send it. Your \
                 order is reserved for you until {}: nobody else can buy what it holds meanwhile. \
                 When the money arrives you get an e-mail with your codes; if the bank refuses \
                 the payment, nothing is charged and the order is cancelled.",
                money::format(order.amount_minor, &order.currency),
                view.method_words(),
                view.settling_until
                    .map(|until| shop.zone().long(until))
                    .unwrap_or_default()
            )
        }
        _ => String::new(),
    };
    let (headline, explanation) = match order.state {
        OrderState::RefundPending | OrderState::Refunded if guest_cancelled.is_some() => (
            "Your booking is cancelled",
            guest_cancelled.as_deref().unwrap_or_default(),
        ),
        OrderState::RefundPending | OrderState::Refunded if staff_explanation.is_some() => (
            "Your order was refunded",
            staff_explanation.as_deref().unwrap_or_default(),
        ),
        OrderState::Expired => (
            "Your reservation ran out",
            "Nothing was charged; the items went back on sale.",
        ),
        OrderState::Cancelled => ("This order was cancelled", "Nothing was charged."),
        OrderState::RefundPending => (
            "Your payment is being refunded",
            "The money arrived after your reservation had ended, so it is on its way back to you.",
        ),
        OrderState::Refunded => (
            "Your payment was refunded",
            "The money is on its way back to you.",
        ),
        OrderState::Settling => ("Your payment is being processed", settling.as_str()),
        OrderState::Pending | OrderState::Paid => ("", ""),
    };
    // the link shows only where there is a file behind it
    let has_calendar = order.state == OrderState::Paid
        && order_items.iter().any(|item| {
            item.state.is_live() && item.kind.has_calendar() && item.starts_at.is_some()
        });
    let page = OrderPage {
        pictures,
        parties,
        basket_count: 0,
        number: order.number.clone(),
        waiting: order.state == OrderState::Pending,
        paid: order.state == OrderState::Paid,
        free: order.state == OrderState::Paid && order.amount_minor == 0,
        name: order.customer_name.clone(),
        total: money::format(order.amount_minor, &order.currency),
        discount: crate::vouchers::discount_words(
            order.voucher_code.as_deref(),
            order.discount_minor,
            &order.currency,
        ),
        sections: items::sections(&order_items),
        zone: shop.zone(),
        refund_note,
        headline: headline.into(),
        explanation: explanation.into(),
        lines,
        has_calendar,
        cancel_words,
        cancel_refused,
        can_cancel,
        occasions,
        currency: order.currency.clone(),
        token: order.token.clone(),
    };
    // the link is the key: keep the page out of caches and search engines
    let mut response = render(StatusCode::OK, &page)?;
    let headers = response.headers_mut();
    headers.insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static("no-store"),
    );
    headers.insert(
        header::HeaderName::from_static("x-robots-tag"),
        header::HeaderValue::from_static("noindex"),
    );
    Ok(response)
}

/// The calendar link's query: one code's items (`?code=`), or all.
#[derive(serde::Deserialize)]
pub struct CalendarQuery {
    #[serde(default)]
    code: Option<String>,
}

/// `GET /orders/{token}/calendar.ics[?code=]`: the calendar file the mail
/// attaches (or one code's part of it), for a paid order with an item that
/// still admits and goes in a calendar.
pub async fn calendar(
    shop: web::Data<Shop>,
    token: web::Path<String>,
    query: web::Query<CalendarQuery>,
) -> Result<HttpResponse, ShopError> {
    let order = order_of_link(&shop, &token).await?;
    let none = || ShopError::not_found("this order has nothing for a calendar");
    if order.state != OrderState::Paid {
        return Err(none());
    }
    let code = query
        .code
        .as_deref()
        .map(crate::redemption::normalise)
        .filter(|code| !code.is_empty());
    if code
        .as_ref()
        .is_some_and(|code| code.chars().count() > crate::redemption::MAX_CODE_CHARS)
    {
        return Err(ShopError::bad_request(
            "that is not one of this order's codes",
        ));
    }
    let file = retry("order_read", Bound::Shopper, || {
        crate::worker::mail::calendar_file(
            &shop.pool,
            order.id,
            shop.zone(),
            &shop.base_url,
            code.as_deref(),
        )
    })
    .await?
    .ok_or_else(none)?;
    Ok(HttpResponse::Ok()
        .content_type("text/calendar; charset=utf-8")
        .insert_header((
            header::CONTENT_DISPOSITION,
            format!("attachment; filename=\"order-{}.ics\"", order.number),
        ))
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .body(file))
}

#[derive(Template)]
#[template(path = "pay.html")]
struct PayPage {
    basket_count: i64,
    /// Whose script opens the checkout (`/static/pay/<provider>.js`).
    provider: &'static str,
    total: String,
    /// What is being paid for: "2 × Winter Jazz — General".
    lines: Vec<checkout::OrderLine>,
    /// The lines that are a party at a time, said "Party of 4".
    parties: std::collections::HashSet<String>,
    discount: String,
    /// Until when the items are held, in the shop's time ("19:42 CET"),
    /// and as RFC 3339 for the countdown; empty: nothing is held any more.
    held_until: String,
    held_until_iso: String,
    now_iso: String,
    script_url: String,
    cancel_url: String,
    /// JSON for the provider's script; `<` is escaped so it cannot end the tag.
    options_json: String,
}

impl PayPage {
    /// A line's count: "Party of 4" for a booking, else its quantity.
    fn count(&self, line: &checkout::OrderLine) -> String {
        if self.parties.contains(&line.product_id) {
            crate::routes::tables::book::party_words(line.qty)
        } else {
            line.qty.to_string()
        }
    }

    /// Every line is a booking: the column says "Party".
    fn all_parties(&self) -> bool {
        !self.lines.is_empty()
            && self
                .lines
                .iter()
                .all(|l| self.parties.contains(&l.product_id))
    }
}

/// `GET /pay/{token}`: our page for a provider whose checkout runs in its
/// script on a page of ours (an embedded checkout). Other
/// providers' orders go to the provider's own page.
pub async fn pay_page(
    shop: web::Data<Shop>,
    token: web::Path<String>,
) -> Result<HttpResponse, ShopError> {
    let order = order_of_link(&shop, &token).await?;
    let order_page = format!("/orders/{}", order.token);
    let Some(page_id) = order
        .provider_session_id
        .clone()
        .filter(|_| order.state == OrderState::Pending)
    else {
        return Ok(see_other(&order_page));
    };
    let provider = shop
        .payments
        .for_order(order.provider)
        .map_err(|e| ShopError::unavailable(e.to_string()))?;
    let method = retry("order_read", Bound::Shopper, || {
        checkout::order::pay_method(&shop.pool, order.id)
    })
    .await?;
    let embed = EmbedRequest {
        page_id,
        shop_name: crate::storefront::shown().name.clone(),
        amount_minor: order.amount_minor,
        currency: order.currency.clone(),
        customer_name: order.customer_name.clone(),
        customer_email: order.customer_email.clone(),
        return_url: format!("{}/checkout/return/{}", shop.base_url, order.token),
        cancel_url: format!("{}/checkout/cancel/{}", shop.base_url, order.token),
        method,
    };
    let Some(checkout) = provider.embedded_checkout(&embed) else {
        return Ok(see_other(
            order.provider_url.as_deref().unwrap_or(&order_page),
        ));
    };
    let lines = retry("order_read", Bound::Shopper, || {
        checkout::order_lines(&shop.pool, order.id)
    })
    .await?;
    let held_until = retry("order_read", Bound::Shopper, || {
        checkout::order::held_until(&shop.pool, &order)
    })
    .await?;
    let ids: Vec<String> = lines.iter().map(|l| l.product_id.clone()).collect();
    let parties = crate::routes::tables::book::party_products(&shop, &ids).await?;
    let page = PayPage {
        parties,
        basket_count: 0,
        provider: order.provider.as_str(),
        total: money::format(order.amount_minor, &order.currency),
        lines,
        discount: crate::vouchers::discount_words(
            order.voucher_code.as_deref(),
            order.discount_minor,
            &order.currency,
        ),
        held_until: held_until
            .map(|at| shop.zone().time(at))
            .unwrap_or_default(),
        held_until_iso: held_until.map(|at| at.to_rfc3339()).unwrap_or_default(),
        now_iso: chrono::Utc::now().to_rfc3339(),
        script_url: checkout.script_url.clone(),
        cancel_url: format!("/checkout/cancel/{}", order.token),
        options_json: checkout.options.to_string().replace('<', "\\u003c"),
    };
    let mut response = render(StatusCode::OK, &page)?;
    let policy = embedded_policy(&checkout.origins);
    response.headers_mut().insert(
        header::CONTENT_SECURITY_POLICY,
        header::HeaderValue::from_str(&policy).map_err(|e| ShopError::internal(e.into()))?,
    );
    Ok(response)
}

/// The embedded checkout page's policy: ours, plus the provider's script,
/// frames and calls. Razorpay's script styles its own overlay inline, so
/// this one page allows inline styles.
fn embedded_policy(origins: &[String]) -> String {
    let origins = origins.join(" ");
    format!(
        "default-src 'self'; script-src 'self' {origins}; style-src 'self' 'unsafe-inline'; \
         img-src 'self' data: {origins}; connect-src 'self' {origins}; frame-src {origins}; \
         object-src 'none'; base-uri 'none'; frame-ancestors 'none'; report-uri /csp-report"
    )
}
