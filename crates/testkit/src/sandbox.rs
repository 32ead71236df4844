//! The provider sandbox (`crates/sandbox`) on a port of its own, the real
//! adapters pointed at it, and waiting for its webhooks to be accepted.

use std::net::TcpListener;
use std::time::Duration;

use holdfast::payments::{PageLine, PageRequest};
use uuid::Uuid;

use crate::client::{http_builder, http_client};

/// The provider sandbox on a random port: its Stripe, its Razorpay, its
/// mailbox, and the settings (keys, secrets) it was started with.
pub struct TestSandbox {
    pub base: String,
    pub stripe: holdfast_sandbox::StripeSandbox,
    pub razorpay: holdfast_sandbox::RazorpaySandbox,
    pub settings: holdfast_sandbox::SandboxSettings,
    /// The sandbox's mailbox; its SMTP server starts with [`TestSandbox::smtp`].
    pub mail: holdfast_sandbox::mail::MailSandbox,
}

impl TestSandbox {
    /// Start the sandbox's mail server on a free port: its `smtp://` URL.
    pub fn smtp(&self) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind port 0");
        let addr = self.mail.serve(listener).expect("the mail server");
        format!("smtp://{addr}")
    }

    /// Where the shop's Stripe adapter finds this sandbox, and its keys.
    pub fn stripe_settings(&self) -> holdfast::payments::stripe::StripeSettings {
        self.provider_settings()
            .stripe
            .expect("the sandbox plays Stripe")
    }

    /// Where the shop's Razorpay adapter finds this sandbox, and its keys.
    pub fn razorpay_settings(&self) -> holdfast::payments::razorpay::RazorpaySettings {
        self.provider_settings()
            .razorpay
            .expect("the sandbox plays Razorpay")
    }

    /// Every provider pointed at this sandbox, with its keys.
    pub fn provider_settings(&self) -> holdfast::payments::ProviderSettings {
        holdfast::payments::sandbox_settings(&self.settings, &self.base, vec!["card".into()])
    }

    /// The real Stripe adapter, pointed at this sandbox.
    pub fn stripe_provider(&self) -> holdfast::payments::stripe::StripeProvider {
        holdfast::payments::stripe::StripeProvider::new(&self.stripe_settings(), http_client())
            .expect("stripe adapter")
    }

    /// The real Razorpay adapter, pointed at this sandbox.
    pub fn razorpay_provider(&self) -> holdfast::payments::razorpay::RazorpayProvider {
        holdfast::payments::razorpay::RazorpayProvider::new(
            &self.razorpay_settings(),
            http_client(),
        )
        .expect("razorpay adapter")
    }

    /// Every adapter, Stripe first, as a shop with every provider's keys
    /// has them.
    pub fn providers(&self) -> holdfast::payments::Providers {
        holdfast::payments::Providers::build(&self.provider_settings()).expect("providers")
    }
}

/// The sandbox on port 0, in this process: webhooks retried after 50 ms,
/// refunds settled 50 ms after they are accepted.
pub fn spawn_sandbox() -> TestSandbox {
    use holdfast_sandbox::{Sandbox, SandboxSettings};
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind port 0");
    let base = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
    let mut settings = SandboxSettings::development();
    settings.retry_base = Duration::from_millis(50);
    settings.refunds_settle_after = Some(Duration::from_millis(50));
    let sandbox = Sandbox::build(listener, settings.clone(), base.clone()).expect("sandbox");
    let stripe = sandbox.stripe.clone();
    let razorpay = sandbox.razorpay.clone();
    let mail = sandbox.mail.clone();
    tokio::spawn(sandbox.run_until_stopped());
    TestSandbox {
        mail,
        base,
        stripe,
        razorpay,
        settings,
    }
}

/// Wait (five seconds at most) until `n` webhook deliveries in a sandbox
/// ledger were accepted by the shop.
pub async fn wait_for_accepted(ledger: impl Fn() -> holdfast_sandbox::Ledger, n: usize) {
    for _ in 0..100 {
        if ledger()
            .deliveries
            .iter()
            .filter(|d| d.status == Some(200))
            .count()
            >= n
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("webhooks were not accepted: {:?}", ledger().deliveries);
}

/// Wait (five seconds at most) until a webhook of `event_type` from a
/// sandbox was accepted by the shop.
pub async fn wait_for_event(ledger: impl Fn() -> holdfast_sandbox::Ledger, event_type: &str) {
    for _ in 0..100 {
        if ledger()
            .deliveries
            .iter()
            .any(|d| d.event_type == event_type && d.status == Some(200))
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no {event_type} was accepted: {:?}", ledger().deliveries);
}

/// A payment page's request as the shop makes it: two VIP tickets and a
/// jar of honey (194.00 EUR), for `order_id`, living `lifetime_minutes`.
pub fn page_request(order_id: Uuid, lifetime_minutes: u64) -> PageRequest {
    PageRequest {
        order_id,
        amount_minor: 2 * 9000 + 1400,
        currency: "eur".into(),
        lines: vec![
            PageLine {
                name: "Harbour Lights — VIP".into(),
                qty: 2,
                unit_amount_minor: 9000,
            },
            PageLine {
                name: "Wild honey".into(),
                qty: 1,
                unit_amount_minor: 1400,
            },
        ],
        customer_name: "Ada".into(),
        customer_email: "ada@example.com".into(),
        return_url: "http://shop.test/checkout/return/token".into(),
        cancel_url: "http://shop.test/basket".into(),
        pay_url: "http://shop.test/pay/token".into(),
        lifetime: Duration::from_secs(lifetime_minutes * 60),
        method: None,
    }
}

/// Press `action` on a Stripe page of the sandbox from a browser of its
/// own: the sandbox's answer (a redirect to the success URL when it took
/// the money).
pub async fn pay_on_page(url: &str, action: &str) -> reqwest::Response {
    http_builder()
        .build()
        .unwrap()
        .post(format!("{url}/{action}"))
        .send()
        .await
        .unwrap()
}
