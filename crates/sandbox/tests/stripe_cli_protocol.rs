//! The Stripe CLI's protocol as the sandbox speaks it, with this test in
//! the CLI's place (the real CLI is `tests/api/stripe_cli.rs`): a session
//! authenticated by the API key, the websocket with the CLI's subprotocol,
//! each event twice (the account's default version and the latest), signed
//! with the session's secret, the CLI's acknowledgements and replies kept,
//! pings answered, events waiting while the CLI reconnects, and `stripe
//! events resend`.

use std::net::TcpListener;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use hmac::{Hmac, Mac};
use holdfast_sandbox::{Carrier, Sandbox, SandboxSettings, StripeSandbox, stripe_cli};
use serde_json::{Value, json};
use sha2::Sha256;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

struct World {
    base: String,
    settings: SandboxSettings,
    stripe: StripeSandbox,
    http: reqwest::Client,
}

fn world() -> World {
    // reqwest is built without a default TLS provider here, as everywhere
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    // no webhook URL: the sandbox's own deliveries are off
    let settings = SandboxSettings::development();
    let sandbox = Sandbox::build(listener, settings.clone(), base.clone()).unwrap();
    let stripe = sandbox.stripe.clone();
    tokio::spawn(sandbox.run_until_stopped());
    World {
        base,
        settings,
        stripe,
        http: reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap(),
    }
}

impl World {
    fn key(&self) -> String {
        self.settings.stripe_secret_key.expose().to_owned()
    }

    async fn post(&self, path: &str, form: &str) -> reqwest::Response {
        self.http
            .post(format!("{}{path}", self.base))
            .bearer_auth(self.key())
            .header("Content-Type", "application/x-www-form-urlencoded")
            .body(form.to_owned())
            .send()
            .await
            .unwrap()
    }

    /// `POST /v1/stripecli/sessions` as `stripe listen` sends it.
    async fn cli_session(&self, device: &str) -> Value {
        let answer = self
            .post(
                "/v1/stripecli/sessions",
                &format!(
                    "device_name={device}&websocket_features%5B%5D=webhooks\
                     &forward_to_url=http%3A%2F%2Flocalhost%3A8080%2Fwebhooks%2Fstripe"
                ),
            )
            .await;
        assert_eq!(answer.status(), 200);
        answer.json().await.unwrap()
    }

    /// A Checkout Session, paid on the hosted page: its id.
    async fn paid_session(&self) -> String {
        let id = self.open_session().await;
        let paid = self
            .http
            .post(format!("{}/stripe/pay/{id}/pay", self.base))
            .send()
            .await
            .unwrap();
        assert_eq!(paid.status(), 303);
        id
    }

    async fn open_session(&self) -> String {
        let answer = self
            .post(
                "/stripe/v1/checkout/sessions",
                "mode=payment&success_url=https%3A%2F%2Fshop.test%2F\
                 &line_items[0][quantity]=1&line_items[0][price_data][currency]=eur\
                 &line_items[0][price_data][unit_amount]=1400\
                 &line_items[0][price_data][product_data][name]=Honey",
            )
            .await;
        assert_eq!(answer.status(), 200);
        answer.json::<Value>().await.unwrap()["id"]
            .as_str()
            .unwrap()
            .to_owned()
    }
}

/// Open the session's websocket as the CLI does (pkg/websocket/client.go).
async fn connect(session: &Value) -> Result<Socket, tokio_tungstenite::tungstenite::Error> {
    let url = format!(
        "{}?websocket_feature={}",
        session["websocket_url"].as_str().unwrap(),
        session["websocket_authorized_feature"].as_str().unwrap()
    );
    let mut request = url.into_client_request().unwrap();
    let headers = request.headers_mut();
    headers.insert(
        "Websocket-Id",
        session["websocket_id"].as_str().unwrap().parse().unwrap(),
    );
    headers.insert(
        "Sec-WebSocket-Protocol",
        stripe_cli::SUBPROTOCOL.parse().unwrap(),
    );
    let (socket, response) = tokio_tungstenite::connect_async(request).await?;
    assert_eq!(
        response.headers()["sec-websocket-protocol"],
        stripe_cli::SUBPROTOCOL
    );
    Ok(socket)
}

