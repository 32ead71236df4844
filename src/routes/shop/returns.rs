//! The way back from the provider (paid, failed or not yet), and leaving
//! a checkout. Nothing a link prefetcher can GET changes an order.

use actix_web::http::StatusCode;
use actix_web::http::header;
use actix_web::{HttpRequest, HttpResponse, web};
use askama::Template;

use super::{basket_id, message, order_of_link};
use crate::checkout::Release;
use crate::checkout::settle::{SettleError, settle_payment};
use crate::checkout::{self, OrderState, Source};
use crate::money;
use crate::payments::{ReturnError, ReturnParams, ReturnReport};
use crate::retry::{Bound, retry};
use crate::routes::ShopError;
use crate::routes::render::{render, see_other};
use crate::state::Shop;

/// `GET /checkout/return/{token}`: the browser's way back from the
/// provider's page (Stripe adds `?session_id=…`).
pub async fn checkout_return(
    shop: web::Data<Shop>,
    token: web::Path<String>,
    query: web::Query<Vec<(String, String)>>,
) -> Result<HttpResponse, ShopError> {
    let params = ReturnParams::from_return(query.into_inner(), Vec::new());
    returned(&shop, &token, params).await
}

/// `POST /checkout/return/{token}`: the same way back when the provider
/// posts it (Razorpay Checkout's redirect-mode callback, success or
/// failure).
pub async fn checkout_return_post(
    shop: web::Data<Shop>,
    token: web::Path<String>,
    query: web::Query<Vec<(String, String)>>,
    form: web::Form<Vec<(String, String)>>,
) -> Result<HttpResponse, ShopError> {
    let params = ReturnParams::from_return(query.into_inner(), form.into_inner());
    returned(&shop, &token, params).await
}

/// The order's unguessable token is in the path, so what the browser
/// brings (a session id, a signed callback) leads nowhere on its own; the
/// provider's adapter verifies it against the page we stored and asks the
/// provider what happened, and a payment goes the way every payment goes:
/// captured if it must be, then the one confirm routine.
async fn returned(
    shop: &Shop,
    token: &str,
    params: ReturnParams,
) -> Result<HttpResponse, ShopError> {
    let unknown = || ShopError::not_found("that is not a payment we know");
    if token.len() != 64 || !token.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(unknown());
    }
    let order = retry("order_read", Bound::Shopper, || {
        checkout::order_by_token(&shop.pool, token)
    })
    .await?
    .ok_or_else(unknown)?;
    let page_id = order.provider_session_id.clone().ok_or_else(unknown)?;
    let provider = shop
        .payments
        .for_order(order.provider)
        .map_err(|e| ShopError::unavailable(e.to_string()))?;
    let order_page = format!("/orders/{}", order.token);
    match provider.read_return(&page_id, &params).await {
        Ok(ReturnReport::Payment(payment)) => {
            // run again whole while the database is away: capturing a
            // captured payment reports it as it is, and confirming a
            // confirmed one changes nothing
            let settled = retry("return_settle", Bound::Shopper, || {
                settle_payment(
                    &shop.confirmations,
                    provider.as_ref(),
                    order.id,
                    payment.clone(),
                    Source::Return,
                )
            })
            .await;
            match settled {
                Ok(_) => {}
                Err(SettleError::Checkout(error)) => return Err(error.into()),
                // the capture did not go through now: the webhook, the
                // worker or reconciliation will finish it; the order page
                // says it is waiting
                Err(SettleError::Provider(error)) => {
                    tracing::warn!(order = %order.id, %error, "could not capture at the return");
                }
            }
            Ok(see_other(&order_page))
        }
        Ok(ReturnReport::NotPaid) => Ok(see_other(&order_page)),
        Ok(ReturnReport::Failed { reason }) => {
            tracing::info!(order = %order.id, %reason, "the provider says the payment failed");
            let again = match (&order.provider_url, order.state) {
                (Some(url), OrderState::Pending) => url.clone(),
                _ => order_page,
            };
            let explanation = format!(
                "{} Nothing was charged, and your items are still reserved for you: you can try again, \
                 with another card or method if you like.",
                if reason.is_empty() {
                    "The payment did not go through.".to_owned()
                } else {
                    format!("The payment did not go through: {reason}.")
                }
            );
            message(
                StatusCode::OK,
                "Your payment did not go through",
                &explanation,
                &again,
                "Try again",
            )
        }
        Err(ReturnError::Rejected(why)) => {
            tracing::warn!(order = %order.id, why, "a return that could not be verified");
            message(
                StatusCode::BAD_REQUEST,
                "We could not verify this payment",
                "Nothing was changed. If money left your account, it will be matched to your order or refunded.",
                &order_page,
                "See your order",
            )
        }
        Err(ReturnError::Provider(error)) => Err(ShopError::unavailable(error.to_string())),
    }
}

