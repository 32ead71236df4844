//! Every request the sandbox cannot take, sent to a running sandbox over
//! one kept-alive connection per provider: each gets the provider's error
//! shape and a 4xx, and the connection still answers the next request.
//! (Stripe: `{"error":{"type":"invalid_request_error","message","param"}}`,
//! docs.stripe.com/api/errors; Razorpay: `{"error":{"code":
//! "BAD_REQUEST_ERROR","description","source","step","reason","metadata",
//! "field"}}`, razorpay.com/docs/errors.)

use std::net::TcpListener;

use base64::Engine;
use holdfast_sandbox::{BODY_LIMIT, Sandbox, SandboxSettings};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A sandbox on a free port; its address.
fn sandbox() -> (String, SandboxSettings) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let settings = SandboxSettings::development();
    let sandbox = Sandbox::build(listener, settings.clone(), format!("http://{address}")).unwrap();
    tokio::spawn(sandbox.run_until_stopped());
    (address, settings)
}

/// One HTTP/1.1 connection, kept alive, spoken by hand: nothing between
/// the test and the bytes.
struct Connection(TcpStream);

struct Answer {
    status: u16,
    headers: String,
    body: Vec<u8>,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|_| {
            panic!(
                "not JSON: {} {}",
                self.status,
                String::from_utf8_lossy(&self.body)
            )
        })
    }
}

impl Connection {
    async fn open(address: &str) -> Self {
        Self(TcpStream::connect(address).await.unwrap())
    }

    async fn send(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Answer {
        let mut request = format!(
            "{method} {path} HTTP/1.1\r\nHost: sandbox\r\nContent-Length: {}\r\n",
            body.len()
        );
        for (name, value) in headers {
            request.push_str(&format!("{name}: {value}\r\n"));
        }
        request.push_str("\r\n");
        let mut bytes = request.into_bytes();
        bytes.extend_from_slice(body);
        self.0
            .write_all(&bytes)
            .await
            .expect("the request is written");
        self.read().await
    }

    async fn read(&mut self) -> Answer {
        let mut buffer = Vec::new();
        let head_end = loop {
            if let Some(at) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
                break at;
            }
            let mut chunk = [0u8; 4096];
            let n = self.0.read(&mut chunk).await.expect("the connection reads");
            assert!(n > 0, "the connection was closed without an answer");
            buffer.extend_from_slice(&chunk[..n]);
        };
        let head = String::from_utf8_lossy(&buffer[..head_end]).into_owned();
        let status: u16 = head
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .expect("a status line");
        let length: usize = head
            .lines()
            .find_map(|line| {
                let (name, value) = line.split_once(':')?;
                name.eq_ignore_ascii_case("content-length")
                    .then(|| value.trim().parse().ok())?
            })
            .expect("answers carry a Content-Length");
        let mut body = buffer[head_end + 4..].to_vec();
        while body.len() < length {
            let mut chunk = [0u8; 4096];
            let n = self.0.read(&mut chunk).await.expect("the connection reads");
            assert!(n > 0, "the connection was closed mid-answer");
            body.extend_from_slice(&chunk[..n]);
        }
        body.truncate(length);
        Answer {
            status,
            headers: head,
            body,
        }
    }
}

/// Stripe's error shape, and the status expected.
fn stripe_refusal(answer: &Answer, status: u16, case: &str) -> Value {
    assert_eq!(
        answer.status,
        status,
        "{case}: {}",
        String::from_utf8_lossy(&answer.body)
    );
    let body = answer.json();
    let error = &body["error"];
    assert_eq!(error["type"], "invalid_request_error", "{case}: {body}");
    assert!(
        error["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{case}: {body}"
    );
    assert!(
        error.as_object().is_some_and(|e| e.contains_key("param")),
        "{case}: {body}"
    );
    assert!(
        answer
            .headers
            .to_ascii_lowercase()
            .contains("content-type: application/json"),
        "{case}"
    );
    error.clone()
}

/// Razorpay's error shape, every key of it, and the status expected.
fn razorpay_refusal(answer: &Answer, status: u16, case: &str) -> Value {
    assert_eq!(
        answer.status,
        status,
        "{case}: {}",
        String::from_utf8_lossy(&answer.body)
    );
    let body = answer.json();
    let error = body["error"]
        .as_object()
        .unwrap_or_else(|| panic!("{case}: {body}"));
    assert_eq!(error["code"], "BAD_REQUEST_ERROR", "{case}");
    assert!(
        error["description"].as_str().is_some_and(|d| !d.is_empty()),
        "{case}: {body}"
    );
    for key in ["source", "step", "reason", "metadata", "field"] {
        assert!(error.contains_key(key), "{case}: no {key} in {body}");
    }
    assert!(error["metadata"].is_object(), "{case}");
    body["error"].clone()
}

/// One request that must be refused: what it is, how it is sent, the
/// status expected and the field the refusal names, if any.
struct Case<'a> {
    what: &'a str,
    method: &'a str,
    path: &'a str,
    headers: Vec<(&'a str, &'a str)>,
    body: Vec<u8>,
    status: u16,
    field: Option<&'a str>,
}

