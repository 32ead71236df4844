//! Stripe's hosted payment page as the sandbox plays it (`GET /pay/{id}`):
//! pay, a declined card, pay twice, a SEPA Direct Debit where the session
//! allows it, and back to the shop; a closed page says so (and can take
//! money after expiry, a test of late money), and a debit settling can be
//! answered for its bank, as days later (it pays, or it refuses).

use super::StripeSandbox;
use crate::pages::{amount_text, escape, not_found, page, redirect};
use actix_web::{HttpResponse, web};
use chrono::Utc;

pub(super) async fn hosted_page(
    sandbox: web::Data<StripeSandbox>,
    path: web::Path<String>,
) -> HttpResponse {
    sandbox.expire_due();
    let id = path.into_inner();
    let Some(session) = sandbox.state.with(|s| s.sessions.get(&id).cloned()) else {
        return not_found("No such payment page.");
    };
    let id = escape(&session.id);
    if session.status != "open" || session.expires_at <= Utc::now().timestamp() {
        // Stripe would stop here; the sandbox can also play money that
        // arrives after expiry (an async method settling late)
        let state = if session.status == "open" {
            "expired"
        } else {
            session.status
        };
        let late = if state == "expired" {
            format!(
                "<form method=\"post\" action=\"/stripe/pay/{id}/pay-late\">\
                 <button id=\"pay-late\">Pay anyway (money arriving after expiry)</button></form>"
            )
        } else if session.payment_status == "unpaid" {
            // a debit settling: what its bank says, days later, at a press
            format!(
                "<p>Paid by SEPA Direct Debit: the bank has not answered yet (it takes up to 14 \
                 business days).</p>\
                 <form method=\"post\" action=\"/stripe/pay/{id}/bank-pays\">\
                 <button id=\"bank-pays\">The bank pays (as it would days later)</button></form>\
                 <form method=\"post\" action=\"/stripe/pay/{id}/bank-refuses\">\
                 <button id=\"bank-refuses\">The bank refuses the debit</button></form>"
            )
        } else {
            String::new()
        };
        return page(
            "Payment",
            &format!("<h1>This payment page is {}</h1>{late}", escape(state)),
        );
    }
    let lines: String = session
        .line_items
        .iter()
        .map(|item| {
            format!(
                "<li>{} × {} — {}</li>",
                item.quantity,
                escape(&item.name),
                amount_text(item.unit_amount, &session.currency)
            )
        })
        .collect();
    let delayed = if session.allows("sepa_debit") {
        format!(
            "<form method=\"post\" action=\"/stripe/pay/{id}/pay-delayed\">\
             <button id=\"pay-delayed\">Pay by SEPA Direct Debit (settles in a few days)</button></form>"
        )
    } else {
        String::new()
    };
    page(
        "Pay",
        &format!(
            "<h1>Pay {}</h1><ul>{lines}</ul>\
             <form method=\"post\" action=\"/stripe/pay/{id}/pay\"><button id=\"pay\">Pay</button></form>\
             <form method=\"post\" action=\"/stripe/pay/{id}/decline\"><button id=\"decline\">Pay with a card that is declined</button></form>\
             <form method=\"post\" action=\"/stripe/pay/{id}/pay-twice\"><button id=\"pay-twice\">Pay twice</button></form>\
             {delayed}\
             <form method=\"post\" action=\"/stripe/pay/{id}/abandon\"><button id=\"abandon\">Back to the shop</button></form>",
            amount_text(session.amount_total, &session.currency)
        ),
    )
}

pub(super) async fn hosted_action(
    sandbox: web::Data<StripeSandbox>,
    path: web::Path<(String, String)>,
) -> HttpResponse {
    sandbox.expire_due();
    let (id, action) = path.into_inner();
    let done = |result: Result<Option<String>, String>| match result {
        Ok(Some(url)) => redirect(&url),
        Ok(None) => page("Paid", "<h1>Paid</h1>"),
        Err(message) => page("Payment", &format!("<h1>{}</h1>", escape(&message))),
    };
    match action.as_str() {
        "pay" => done(sandbox.pay(&id, false)),
        "pay-twice" => {
            let first = sandbox.pay(&id, false);
            if first.is_ok() {
                // a second charge for the same checkout, as a double
                // click on a slow bank page can produce
                let _ = sandbox.pay(&id, true);
            }
            done(first)
        }
        "pay-late" => done(sandbox.pay(&id, true)),
        "pay-delayed" => done(sandbox.pay_delayed(&id)),
        "bank-pays" | "bank-refuses" => {
            let paid = action == "bank-pays";
            match sandbox.settle_delayed(&id, paid) {
                Ok(()) => page(
                    "Settled",
                    &format!(
                        "<h1>The bank {}</h1><p><a href=\"/stripe/pay/{}\">Back to the payment page</a></p>",
                        if paid { "paid" } else { "refused the debit" },
                        escape(&id)
                    ),
                ),
                Err(message) => page("Payment", &format!("<h1>{}</h1>", escape(&message))),
            }
        }
        "decline" => page(
            "Declined",
            &format!(
                "<h1>Your card was declined</h1><p><a href=\"/stripe/pay/{}\">Try again</a></p>",
                escape(&id)
            ),
        ),
        "abandon" => {
            let cancel = sandbox.state.with(|s| {
                s.sessions
                    .get(&id)
                    .and_then(|session| session.cancel_url.clone())
            });
            match cancel {
                Some(url) => redirect(&url),
                None => page("Left", "<h1>You left the payment page</h1>"),
            }
        }
        _ => not_found("No such action."),
    }
}
