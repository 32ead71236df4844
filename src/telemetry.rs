//! Structured logs. Quiet by default in tests; `RUST_LOG` picks the level
//! and `HOLDFAST_LOG_FORMAT=json` gives one JSON object per line.

use tracing_subscriber::EnvFilter;

pub fn init(default_level: &str) {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_level));
    let json = std::env::var("HOLDFAST_LOG_FORMAT").is_ok_and(|format| format == "json");
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    // a second init (tests) is harmless
    let _ = if json {
        builder.json().try_init()
    } else {
        builder.try_init()
    };
}

/// Every request's span: method, route (its pattern, never the path: order
/// tokens and return parameters stay out of the logs), a request id and,
/// at the end, the status. What a handler logs (a webhook's verdict, the
/// confirm routine's decision) carries these fields, so one request can be
/// followed through the logs by its id. A failed request (5xx) is logged at
/// its end; the others at debug level only.
pub struct RequestSpan;

impl tracing_actix_web::RootSpanBuilder for RequestSpan {
    fn on_request_start(request: &actix_web::dev::ServiceRequest) -> tracing::Span {
        use actix_web::HttpMessage;
        let request_id = request
            .extensions()
            .get::<tracing_actix_web::RequestId>()
            .map(|id| id.to_string())
            .unwrap_or_default();
        tracing::info_span!(
            "request",
            method = %request.method(),
            route = request.match_pattern().as_deref().unwrap_or("unmatched"),
            request_id = %request_id,
            status = tracing::field::Empty,
        )
    }

    fn on_request_end<B: actix_web::body::MessageBody>(
        span: tracing::Span,
        outcome: &Result<actix_web::dev::ServiceResponse<B>, actix_web::Error>,
    ) {
        let status = match outcome {
            Ok(response) => response.status(),
            Err(error) => error.as_response_error().status_code(),
        };
        span.record("status", status.as_u16());
        let _entered = span.enter();
        if status.is_server_error() {
            tracing::error!("request failed");
        } else {
            tracing::debug!("request answered");
        }
    }
}