fn case<'a>(
    what: &'a str,
    method: &'a str,
    path: &'a str,
    headers: Vec<(&'a str, &'a str)>,
    body: impl Into<Vec<u8>>,
    status: u16,
    field: Option<&'a str>,
) -> Case<'a> {
    Case {
        what,
        method,
        path,
        headers,
        body: body.into(),
        status,
        field,
    }
}

const FORM: (&str, &str) = ("Content-Type", "application/x-www-form-urlencoded");
const JSON: (&str, &str) = ("Content-Type", "application/json");

#[tokio::test]
async fn stripe_answers_every_malformed_request_in_its_shape_and_keeps_the_connection() {
    let (address, settings) = sandbox();
    let bearer = format!("Bearer {}", settings.stripe_secret_key.expose());
    let auth = ("Authorization", bearer.as_str());
    let mut connection = Connection::open(&address).await;
    let sessions = "/stripe/v1/checkout/sessions";
    let big = vec![b'a'; BODY_LIMIT + 1];
    let long_key = "k".repeat(256);
    let cases: Vec<Case> = vec![
        case(
            "a missing field",
            "POST",
            sessions,
            vec![auth, FORM],
            b"mode=payment".to_vec(),
            400,
            Some("success_url"),
        ),
        case(
            "a wrongly typed field",
            "POST",
            sessions,
            vec![auth, FORM],
            b"mode=payment&expires_at=soon".to_vec(),
            400,
            None,
        ),
        case(
            "a field Stripe does not take",
            "POST",
            sessions,
            vec![auth, FORM],
            b"colour=blue".to_vec(),
            400,
            Some("colour"),
        ),
        case(
            "bad form encoding",
            "POST",
            sessions,
            vec![auth, FORM],
            b"line_items[0=1".to_vec(),
            400,
            None,
        ),
        case(
            "a form that is not UTF-8",
            "POST",
            sessions,
            vec![auth, FORM],
            b"mode=%ff%fe".to_vec(),
            400,
            None,
        ),
        case(
            "a JSON body",
            "POST",
            sessions,
            vec![auth, JSON],
            br#"{"mode":"payment"}"#.to_vec(),
            400,
            None,
        ),
        case(
            "no content type",
            "POST",
            "/stripe/v1/refunds",
            vec![auth],
            b"payment_intent=pi_1".to_vec(),
            400,
            None,
        ),
        case(
            "an oversized body",
            "POST",
            sessions,
            vec![auth, FORM],
            big,
            413,
            None,
        ),
        case(
            "an unknown route",
            "GET",
            "/stripe/v1/nothing/here",
            vec![auth],
            Vec::new(),
            404,
            None,
        ),
        case(
            "a method the URL does not take",
            "DELETE",
            sessions,
            vec![auth],
            Vec::new(),
            404,
            None,
        ),
        case(
            "no API key",
            "GET",
            "/stripe/v1/refunds",
            vec![],
            Vec::new(),
            401,
            None,
        ),
        case(
            "a wrong API key",
            "GET",
            "/stripe/v1/refunds",
            vec![("Authorization", "Bearer sk_test_wrong")],
            Vec::new(),
            401,
            None,
        ),
        case(
            "basic auth that is not base64",
            "GET",
            "/stripe/v1/refunds",
            vec![("Authorization", "Basic %%%")],
            Vec::new(),
            401,
            None,
        ),
        case(
            "a wrongly typed query",
            "GET",
            "/stripe/v1/refunds?limit=many",
            vec![auth],
            Vec::new(),
            400,
            None,
        ),
        case(
            "a limit out of range",
            "GET",
            "/stripe/v1/refunds?limit=0",
            vec![auth],
            Vec::new(),
            400,
            Some("limit"),
        ),
        case(
            "a refund without its payment",
            "POST",
            "/stripe/v1/refunds",
            vec![auth, FORM],
            b"amount=5".to_vec(),
            400,
            Some("payment_intent"),
        ),
        case(
            "a refund of nothing",
            "POST",
            "/stripe/v1/refunds",
            vec![auth, FORM],
            b"payment_intent=pi_1&amount=-1".to_vec(),
            400,
            Some("amount"),
        ),
        case(
            "an idempotency key too long",
            "POST",
            "/stripe/v1/refunds",
            vec![auth, FORM, ("Idempotency-Key", long_key.as_str())],
            b"payment_intent=pi_1".to_vec(),
            400,
            None,
        ),
        case(
            "an unknown object",
            "GET",
            "/stripe/v1/checkout/sessions/cs_nope",
            vec![auth],
            Vec::new(),
            404,
            Some("session"),
        ),
        case(
            "a test control's bad query",
            "POST",
            "/stripe/_sandbox/latency?ms=soon",
            vec![],
            Vec::new(),
            400,
            None,
        ),
        case(
            "the CLI's session without a key",
            "POST",
            "/v1/stripecli/sessions",
            vec![FORM],
            b"device_name=d".to_vec(),
            401,
            None,
        ),
        case(
            "the CLI's session without its device",
            "POST",
            "/v1/stripecli/sessions",
            vec![auth, FORM],
            b"websocket_features[]=webhooks".to_vec(),
            400,
            Some("device_name"),
        ),
        case(
            "a resend of nothing",
            "POST",
            "/v1/events/evt_nope/retry",
            vec![auth, FORM],
            b"for_stripecli=true".to_vec(),
            404,
            Some("id"),
        ),
        case(
            "the websocket without its id",
            "GET",
            "/stripe/v1/stripecli/websocket?websocket_feature=webhooks",
            vec![],
            Vec::new(),
            400,
            None,
        ),
        case(
            "an unknown route at the root",
            "GET",
            "/nothing",
            vec![],
            Vec::new(),
            404,
            None,
        ),
    ];
    for Case {
        what,
        method,
        path,
        headers,
        body,
        status,
        field,
    } in cases
    {
        let answer = connection.send(method, path, &headers, &body).await;
        let error = stripe_refusal(&answer, status, what);
        if let Some(param) = field {
            assert_eq!(error["param"], param, "{what}");
        }
        // the same connection answers the next request
        let next = connection
            .send("GET", "/stripe/v1/events/evt_nope", &[auth], b"")
            .await;
        stripe_refusal(&next, 404, &format!("after {what}"));
    }
}

