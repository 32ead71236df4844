//! The Razorpay part's HTTP face: its API handlers, the Checkout stand-in
//! (its page in `page.rs`) and the test controls. Each handler
//! authenticates, parses with `requests.rs`, and leaves the decisions to
//! `RazorpaySandbox`.

use std::time::Duration;

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use chrono::Utc;
use serde::Deserialize;
use serde_json::{Value, json};

use super::objects::{Order, Payment, RazorpayBody, RazorpayDialect, RazorpayError, Refund};
use super::requests::{CapturePayment, CreateOrder, CreateRefund};
use super::{RazorpaySandbox, State};
use crate::controls::{AutoQuery, DeliveryQuery, OutcomeQuery, later};
use crate::delivery::Pacing;
use crate::dialect;
use crate::idempotency::Claim;
use crate::ledger::RefundRecord;
use crate::random_id;

pub(crate) fn routes(config: &mut web::ServiceConfig) {
    dialect::rules::<RazorpayDialect>(config);
    config
        .route("/v1/orders", web::post().to(create_order))
        .route("/v1/orders/{id}", web::get().to(fetch_order))
        .route("/v1/orders/{id}/payments", web::get().to(order_payments))
        .route("/v1/payments/{id}", web::get().to(fetch_payment))
        .route("/v1/payments/{id}/capture", web::post().to(capture))
        .route("/v1/payments/{id}/refund", web::post().to(refund))
        .route("/v1/payments/{id}/refunds", web::get().to(payment_refunds))
        .route(
            "/v1/payments/{id}/refunds/{refund}",
            web::get().to(payment_refund),
        )
        .route("/v1/refunds/{id}", web::get().to(fetch_refund))
        .route("/checkout.js", web::get().to(checkout_script))
        .route("/pay/{order_id}", web::get().to(super::page::hosted_page))
        .route(
            "/pay/{order_id}/{action}",
            web::post().to(super::page::hosted_action),
        )
        .route(
            "/_sandbox/orders/{id}/delivery",
            web::post().to(set_delivery),
        )
        .route("/_sandbox/orders/{id}/pay", web::post().to(control_pay))
        .route("/_sandbox/auto-refund", web::post().to(auto_refund))
        .route(
            "/_sandbox/payments/{id}/authorize-late",
            web::post().to(authorize_late),
        )
        .route("/_sandbox/days-pass", web::post().to(days_pass))
        .route("/_sandbox/refunds/auto", web::post().to(refunds_auto))
        .route(
            "/_sandbox/refunds/{id}/settle",
            web::post().to(settle_refund),
        )
        .route("/_sandbox/ledger", web::get().to(ledger));
}

async fn create_order(
    sandbox: web::Data<RazorpaySandbox>,
    request: HttpRequest,
    body: RazorpayBody,
) -> HttpResponse {
    if !sandbox.authorised(&request) {
        return RazorpayError::unauthorised().response();
    }
    let asked = match CreateOrder::parse(body.content_type.as_deref(), &body.bytes) {
        Ok(asked) => asked,
        Err(refusal) => return refusal.response(),
    };
    let order = Order {
        id: random_id("order"),
        amount: asked.amount,
        currency: asked.currency,
        receipt: asked.receipt,
        notes: asked.notes,
        created_at: Utc::now().timestamp(),
        capture: asked.capture,
        status: "created",
        payments: Vec::new(),
        pacing: Pacing::default(),
    };
    let json = sandbox.state.with(|state| {
        let json = order.to_json(&state.payments);
        state.orders.insert(order.id.clone(), order);
        json
    });
    HttpResponse::Ok().json(json)
}

async fn fetch_order(
    sandbox: web::Data<RazorpaySandbox>,
    request: HttpRequest,
    path: web::Path<String>,
) -> HttpResponse {
    if !sandbox.authorised(&request) {
        return RazorpayError::unauthorised().response();
    }
    match sandbox.state.with(|state| {
        state
            .orders
            .get(path.as_str())
            .map(|order| order.to_json(&state.payments))
    }) {
        Some(order) => HttpResponse::Ok().json(order),
        None => RazorpayError::unknown_id().response(),
    }
}

fn collection(items: Vec<Value>) -> HttpResponse {
    HttpResponse::Ok().json(json!({ "entity": "collection", "count": items.len(), "items": items }))
}

