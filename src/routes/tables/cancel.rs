//! A guest cancels their booking from the order page (issue 36): the
//! order page says the policy copied onto the booking ("cancel until Fri
//! 4 Dec 19:30 and your deposit of €40.00 is refunded in full; after that
//! it is kept") with a link to `GET /orders/{token}/cancel`, which asks
//! first; only its button's POST cancels (a link prefetcher changes
//! nothing). The cancel itself is [`crate::staff::cancellations`].

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, web};
use askama::Template;

use crate::checkout::Order;
use crate::money;
use crate::retry::{Bound, retry};
use crate::routes::ShopError;
use crate::routes::render::{render, see_other};
use crate::routes::shop::{message, order_of_link};
use crate::staff::cancellations::{self, Cancelled, Refusal};
use crate::state::Shop;

/// What the order page says of an order's bookings: the policy in words,
/// and whether it offers the cancel link now. Empty words: no booking
/// stands.
pub(crate) async fn order_words(shop: &Shop, order: &Order) -> Result<(String, bool), ShopError> {
    let policy = retry("order_read", Bound::Shopper, || {
        cancellations::policy(&shop.pool, order.id)
    })
    .await?;
    Ok(match policy {
        None => (String::new(), false),
        Some(policy) => (policy.words(shop.zone()), policy.open),
    })
}

#[derive(Template)]
#[template(path = "tables/cancel.html")]
struct CancelPage {
    basket_count: i64,
    token: String,
    /// What the guest is told happens.
    words: String,
    /// "Table for 4, Fri 18 Dec 19:30, 2 h", one per booking.
    bookings: Vec<String>,
}

/// `GET /orders/{token}/cancel`: asks first, says what happens.
pub async fn ask(
    shop: web::Data<Shop>,
    token: web::Path<String>,
) -> Result<HttpResponse, ShopError> {
    let order = order_of_link(&shop, &token).await?;
    let policy = retry("order_read", Bound::Shopper, || {
        cancellations::policy(&shop.pool, order.id)
    })
    .await?;
    let Some(policy) = policy.filter(|p| p.open) else {
        return Ok(see_other(&format!("/orders/{}", order.token)));
    };
    let occasions = retry("order_read", Bound::Shopper, || {
        crate::checkout::LineTimes::of(&shop.pool, order.id)
    })
    .await?
    .occasions(shop.zone());
    let words = if policy.deposit_minor > 0 {
        format!(
            "Your table goes to other guests and your deposit of {} is refunded in full.",
            money::format(policy.deposit_minor, &policy.currency)
        )
    } else {
        "Your table goes to other guests.".to_owned()
    };
    let mut bookings: Vec<String> = occasions.into_values().collect();
    bookings.sort();
    render(
        StatusCode::OK,
        &CancelPage {
            basket_count: 0,
            token: order.token,
            words,
            bookings,
        },
    )
}

/// `POST /orders/{token}/cancel`: cancels, then the order page says how
/// it stands; a refused cancel (past the cut-off, seated, a no-show,
/// refunded meanwhile) changes nothing and the order page says why. A
/// failure on our side says nothing changed, in the shop's words.
pub async fn cancel(
    shop: web::Data<Shop>,
    token: web::Path<String>,
) -> Result<HttpResponse, ShopError> {
    let order = order_of_link(&shop, &token).await?;
    let order_page = format!("/orders/{}", order.token);
    // keyed by the order: a second POST is the first cancel again
    match cancellations::cancel(&shop.pool, order.id).await {
        Ok(Cancelled::Cancelled { .. }) => Ok(see_other(&order_page)),
        Ok(Cancelled::Refused(_)) => Ok(see_other(&format!("{order_page}?cancel=refused"))),
        Err(error) => {
            tracing::error!(order = %order.id, %error, "a guest's cancel failed; nothing changed");
            message(
                StatusCode::SERVICE_UNAVAILABLE,
                "Your booking is not cancelled yet",
                "Something went wrong on our side while cancelling. Nothing changed: your \
                 booking stands and nothing was refunded. Please try again in a minute.",
                &order_page,
                "Back to your order",
            )
        }
    }
}

/// After a refused cancel (`?cancel=refused`), why the booking was not
/// cancelled, as the database says now; empty when it was not asked or a
/// cancel would go through.
pub(crate) async fn refused_words(
    shop: &Shop,
    order: &Order,
    asked: bool,
) -> Result<String, ShopError> {
    if !asked {
        return Ok(String::new());
    }
    let why = retry("order_read", Bound::Shopper, || {
        cancellations::why_not(&shop.pool, order.id)
    })
    .await?;
    Ok(match why {
        None => String::new(),
        Some(Refusal::TooLate { cancel_until }) => format!(
            "Your booking was not cancelled: bookings could be cancelled until {}. Nothing \
             changed; please call the restaurant.",
            shop.zone().long(cancel_until)
        ),
        Some(Refusal::Seated) => "Your booking was not cancelled: your party was seated at the \
                                  restaurant."
            .to_owned(),
        Some(Refusal::NoShow) => "Your booking was not cancelled: the restaurant recorded that \
                                  nobody came for it. Please call the restaurant."
            .to_owned(),
        Some(Refusal::Refunded) => {
            "Your booking was not cancelled here: the restaurant refunded it already.".to_owned()
        }
        Some(Refusal::NotBooked) => "There is no booking in this order to cancel.".to_owned(),
    })
}

/// The order page's words for an order its guest cancelled; `None`: they
/// did not.
pub(crate) async fn cancelled_words(
    shop: &Shop,
    order: &Order,
) -> Result<Option<String>, ShopError> {
    let refunded = retry("order_read", Bound::Shopper, || {
        cancellations::cancelled(&shop.pool, order.id)
    })
    .await?;
    Ok(refunded.map(|amount| match amount {
        0 => "You cancelled it in time. Nothing was charged.".to_owned(),
        _ => format!(
            "You cancelled it in time: your deposit of {} is on its way back to you.",
            money::format(amount, &order.currency)
        ),
    }))
}
