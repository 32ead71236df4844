//! One table of the error codes the shop and the JSON API answer with
//! (meilisearch's `error.rs` is the model): each code once, with its HTTP
//! status, the words a person reads, and its section of docs/errors.md.
//! A use case's outcome is mapped to a code once ([`checkout_code`] for a
//! checkout); the API renders the entry as `{"error": {"code", "message",
//! "doc"}}`, and the shop's pages answer with its status. A browser's form
//! that cannot be used answers 400 where the API answers 422
//! ([`ErrorCode::page_status`]): 422 is for machines reading the code.

use actix_web::http::StatusCode;

use crate::catalogue::kinds::seats::choice::SeatReason;
use crate::checkout::Begun;

macro_rules! error_codes {
    ($($variant:ident = $name:literal, $status:ident, $message:literal;)+) => {
        /// Every error code, with what it answers.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum ErrorCode {
            $($variant,)+
        }

        impl ErrorCode {
            /// Every code, in the table's order.
            pub const ALL: &'static [ErrorCode] = &[$(ErrorCode::$variant,)+];

            /// The stable code a client matches on (`sold_out`).
            pub fn name(self) -> &'static str {
                match self {
                    $(ErrorCode::$variant => $name,)+
                }
            }

            /// The HTTP status the API answers it with.
            pub fn status(self) -> StatusCode {
                match self {
                    $(ErrorCode::$variant => StatusCode::$status,)+
                }
            }

            /// What a person reads when nothing more particular is said.
            pub fn message(self) -> &'static str {
                match self {
                    $(ErrorCode::$variant => $message,)+
                }
            }
        }
    };
}

error_codes! {
    // 400: the request cannot be read
    BadJson = "bad_json", BAD_REQUEST, "The body is not the JSON this endpoint takes";
    BadBody = "bad_body", BAD_REQUEST, "This route takes no body, or the body was cut short";
    BadQuery = "bad_query", BAD_REQUEST, "The query string cannot be read";
    BadIds = "bad_ids", BAD_REQUEST, "Give 1 to 100 product ids of at most 200 bytes";
    BadLimit = "bad_limit", BAD_REQUEST, "The limit is 1 to 200";
    BadCursor = "bad_cursor", BAD_REQUEST, "The after parameter must be a cursor that a page of orders gave";
    BadRequest = "bad_request", BAD_REQUEST, "Text that cannot be stored: a NUL byte or bytes that are not UTF-8";
    IdempotencyKeyRequired = "idempotency_key_required", BAD_REQUEST, "Every POST needs an Idempotency-Key header of 1 to 64 letters, digits, - or _; nothing was done";
    // 401, 403, 404, 413
    Unauthenticated = "unauthenticated", UNAUTHORIZED, "A live API key is needed: Authorization: Bearer hf_…";
    MissingScope = "missing_scope", FORBIDDEN, "This API key lacks the scope this route needs";
    NotFound = "not_found", NOT_FOUND, "There is no such thing here";
    TooLarge = "too_large", PAYLOAD_TOO_LARGE, "The body is too large";
    // 422: readable, but not something that can be used
    BadLines = "bad_lines", UNPROCESSABLE_ENTITY, "Give 1 to 20 lines of 1 to 100 units of a product id; nothing was done";
    BadCustomer = "bad_customer", UNPROCESSABLE_ENTITY, "The name or the e-mail cannot be used";
    UnknownProduct = "unknown_product", UNPROCESSABLE_ENTITY, "That product is not for sale; nothing was held";
    UnknownProvider = "unknown_provider", UNPROCESSABLE_ENTITY, "That way of paying is not offered here";
    InvalidInput = "invalid_input", UNPROCESSABLE_ENTITY, "A field cannot be used; nothing was done";
    TooMany = "too_many", UNPROCESSABLE_ENTITY, "More units than the order has left to refund";
    NotInOrder = "not_in_order", UNPROCESSABLE_ENTITY, "That product is not in the order";
    UnknownProducts = "unknown_products", UNPROCESSABLE_ENTITY, "A product named is not sold here";
    NotHidden = "not_hidden", UNPROCESSABLE_ENTITY, "A voucher unlocks only hidden products";
    UnknownSeats = "unknown_seats", UNPROCESSABLE_ENTITY, "A seat named is not in that section; nothing was held";
    IdempotencyKeyReused = "idempotency_key_reused", UNPROCESSABLE_ENTITY, "This Idempotency-Key was used with another body; nothing was done";
    // 409: it clashes with what is there now
    NotPaid = "not_paid", CONFLICT, "The order is not paid, so nothing can be refunded";
    NothingLeft = "nothing_left", CONFLICT, "Everything in the order was refunded already";
    Redeemed = "redeemed", CONFLICT, "A code of those units was used; refunding it needs the override";
    Exists = "exists", CONFLICT, "That already exists";
    Archived = "archived", CONFLICT, "That was archived";
    SoldOut = "sold_out", CONFLICT, "Not enough left; nothing was held";
    OverLimit = "over_limit", CONFLICT, "More than one buyer may hold at once; nothing was held";
    NotOnSale = "not_on_sale", CONFLICT, "A product is not on sale now; nothing was held";
    BadVoucher = "bad_voucher", CONFLICT, "The voucher cannot be used; nothing was held";
    Locked = "locked", CONFLICT, "A product is sold only with the code that unlocks it";
    Withdrawn = "withdrawn", CONFLICT, "A product is no longer sold";
    RanOut = "ran_out", CONFLICT, "The reservation ran out; nothing was charged";
    SeatsTaken = "seats_taken", CONFLICT, "A seat asked for was taken meanwhile; nothing was held";
    NotTogether = "not_together", CONFLICT, "No row has that many seats together now; nothing was held";
    NoTable = "no_table", CONFLICT, "No table seats that party at that time now; nothing was held";
    // 429, 5xx
    TooFast = "too_fast", TOO_MANY_REQUESTS, "Too many from this address; try again shortly";
    ProviderUnavailable = "provider_unavailable", SERVICE_UNAVAILABLE, "The payment provider did not answer; nothing was held; try again";
    Unavailable = "unavailable", SERVICE_UNAVAILABLE, "The shop is busy or restarting; try again in a moment";
    Busy = "busy", SERVICE_UNAVAILABLE, "Too much at once; try again in a moment";
    Internal = "internal", INTERNAL_SERVER_ERROR, "Something went wrong on our side; nothing was charged twice";
}