async fn order_payments(
    sandbox: web::Data<RazorpaySandbox>,
    request: HttpRequest,
    path: web::Path<String>,
) -> HttpResponse {
    if !sandbox.authorised(&request) {
        return RazorpayError::unauthorised().response();
    }
    let items = sandbox.state.with(|state| {
        state.orders.get(path.as_str()).map(|order| {
            order
                .payments
                .iter()
                .filter_map(|id| state.payments.get(id).map(Payment::to_json))
                .collect::<Vec<_>>()
        })
    });
    match items {
        Some(items) => collection(items),
        None => RazorpayError::unknown_id().response(),
    }
}

async fn fetch_payment(
    sandbox: web::Data<RazorpaySandbox>,
    request: HttpRequest,
    path: web::Path<String>,
) -> HttpResponse {
    if !sandbox.authorised(&request) {
        return RazorpayError::unauthorised().response();
    }
    match sandbox.payment(&path) {
        Some(payment) => HttpResponse::Ok().json(payment),
        None => RazorpayError::unknown_id().response(),
    }
}

/// `POST /v1/payments/{id}/capture`: only an authorised payment, for
/// exactly its amount and currency (razorpay.com/docs/api/payments/capture).
async fn capture(
    sandbox: web::Data<RazorpaySandbox>,
    request: HttpRequest,
    path: web::Path<String>,
    body: RazorpayBody,
) -> HttpResponse {
    if !sandbox.authorised(&request) {
        return RazorpayError::unauthorised().response();
    }
    let asked = match CapturePayment::parse(body.content_type.as_deref(), &body.bytes) {
        Ok(asked) => asked,
        Err(refusal) => return refusal.response(),
    };
    let result = sandbox.state.with(|state| {
        let Some(payment) = state.payments.get(path.as_str()) else {
            return Err(RazorpayError::unknown_id());
        };
        if payment.captured {
            return Err(RazorpayError::invalid(
                "This payment has already been captured",
                None,
            ));
        }
        if payment.status != "authorized" {
            return Err(RazorpayError::invalid(
                "Only payments which have been authorized and not yet captured can be captured",
                None,
            ));
        }
        if asked.amount != payment.amount {
            return Err(RazorpayError::invalid(
                "Capture amount must be equal to the amount authorized",
                Some("amount"),
            ));
        }
        if asked.currency != payment.currency {
            return Err(RazorpayError::invalid(
                "Currency should be same as that of the payment",
                Some("currency"),
            ));
        }
        RazorpaySandbox::capture_in(state, path.as_str()).ok_or_else(RazorpayError::unknown_id)
    });
    match result {
        Ok(captured) => {
            let payment = captured.0.clone();
            sandbox.captured_events(captured);
            HttpResponse::Ok().json(payment)
        }
        Err(refusal) => refusal.response(),
    }
}

/// A refund made, kept in the ledger: what `POST …/refund` does once the
/// request is known to be right. Only captured money is refunded, never
/// beyond what is left (razorpay.com/docs/api/refunds/create-normal).
fn refund_in(
    state: &mut State,
    payment_id: &str,
    asked: &CreateRefund,
) -> Result<(Value, Value, Refund), RazorpayError> {
    let Some(payment) = state.payments.get_mut(payment_id) else {
        return Err(RazorpayError::unknown_id());
    };
    if !payment.captured {
        return Err(RazorpayError::invalid(
            "Only captured payments can be refunded",
            None,
        ));
    }
    if payment.left() <= 0 {
        return Err(RazorpayError::invalid(
            "The payment has been fully refunded already",
            None,
        ));
    }
    let amount = asked.amount.unwrap_or(payment.left());
    if amount > payment.left() {
        return Err(RazorpayError::invalid(
            "The refund amount provided is greater than amount captured.",
            Some("amount"),
        ));
    }
    payment.amount_refunded = payment.amount_refunded.saturating_add(amount);
    if payment.left() == 0 {
        payment.status = "refunded";
    }
    let refund = Refund {
        id: random_id("rfnd"),
        payment_id: payment.id.clone(),
        order_id: payment.order_id.clone(),
        amount,
        currency: payment.currency.clone(),
        notes: asked.notes.clone(),
        receipt: asked.receipt.clone(),
        speed: asked.speed.clone(),
        status: "pending",
        created_at: Utc::now().timestamp(),
    };
    state.ledger.refunds.push(RefundRecord {
        id: refund.id.clone(),
        payment_intent: payment.id.clone(),
        amount,
        idempotency_key: asked.key.clone(),
        status: "pending",
        by_provider: false,
    });
    let json = refund.to_json();
    let payment_json = payment.to_json();
    state.refunds.push(refund.clone());
    Ok((json, payment_json, refund))
}