/// The next text message, as JSON (five seconds at most).
async fn next(socket: &mut Socket) -> Value {
    loop {
        let message = tokio::time::timeout(Duration::from_secs(5), socket.next())
            .await
            .expect("a message within five seconds")
            .expect("the socket is open")
            .expect("a readable message");
        if let Message::Text(text) = message {
            return serde_json::from_str(&text).expect("messages are JSON");
        }
    }
}

/// The two messages of one event: (at the default version, at the latest).
async fn event_messages(socket: &mut Socket) -> (Value, Value) {
    let (first, second) = (next(socket).await, next(socket).await);
    if first["endpoint"]["api_version"].is_null() {
        (first, second)
    } else {
        (second, first)
    }
}

/// The message is signed with `secret` over `"<t>.<payload>"`
/// (docs.stripe.com/webhooks/signature), and carries an event.
fn signed_event(message: &Value, secret: &str) -> Value {
    assert_eq!(message["type"], "webhook_event");
    let payload = message["event_payload"].as_str().unwrap();
    let header = message["http_headers"]["Stripe-Signature"]
        .as_str()
        .unwrap();
    let (t, v1) = header.split_once(',').unwrap();
    let t = t.strip_prefix("t=").unwrap();
    let v1 = v1.strip_prefix("v1=").unwrap();
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(format!("{t}.{payload}").as_bytes());
    assert_eq!(
        hex::encode(mac.finalize().into_bytes()),
        v1,
        "the signature is the session secret's"
    );
    serde_json::from_str(payload).unwrap()
}