impl ErrorCode {
    /// Its section of the error page: `docs/errors.md#sold_out`.
    pub fn doc(self) -> String {
        format!("docs/errors.md#{}", self.name())
    }

    /// The status a shop page answers it with: the API's, but 400 where
    /// the API says 422 (a browser's form that cannot be used).
    pub fn page_status(self) -> StatusCode {
        match self.status() {
            StatusCode::UNPROCESSABLE_ENTITY => StatusCode::BAD_REQUEST,
            status => status,
        }
    }
}

/// The code of a checkout that did not reach a payment page: the one
/// mapping the form and the API both answer from. `None`: it did (or the
/// form was submitted before and goes where its first submit went).
pub fn checkout_code(begun: &Begun) -> Option<ErrorCode> {
    Some(match begun {
        Begun::Pay { .. } | Begun::Confirmed { .. } | Begun::Again { .. } => return None,
        Begun::EmptyBasket => ErrorCode::BadLines,
        Begun::BadCustomer { .. } => ErrorCode::BadCustomer,
        Begun::UnknownProvider | Begun::TooSlowToPay { .. } => ErrorCode::UnknownProvider,
        Begun::TooFast(_) => ErrorCode::TooFast,
        Begun::SoldOut { .. } => ErrorCode::SoldOut,
        Begun::OverLimit { .. } => ErrorCode::OverLimit,
        Begun::NoTable { .. } => ErrorCode::NoTable,
        Begun::Withdrawn => ErrorCode::Withdrawn,
        Begun::NotOnSale { .. } => ErrorCode::NotOnSale,
        Begun::BadVoucher { .. } => ErrorCode::BadVoucher,
        Begun::Locked { .. } => ErrorCode::Locked,
        Begun::SeatsRefused { refusal, .. } => match refusal.reason {
            SeatReason::SeatsTaken => ErrorCode::SeatsTaken,
            SeatReason::UnknownSeats => ErrorCode::UnknownSeats,
            SeatReason::NotTogether => ErrorCode::NotTogether,
        },
        Begun::ProviderFailed | Begun::PaymentPhaseFailed => ErrorCode::ProviderUnavailable,
        Begun::RanOut => ErrorCode::RanOut,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_is_named_once_in_snake_case_with_an_error_status() {
        let mut names: Vec<&str> = ErrorCode::ALL.iter().map(|c| c.name()).collect();
        let count = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), count, "a code named twice");
        for code in ErrorCode::ALL {
            assert!(
                code.name()
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b == b'_'),
                "{code:?}"
            );
            assert!(
                code.status().is_client_error() || code.status().is_server_error(),
                "{code:?}"
            );
            assert!(!code.message().is_empty() && !code.message().ends_with('.'));
            // a sentence a shopper reads: it starts with a capital
            assert!(
                code.message().starts_with(char::is_uppercase),
                "{}",
                code.message()
            );
        }
        assert_eq!(
            ErrorCode::BadCustomer.page_status(),
            StatusCode::BAD_REQUEST
        );
        assert_eq!(ErrorCode::SoldOut.page_status(), StatusCode::CONFLICT);
    }

    #[test]
    fn every_word_a_checkout_is_refused_in_is_a_code_of_the_table() {
        for word in crate::checkout::StartOutcome::REFUSALS {
            assert!(
                ErrorCode::ALL.iter().any(|code| code.name() == *word),
                "{word} is not in the table"
            );
        }
    }

    #[test]
    fn docs_errors_md_explains_exactly_the_codes_of_the_table() {
        let page = include_str!("../../docs/errors.md");
        let headings: Vec<&str> = page
            .lines()
            .filter_map(|line| line.strip_prefix("### "))
            .collect();
        let names: Vec<&str> = ErrorCode::ALL.iter().map(|c| c.name()).collect();
        assert_eq!(headings, names, "docs/errors.md and the table, in order");
        for code in ErrorCode::ALL {
            // each section sits under the heading of its status
            let section = page
                .split("\n## ")
                .find(|part| part.contains(&format!("### {}\n", code.name())))
                .expect("a section");
            let status = code.status().as_u16().to_string();
            assert!(
                section.starts_with(&status)
                    || section.contains(&format!(", {status}"))
                    || (section.starts_with("5xx") && code.status().is_server_error()),
                "{} under the wrong status",
                code.name()
            );
        }
    }
}