#[derive(Template)]
#[template(path = "leave.html")]
struct LeavePage {
    basket_count: i64,
    token: String,
    items: String,
    total: String,
}

/// `GET /checkout/cancel/{token}`: the provider's cancel URL. It asks
/// whether to leave and changes nothing: link prefetchers and mail scanners
/// follow URLs, and a purchase must not end because one did.
pub async fn checkout_cancel(
    shop: web::Data<Shop>,
    token: web::Path<String>,
) -> Result<HttpResponse, ShopError> {
    let order = order_of_link(&shop, &token).await?;
    match order.state {
        OrderState::Pending => {}
        OrderState::Cancelled | OrderState::Expired => return left(),
        // paid (or being refunded): the order page tells the truth
        _ => return Ok(see_other(&format!("/orders/{}", order.token))),
    }
    let lines = retry("order_read", Bound::Shopper, || {
        checkout::order_lines(&shop.pool, order.id)
    })
    .await?;
    let items = lines
        .iter()
        .map(|line| format!("{} × {}", line.name, line.qty))
        .collect::<Vec<_>>()
        .join(", ");
    let mut response = render(
        StatusCode::OK,
        &LeavePage {
            basket_count: 0,
            token: order.token.clone(),
            items,
            total: money::format(order.amount_minor, &order.currency),
        },
    )?;
    response.headers_mut().insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static("no-store"),
    );
    Ok(response)
}

/// `POST /checkout/cancel/{token}`: the shopper pressed "Leave checkout".
/// The order and its holds are released and the provider's page closed;
/// a payment that already arrived wins, and the order page says so. The
/// lines go back into the shopper's basket (a new one if the browser has
/// none), as they were before checkout.
pub async fn checkout_leave(
    shop: web::Data<Shop>,
    request: HttpRequest,
    token: web::Path<String>,
) -> Result<HttpResponse, ShopError> {
    let order = order_of_link(&shop, &token).await?;
    let was_pending = order.state == OrderState::Pending;
    let after = retry("checkout_release", Bound::Shopper, || {
        checkout::release_order(&shop.pool, order.id, Release::ShopperLeft)
    })
    .await?;
    if after
        .as_ref()
        .is_some_and(|o| !matches!(o.state, OrderState::Cancelled | OrderState::Expired))
    {
        return Ok(see_other(&format!("/orders/{}", order.token)));
    }
    if !was_pending {
        return left();
    }
    // this press ended the checkout: the basket comes back
    let (basket, fresh) = match basket_id(&request) {
        Some(id) => (id, false),
        None => (checkout::codes::order_token(), true),
    };
    retry("basket_restore", Bound::Shopper, || {
        checkout::basket::restore(&shop.pool, &basket, order.id)
    })
    .await?;
    let mut response = message(
        StatusCode::OK,
        "Checkout cancelled",
        "Nothing was charged, and your items are back in your basket.",
        "/basket",
        "Back to your basket",
    )?;
    if fresh {
        response
            .add_cookie(&super::basket::basket_cookie(&shop, basket))
            .map_err(|e| ShopError::internal(e.into()))?;
    }
    // and the voucher it was started with, applied again
    if let Some(code) = order.voucher_code.clone() {
        response
            .add_cookie(&super::basket::voucher_cookie(&shop, code))
            .map_err(|e| ShopError::internal(e.into()))?;
    }
    Ok(response)
}

fn left() -> Result<HttpResponse, ShopError> {
    message(
        StatusCode::OK,
        "Checkout cancelled",
        "Nothing was charged. Your items are in your basket if you want them.",
        "/basket",
        "Back to your basket",
    )
}