async fn wait_for_reply(stripe: &StripeSandbox, event_id: &str, status: u16) {
    for _ in 0..100 {
        if stripe.ledger().deliveries.iter().any(|d| {
            d.event_id == event_id && d.status == Some(status) && d.via == Carrier::StripeCli
        }) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no reply for {event_id} was kept");
}

#[tokio::test]
async fn the_sandbox_speaks_the_stripe_clis_protocol() {
    let world = world();
    let secret = world.settings.stripe_webhook_secret.expose().to_owned();

    // the session: authenticated by the key, with what the CLI reads
    let refused = world
        .http
        .post(format!("{}/v1/stripecli/sessions", world.base))
        .bearer_auth("sk_test_wrong")
        .form(&[("device_name", "d"), ("websocket_features[]", "webhooks")])
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 401);
    let session = world.cli_session("test-device").await;
    assert_eq!(session["websocket_authorized_feature"], "webhooks");
    assert!(session["reconnect_delay"].as_u64().unwrap() > 0);
    assert!(
        session["websocket_url"]
            .as_str()
            .unwrap()
            .starts_with("ws://")
    );
    assert_eq!(
        session["secret"].as_str(),
        Some(secret.as_str()),
        "the account's secret"
    );
    assert_eq!(
        world.cli_session("test-device").await["secret"],
        session["secret"],
        "the same secret every time"
    );
    let default_version = session["default_version"].as_str().unwrap().to_owned();
    let latest_version = session["latest_version"].as_str().unwrap().to_owned();

    // an id the sandbox does not know is refused, as the CLI expects
    let mut unknown = session.clone();
    unknown["websocket_id"] = json!("wsid_nope");
    match connect(&unknown).await {
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
            assert_eq!(response.status(), 400);
            let body: Value = serde_json::from_slice(response.body().as_deref().unwrap()).unwrap();
            assert_eq!(body["error"]["message"], "Unknown WebSocket ID.");
        }
        other => panic!("an unknown id connected: {:?}", other.map(|_| ())),
    }

    let mut socket = connect(&session).await.unwrap();
    for _ in 0..50 {
        if world.stripe.cli_listeners() == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(world.stripe.cli_listeners(), 1);

    // a payment's event, at the default version and at the latest
    world.paid_session().await;
    let (default, latest) = event_messages(&mut socket).await;
    assert_eq!(latest["endpoint"]["api_version"], latest_version.as_str());
    let event = signed_event(&default, &secret);
    assert_eq!(event["type"], "checkout.session.completed");
    assert_eq!(event["api_version"], default_version.as_str());
    assert_eq!(signed_event(&latest, &secret)["id"], event["id"]);
    let event_id = event["id"].as_str().unwrap().to_owned();

    // the CLI's acknowledgement, and its reply with the shop's status
    for message in [&default, &latest] {
        socket
            .send(Message::text(
                json!({
                    "type": "event_ack", "event_id": event_id,
                    "webhook_id": message["webhook_id"],
                    "webhook_conversation_id": message["webhook_conversation_id"],
                })
                .to_string(),
            ))
            .await
            .unwrap();
    }
    socket
        .send(Message::text(
            json!({
                "type": "webhook_response", "forward_url": "http://localhost:8080/webhooks/stripe",
                "status": 200, "http_headers": {}, "body": "", "request_headers": {},
                "request_body": default["event_payload"], "notification_id": event_id,
                "webhook_id": default["webhook_id"],
                "webhook_conversation_id": default["webhook_conversation_id"],
            })
            .to_string(),
        ))
        .await
        .unwrap();
    wait_for_reply(&world.stripe, &event_id, 200).await;
    assert!(
        world
            .stripe
            .ledger()
            .deliveries
            .iter()
            .all(|d| d.via == Carrier::StripeCli),
        "the sandbox's own deliveries are off"
    );
    // nonsense from the CLI is ignored, and pings are answered
    socket.send(Message::text("not json")).await.unwrap();
    socket
        .send(Message::Ping(b"still there?".to_vec().into()))
        .await
        .unwrap();
    loop {
        match tokio::time::timeout(Duration::from_secs(5), socket.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap()
        {
            Message::Pong(bytes) => {
                assert_eq!(&bytes[..], b"still there?");
                break;
            }
            Message::Text(text) => panic!("unexpected {text}"),
            _ => {}
        }
    }

    // the CLI goes away: nothing reaches it, and what happens meanwhile
    // waits for its reconnect with the same id
    socket.close(None).await.unwrap();
    drop(socket);
    for _ in 0..50 {
        if world.stripe.cli_listeners() == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(world.stripe.cli_listeners(), 0);
    let other = world.open_session().await;
    let expired = world
        .post(&format!("/stripe/v1/checkout/sessions/{other}/expire"), "")
        .await;
    assert_eq!(expired.status(), 200);
    let mut socket = connect(&session).await.unwrap();
    let (default, _) = event_messages(&mut socket).await;
    let waited = signed_event(&default, &secret);
    assert_eq!(waited["type"], "checkout.session.expired");

    // stripe events resend: the event again, to every session
    let resend = world
        .post(
            &format!("/v1/events/{event_id}/retry"),
            "for_stripecli=true",
        )
        .await;
    assert_eq!(resend.status(), 200);
    assert_eq!(
        resend.json::<Value>().await.unwrap()["id"],
        event_id.as_str()
    );
    let (again, _) = event_messages(&mut socket).await;
    assert_eq!(signed_event(&again, &secret)["id"], event_id.as_str());
    // to a webhook endpoint the sandbox does not have: Stripe's 404
    let nowhere = world
        .post(
            &format!("/v1/events/{event_id}/retry"),
            "webhook_endpoint=we_nope",
        )
        .await;
    assert_eq!(nowhere.status(), 404);
}

#[tokio::test]
async fn the_command_line_to_run_names_the_sandbox_and_the_shop() {
    let world = world();
    let line = world.stripe.cli_listen_command("http://127.0.0.1:8080");
    assert!(
        line.starts_with("stripe listen --api-base http://127.0.0.1:"),
        "{line}"
    );
    assert!(
        line.ends_with("--forward-to http://127.0.0.1:8080/webhooks/stripe"),
        "{line}"
    );
}
