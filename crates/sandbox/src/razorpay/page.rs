//! Razorpay Checkout's page as the sandbox plays it in redirect mode
//! (`GET /pay/{order_id}`): pay, a declined card, pay twice, an
//! authorisation after the capture window, a bank that does not answer in
//! time, and close; each answered with the callback form Checkout posts to
//! the shop (`razorpay_*` fields, or `error[…]` ones).

use super::RazorpaySandbox;
use super::objects::{Payment, RazorpayBody, RazorpayError};
use crate::pages::{amount_text, escape, not_found, page, redirect};
use crate::random_id;
use actix_web::{HttpResponse, web};
use chrono::Utc;
use serde::Deserialize;
use serde_json::json;

#[derive(Debug, Deserialize)]
pub(super) struct PageQuery {
    callback_url: Option<String>,
    cancel_url: Option<String>,
}

pub(super) async fn hosted_page(
    sandbox: web::Data<RazorpaySandbox>,
    path: web::Path<String>,
    query: web::Query<PageQuery>,
) -> HttpResponse {
    let order_id = path.into_inner();
    let Some(order) = sandbox.state.with(|s| s.orders.get(&order_id).cloned()) else {
        return not_found("No such order.");
    };
    let callback = escape(query.callback_url.as_deref().unwrap_or_default());
    let cancel = escape(query.cancel_url.as_deref().unwrap_or_default());
    let id = escape(&order.id);
    let button = |action: &str, label: &str| {
        format!(
            "<form method=\"post\" action=\"/razorpay/pay/{id}/{action}\">\
             <input type=\"hidden\" name=\"callback_url\" value=\"{callback}\">\
             <input type=\"hidden\" name=\"cancel_url\" value=\"{cancel}\">\
             <button id=\"{action}\">{label}</button></form>"
        )
    };
    page(
        "Razorpay Checkout",
        &format!(
            "<h1>Pay {}</h1><p>Order {id}</p>{}{}{}{}{}{}",
            amount_text(order.amount, &order.currency),
            button("pay", "Pay"),
            button("decline", "Pay with a card that is declined"),
            button("pay-twice", "Pay twice"),
            button(
                "pay-late",
                "Pay, authorised late (after the capture window)"
            ),
            button(
                "bank-silent",
                "Pay by netbanking, the bank does not answer in time (it may still authorise it later)"
            ),
            button("abandon", "Close checkout"),
        ),
    )
}

#[derive(Debug, Deserialize)]
struct ActionForm {
    callback_url: Option<String>,
    cancel_url: Option<String>,
}

/// The browser's POST to the shop's callback, as redirect mode sends it.
fn callback_form(callback_url: &str, fields: &[(&str, &str)]) -> HttpResponse {
    let inputs: String = fields
        .iter()
        .map(|(name, value)| {
            format!(
                "<input type=\"hidden\" name=\"{}\" value=\"{}\">",
                escape(name),
                escape(value)
            )
        })
        .collect();
    HttpResponse::Ok().content_type("text/html; charset=utf-8").body(format!(
        "<!doctype html><html><body><form id=\"callback\" method=\"post\" action=\"{}\">{inputs}\
         <noscript><button>Continue</button></noscript></form>\
         <script>document.getElementById('callback').submit();</script></body></html>",
        escape(callback_url)
    ))
}

pub(super) async fn hosted_action(
    sandbox: web::Data<RazorpaySandbox>,
    path: web::Path<(String, String)>,
    body: RazorpayBody,
) -> HttpResponse {
    let (order_id, action) = path.into_inner();
    // what the page's form posts (a browser's form encoding)
    let form: ActionForm = match serde_urlencoded::from_bytes(&body.bytes) {
        Ok(form) => form,
        Err(error) => {
            return RazorpayError::invalid(format!("Invalid form body: {error}"), None).response();
        }
    };
    let callback = form.callback_url.clone().unwrap_or_default();
    match action.as_str() {
        "pay" | "pay-late" | "pay-twice" => {
            let first = match sandbox.authorize(&order_id, None, action == "pay-late") {
                Ok(id) => id,
                Err(message) => return page("Checkout", &format!("<h1>{}</h1>", escape(&message))),
            };
            if action == "pay-twice" {
                let _ = sandbox.authorize(&order_id, None, false);
            }
            if callback.is_empty() {
                return page("Paid", "<h1>Paid</h1>");
            }
            let signature = sandbox.signature(&order_id, &first);
            callback_form(
                &callback,
                &[
                    ("razorpay_payment_id", &first),
                    ("razorpay_order_id", &order_id),
                    ("razorpay_signature", &signature),
                ],
            )
        }
        "decline" => {
            let payment = sandbox.state.with(|state| {
                let order = state.orders.get_mut(&order_id)?;
                if order.status == "created" {
                    order.status = "attempted";
                }
                let payment = Payment {
                    id: random_id("pay"),
                    order_id: order_id.clone(),
                    amount: order.amount,
                    currency: order.currency.clone(),
                    status: "failed",
                    captured: false,
                    amount_refunded: 0,
                    created_at: Utc::now().timestamp(),
                    error: Some((
                        "Your payment has been declined by the bank.",
                        "payment_failed",
                    )),
                    method: "card",
                };
                order.payments.push(payment.id.clone());
                state.payments.insert(payment.id.clone(), payment.clone());
                Some(payment)
            });
            let Some(payment) = payment else {
                return not_found("No such order.");
            };
            sandbox.emit(
                &order_id,
                "payment.failed",
                json!({ "payment": { "entity": payment.to_json() } }),
            );
            if callback.is_empty() {
                return page(
                    "Declined",
                    "<h1>Your card was declined</h1><p>Go back and try again.</p>",
                );
            }
            // redirect mode tells the shop about a failure too
            let metadata = json!({ "payment_id": payment.id, "order_id": order_id }).to_string();
            callback_form(
                &callback,
                &[
                    ("error[code]", "BAD_REQUEST_ERROR"),
                    (
                        "error[description]",
                        "Your payment has been declined by the bank.",
                    ),
                    ("error[source]", "customer"),
                    ("error[step]", "payment_authorization"),
                    ("error[reason]", "payment_failed"),
                    ("error[metadata]", &metadata),
                ],
            )
        }
        "bank-silent" => {
            let payment = match sandbox.bank_silent(&order_id) {
                Ok(id) => id,
                Err(message) => return page("Checkout", &format!("<h1>{}</h1>", escape(&message))),
            };
            if callback.is_empty() {
                return page(
                    "Not completed",
                    "<h1>Your bank did not answer in time</h1><p>If it takes the money, it is matched to your order or refunded.</p>",
                );
            }
            // redirect mode tells the shop about the failure, naming the
            // payment Razorpay keeps asking the bank about
            let metadata = json!({ "payment_id": payment, "order_id": order_id }).to_string();
            callback_form(
                &callback,
                &[
                    ("error[code]", "GATEWAY_ERROR"),
                    ("error[description]", "Payment was not completed on time."),
                    ("error[source]", "bank"),
                    ("error[step]", "payment_authorization"),
                    ("error[reason]", super::objects::TIMED_OUT),
                    ("error[metadata]", &metadata),
                ],
            )
        }
        "abandon" => match form.cancel_url.as_deref().filter(|u| !u.is_empty()) {
            Some(url) => redirect(url),
            None => page("Closed", "<h1>You closed the checkout</h1>"),
        },
        _ => not_found("No such action."),
    }
}