/// `POST /v1/payments/{id}/refund`. With `X-Refund-Idempotency`
/// (razorpay.com/docs/api/refunds/normal-refunds-idempotent): a repeat gets
/// the first answer; another body under the key is refused; a repeat while
/// the first is in flight gets 409.
async fn refund(
    sandbox: web::Data<RazorpaySandbox>,
    request: HttpRequest,
    path: web::Path<String>,
    body: RazorpayBody,
) -> HttpResponse {
    if !sandbox.authorised(&request) {
        return RazorpayError::unauthorised().response();
    }
    let payment_id = path.into_inner();
    let key = request
        .headers()
        .get("X-Refund-Idempotency")
        .map(|value| value.as_bytes());
    let asked = match CreateRefund::parse(body.content_type.as_deref(), &body.bytes, key) {
        Ok(asked) => asked,
        Err(refusal) => return refusal.response(),
    };
    if let Some(key) = &asked.key {
        let claim = sandbox
            .state
            .with(|state| state.refund_keys.claim(key, asked.fingerprint));
        match claim {
            Claim::First => {}
            Claim::Replay(status, body) => {
                return HttpResponse::build(StatusCode::from_u16(status).unwrap_or(StatusCode::OK))
                    .json(body);
            }
            Claim::Mismatch => {
                return RazorpayError::invalid(
                    "Different request with the same idempotency key has already been processed.",
                    None,
                )
                .response();
            }
            Claim::InFlight => {
                return RazorpayError::other(
                    StatusCode::CONFLICT,
                    "Another request with the same idempotency key is in progress",
                )
                .response();
            }
        }
    }
    // the refund takes a moment, as a bank's does
    tokio::time::sleep(Duration::from_millis(30)).await;
    let result = sandbox
        .state
        .with(|state| refund_in(state, &payment_id, &asked));
    // the answer, refusal or refund, is the key's from now on
    let (status, body) = match &result {
        Ok((json, _, _)) => (StatusCode::OK, json.clone()),
        Err(refusal) => (refusal.status(), refusal.body()),
    };
    if let Some(key) = &asked.key {
        sandbox
            .state
            .with(|state| state.refund_keys.answer(key, status.as_u16(), body.clone()));
    }
    if let Ok((json, payment, created)) = result {
        sandbox.emit(
            &created.order_id,
            "refund.created",
            json!({ "refund": { "entity": json }, "payment": { "entity": payment } }),
        );
        let after = sandbox.state.with(|s| s.refunds_settle_after);
        let sandbox = sandbox.get_ref().clone();
        later(after, move || {
            let _ = sandbox.settle_refund(&created.id, true);
        });
    }
    HttpResponse::build(status).json(body)
}

async fn payment_refunds(
    sandbox: web::Data<RazorpaySandbox>,
    request: HttpRequest,
    path: web::Path<String>,
) -> HttpResponse {
    if !sandbox.authorised(&request) {
        return RazorpayError::unauthorised().response();
    }
    let items = sandbox.state.with(|state| {
        state.payments.contains_key(path.as_str()).then(|| {
            state
                .refunds
                .iter()
                .rev()
                .filter(|r| r.payment_id == *path)
                .map(Refund::to_json)
                .collect::<Vec<_>>()
        })
    });
    match items {
        Some(items) => collection(items),
        None => RazorpayError::unknown_id().response(),
    }
}

fn refund_json(sandbox: &RazorpaySandbox, id: &str, payment: Option<&str>) -> HttpResponse {
    match sandbox.state.with(|state| {
        state
            .refunds
            .iter()
            .find(|r| r.id == id && payment.is_none_or(|p| p == r.payment_id))
            .map(Refund::to_json)
    }) {
        Some(refund) => HttpResponse::Ok().json(refund),
        None => RazorpayError::unknown_id().response(),
    }
}