#[tokio::test]
async fn razorpay_answers_every_malformed_request_in_its_shape_and_keeps_the_connection() {
    let (address, settings) = sandbox();
    let basic = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!(
            "{}:{}",
            settings.razorpay_key_id,
            settings.razorpay_key_secret.expose()
        ))
    );
    let auth = ("Authorization", basic.as_str());
    let mut connection = Connection::open(&address).await;
    let orders = "/razorpay/v1/orders";
    let big = vec![b' '; BODY_LIMIT + 1];
    let cases: Vec<Case> = vec![
        // the panic of issue 22: no amount
        case(
            "an order without an amount",
            "POST",
            orders,
            vec![auth, JSON],
            br#"{"currency":"INR"}"#.to_vec(),
            400,
            Some("amount"),
        ),
        case(
            "an order without a currency",
            "POST",
            orders,
            vec![auth, JSON],
            br#"{"amount":5000}"#.to_vec(),
            400,
            Some("currency"),
        ),
        case(
            "an amount as text",
            "POST",
            orders,
            vec![auth, JSON],
            br#"{"amount":"5000","currency":"INR"}"#.to_vec(),
            400,
            Some("amount"),
        ),
        case(
            "an amount with a fraction",
            "POST",
            orders,
            vec![auth, JSON],
            br#"{"amount":50.5,"currency":"INR"}"#.to_vec(),
            400,
            Some("amount"),
        ),
        case(
            "an amount too small",
            "POST",
            orders,
            vec![auth, JSON],
            br#"{"amount":99,"currency":"INR"}"#.to_vec(),
            400,
            Some("amount"),
        ),
        case(
            "notes that are not an object",
            "POST",
            orders,
            vec![auth, JSON],
            br#"{"amount":5000,"currency":"INR","notes":[1]}"#.to_vec(),
            400,
            Some("notes"),
        ),
        case(
            "a field Razorpay does not take",
            "POST",
            orders,
            vec![auth, JSON],
            br#"{"amount":5000,"currency":"INR","colour":"blue"}"#.to_vec(),
            400,
            Some("colour"),
        ),
        case(
            "bad JSON",
            "POST",
            orders,
            vec![auth, JSON],
            br#"{"amount":"#.to_vec(),
            400,
            None,
        ),
        case(
            "JSON that is not an object",
            "POST",
            orders,
            vec![auth, JSON],
            b"[5000]".to_vec(),
            400,
            None,
        ),
        case(
            "a form body",
            "POST",
            orders,
            vec![auth, FORM],
            b"amount=5000&currency=INR".to_vec(),
            400,
            None,
        ),
        case(
            "no content type",
            "POST",
            orders,
            vec![auth],
            br#"{"amount":5000}"#.to_vec(),
            400,
            None,
        ),
        case(
            "an oversized body",
            "POST",
            orders,
            vec![auth, JSON],
            big,
            413,
            None,
        ),
        case(
            "an unknown route",
            "GET",
            "/razorpay/v1/nothing/here",
            vec![auth],
            Vec::new(),
            404,
            None,
        ),
        case(
            "a method the URL does not take",
            "DELETE",
            orders,
            vec![auth],
            Vec::new(),
            404,
            None,
        ),
        case(
            "no keys",
            "GET",
            "/razorpay/v1/orders/order_1",
            vec![],
            Vec::new(),
            401,
            None,
        ),
        case(
            "wrong keys",
            "GET",
            "/razorpay/v1/orders/order_1",
            vec![("Authorization", "Basic cnpwX3Rlc3Rfd3Jvbmc6eA==")],
            Vec::new(),
            401,
            None,
        ),
        case(
            "an unknown id",
            "GET",
            "/razorpay/v1/payments/pay_nope",
            vec![auth],
            Vec::new(),
            400,
            Some("id"),
        ),
        case(
            "a capture without its amount",
            "POST",
            "/razorpay/v1/payments/pay_1/capture",
            vec![auth, JSON],
            br#"{"currency":"INR"}"#.to_vec(),
            400,
            Some("amount"),
        ),
        case(
            "a refund key with a colon",
            "POST",
            "/razorpay/v1/payments/pay_1/refund",
            vec![auth, JSON, ("X-Refund-Idempotency", "refund:x:y:z")],
            b"{}".to_vec(),
            400,
            None,
        ),
        case(
            "a refund at a speed Razorpay lacks",
            "POST",
            "/razorpay/v1/payments/pay_1/refund",
            vec![auth, JSON],
            br#"{"speed":"instant"}"#.to_vec(),
            400,
            Some("speed"),
        ),
        case(
            "a test control's bad query",
            "POST",
            "/razorpay/_sandbox/orders/order_1/delivery?mode=sideways",
            vec![],
            Vec::new(),
            400,
            None,
        ),
    ];
    for Case {
        what,
        method,
        path,
        headers,
        body,
        status,
        field,
    } in cases
    {
        let answer = connection.send(method, path, &headers, &body).await;
        let error = razorpay_refusal(&answer, status, what);
        if let Some(field) = field {
            assert_eq!(error["field"], field, "{what}");
        }
        let next = connection
            .send("GET", "/razorpay/v1/orders/order_nope", &[auth], b"")
            .await;
        razorpay_refusal(&next, 400, &format!("after {what}"));
    }
}