async fn payment_refund(
    sandbox: web::Data<RazorpaySandbox>,
    request: HttpRequest,
    path: web::Path<(String, String)>,
) -> HttpResponse {
    if !sandbox.authorised(&request) {
        return RazorpayError::unauthorised().response();
    }
    let (payment, refund) = path.into_inner();
    refund_json(&sandbox, &refund, Some(&payment))
}

async fn fetch_refund(
    sandbox: web::Data<RazorpaySandbox>,
    request: HttpRequest,
    path: web::Path<String>,
) -> HttpResponse {
    if !sandbox.authorised(&request) {
        return RazorpayError::unauthorised().response();
    }
    refund_json(&sandbox, &path, None)
}

/// The stand-in for checkout.js in redirect mode: `new Razorpay(options)
/// .open()` sends the browser to the sandbox's hosted page.
async fn checkout_script(sandbox: web::Data<RazorpaySandbox>) -> HttpResponse {
    let base = sandbox.public_base.clone();
    HttpResponse::Ok()
        .content_type("application/javascript")
        .body(format!(
            "window.Razorpay = function (options) {{ this.options = options; }};\n\
             window.Razorpay.prototype.open = function () {{\n\
               var o = this.options;\n\
               var q = 'callback_url=' + encodeURIComponent(o.callback_url) +\n\
                       '&cancel_url=' + encodeURIComponent((o.modal && o.modal.cancel_url) || '');\n\
               window.location.href = '{base}/razorpay/pay/' + encodeURIComponent(o.order_id) + '?' + q;\n\
             }};\n"
        ))
}

async fn set_delivery(
    sandbox: web::Data<RazorpaySandbox>,
    path: web::Path<String>,
    query: web::Query<DeliveryQuery>,
) -> HttpResponse {
    if sandbox.set_delivery(&path.into_inner(), query.mode) {
        HttpResponse::NoContent().finish()
    } else {
        HttpResponse::NotFound().finish()
    }
}

#[derive(Debug, Deserialize)]
struct PayQuery {
    amount: Option<i64>,
    #[serde(default)]
    late: bool,
}

/// A payment as the checkout would make it, with what the callback would
/// carry: `{payment_id, signature}`.
async fn control_pay(
    sandbox: web::Data<RazorpaySandbox>,
    path: web::Path<String>,
    query: web::Query<PayQuery>,
) -> HttpResponse {
    let order_id = path.into_inner();
    match sandbox.authorize(&order_id, query.amount, query.late) {
        Ok(payment_id) => HttpResponse::Ok().json(json!({
            "payment_id": payment_id,
            "signature": sandbox.signature(&order_id, &payment_id),
        })),
        Err(message) => HttpResponse::NotFound().body(message),
    }
}

/// The bank answers a payment that timed out: authorised late.
async fn authorize_late(
    sandbox: web::Data<RazorpaySandbox>,
    path: web::Path<String>,
) -> HttpResponse {
    match sandbox.authorize_late(&path.into_inner()) {
        Ok(()) => HttpResponse::NoContent().finish(),
        Err(message) => HttpResponse::NotFound().body(message),
    }
}

#[derive(Debug, Deserialize)]
struct DaysQuery {
    days: i64,
}

/// Days pass at Razorpay (what nobody captured within 5 days goes back).
async fn days_pass(
    sandbox: web::Data<RazorpaySandbox>,
    query: web::Query<DaysQuery>,
) -> HttpResponse {
    let returned = sandbox.days_pass(query.days);
    HttpResponse::Ok().json(json!({ "refunded": returned }))
}

async fn auto_refund(sandbox: web::Data<RazorpaySandbox>) -> HttpResponse {
    let returned = sandbox.auto_refund_uncaptured();
    HttpResponse::Ok().json(json!({ "refunded": returned }))
}

async fn settle_refund(
    sandbox: web::Data<RazorpaySandbox>,
    path: web::Path<String>,
    query: web::Query<OutcomeQuery>,
) -> HttpResponse {
    let id = path.into_inner();
    query.settle("processed", |ok| sandbox.settle_refund(&id, ok))
}

async fn refunds_auto(
    sandbox: web::Data<RazorpaySandbox>,
    query: web::Query<AutoQuery>,
) -> HttpResponse {
    sandbox.set_refunds_settle_after(query.after());
    HttpResponse::NoContent().finish()
}

async fn ledger(sandbox: web::Data<RazorpaySandbox>) -> HttpResponse {
    HttpResponse::Ok().json(sandbox.ledger())
}
