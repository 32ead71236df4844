//! The one way a test buys, as a shopper does: basket, checkout form, the
//! provider's page, and the way back to the shop (Stripe's return, or
//! Razorpay's callback), with the provider's webhooks as the sandbox sends
//! them. [`TestApp::buy`] reaches a paid order; [`TestApp::start`] stops
//! at the provider's page, and [`TestApp::pay`] goes on from there. A shop
//! run as a process of its own is bought from through a [`ShopFront`].
//!
//! ```no_run
//! # use holdfast::payments::ProviderKind;
//! # use holdfast_sandbox::DeliveryMode;
//! # use holdfast_testkit::*;
//! # async fn example(app: TestApp) {
//! let paid = app.buy(&browser(), &Purchase::of("wild-honey", 2)).await;
//! assert_eq!(app.order_state(&paid.started.token).await, "paid");
//!
//! // Razorpay; only the webhooks tell the shop (the shopper closes the tab)
//! let purchase = Purchase::of("harbour-lights-vip", 1)
//!     .with(ProviderKind::Razorpay)
//!     .paying(Payment::default().reported(Report::Webhook));
//! app.buy(&browser(), &purchase).await;
//!
//! // up to the provider's page, then paid with the webhooks late
//! let shopper = browser();
//! let started = app.start(&shopper, &Purchase::of("wild-honey", 1)).await;
//! let late = Payment::default().delivered(DeliveryMode::Late);
//! let paid = app.pay(&shopper, &started, &late).await;
//! assert_eq!(paid.order_url(), format!("/orders/{}", started.token));
//! # }
//! ```
//!
//! What the shop answers on the way is asserted where every test expects
//! the same (the basket takes the lines, the form leads to the provider,
//! the provider's page takes the money and points back at the shop), and
//! returned where tests differ: the shop's answer to the way back
//! ([`Paid::back`]), its refusals ([`TestApp::try_start`]).

use holdfast::payments::ProviderKind;
use holdfast_sandbox::DeliveryMode;
use reqwest::{Client, RequestBuilder, StatusCode};
use sqlx::PgPool;
use uuid::Uuid;

use crate::client::http_client;
use crate::database::TestDb;
use crate::sandbox::TestSandbox;
use crate::shop::TestApp;
use crate::shopper::{checkout_key, field, form_lines, location, read_page, text_of};

/// What a shopper buys, who they are, and how they pay.
#[derive(Debug, Clone)]
pub struct Purchase {
    lines: Vec<(String, i64)>,
    provider: Option<ProviderKind>,
    name: String,
    email: String,
    forwarded_for: Option<String>,
    payment: Payment,
    voucher: Option<String>,
}

impl Purchase {
    /// `qty` of `product`, by Ada Shopper (ada@example.com), with the
    /// provider the basket page offers first, paid as [`Payment::default`].
    pub fn of(product: &str, qty: i64) -> Self {
        Self::basket().and(product, qty)
    }

    /// The basket as it is: nothing more is added before checkout.
    pub fn basket() -> Self {
        Self {
            lines: Vec::new(),
            provider: None,
            name: "Ada Shopper".into(),
            email: "ada@example.com".into(),
            forwarded_for: None,
            payment: Payment::default(),
            voucher: None,
        }
    }

    /// And `qty` of `product` into the basket too.
    pub fn and(mut self, product: &str, qty: i64) -> Self {
        self.lines.push((product.to_owned(), qty));
        self
    }

    /// Paying with `provider` (the form's choice).
    pub fn with(mut self, provider: ProviderKind) -> Self {
        self.provider = Some(provider);
        self
    }

    /// Checking out under this name and e-mail.
    pub fn by(mut self, name: &str, email: &str) -> Self {
        self.name = name.to_owned();
        self.email = email.to_owned();
        self
    }

    /// The requests to the shop up to the provider's page (the basket, the
    /// form) carry `X-Forwarded-For: <client>` (what a proxy says the
    /// client is; the shop believes it only from a trusted proxy).
    pub fn forwarded_for(mut self, client: impl Into<String>) -> Self {
        self.forwarded_for = Some(client.into());
        self
    }

    /// With a voucher code: it goes with every line into the basket (the
    /// access code of a hidden product) and in the checkout form's
    /// `voucher` field.
    pub fn voucher(mut self, code: &str) -> Self {
        self.voucher = Some(code.to_owned());
        self
    }

    /// Paid this way (by [`TestApp::buy`]).
    pub fn paying(mut self, payment: Payment) -> Self {
        self.payment = payment;
        self
    }
}

/// How a started checkout is paid: what the shopper presses on the
/// provider's page, and who tells the shop.
#[derive(Debug, Clone)]
pub struct Payment {
    press: String,
    report: Report,
    delivery: DeliveryMode,
}

impl Default for Payment {
    /// "pay", reported by the webhooks and the shopper's return.
    fn default() -> Self {
        Self::press("pay")
    }
}

impl Payment {
    /// Press `action` on the provider's page: `pay`, `pay-twice` (two
    /// payments), `pay-late` (Stripe: on a closed page; Razorpay:
    /// authorised after the capture window), `pay-delayed` (Stripe: a bank
    /// debit that settles later).
    pub fn press(action: &str) -> Self {
        Self {
            press: action.to_owned(),
            report: Report::Both,
            delivery: DeliveryMode::Normal,
        }
    }

    /// Who tells the shop of the payment.
    pub fn reported(mut self, report: Report) -> Self {
        self.report = report;
        self
    }

    /// The webhooks arrive this way (late, twice, newest first) rather
    /// than once each: for [`Report::Both`] and [`Report::Webhook`] (the
    /// others lose them).
    pub fn delivered(mut self, mode: DeliveryMode) -> Self {
        self.delivery = mode;
        self
    }
}

/// Who tells the shop that the provider took the money.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Report {
    /// The provider's webhooks, and the shopper coming back (Stripe's
    /// return, Razorpay's callback): the way a payment usually arrives.
    Both,
    /// Only the shopper coming back: every webhook of the page is lost.
    Return,
    /// Only the webhooks: the shopper closes the tab after paying.
    Webhook,
    /// Nobody: the webhooks are lost and the shopper closes the tab; only
    /// reconciliation can find the money.
    Neither,
}

impl Report {
    fn webhooks_lost(self) -> bool {
        matches!(self, Report::Return | Report::Neither)
    }

    fn comes_back(self) -> bool {
        matches!(self, Report::Both | Report::Return)
    }
}

/// An answer, read whole.
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: StatusCode,
    /// Where it redirects, if it does.
    pub location: Option<String>,
    pub body: String,
}

impl Answer {
    async fn read(response: reqwest::Response) -> Self {
        Self {
            status: response.status(),
            location: response
                .headers()
                .get("location")
                .map(|value| value.to_str().unwrap().to_owned()),
            body: response.text().await.unwrap(),
        }
    }
}

/// How a checkout attempt ended.
#[derive(Debug)]
pub enum Attempt {
    /// The checkout reached the provider.
    Started(Started),
    /// The basket refused a line: the add's answer.
    NotAdded(Answer),
    /// The checkout form was refused: the shop's answer.
    Refused(Answer),
}

/// A checkout that reached the provider: the shopper is on its page.
#[derive(Debug, Clone)]
pub struct Started {
    pub provider: ProviderKind,
    pub token: String,
    pub order_id: Uuid,
    /// The provider's page: the Checkout Session's id, or the Razorpay
    /// order's.
    pub page_id: String,
    /// Where the shop sent the shopper: the session's hosted page
    /// (Stripe), the shop's own page that opens Razorpay Checkout.
    pub location: String,
    /// The page the shopper pays on: the session's hosted page, or the
    /// sandbox's Razorpay Checkout as checkout.js's `open()` reaches it.
    pub pay_url: String,
    /// The order's cancel URL (where the provider sends a shopper who
    /// leaves).
    pub cancel_url: String,
    /// The basket page the checkout form was read from.
    pub basket: String,
}

/// A started checkout the shopper paid for.
#[derive(Debug, Clone)]
pub struct Paid {
    pub started: Started,
    /// Where the provider sent the shopper back to: Stripe's success URL,
    /// Razorpay's callback URL.
    pub back_url: String,
    /// The shop's answer to the return or callback, when the shopper came
    /// back ([`Report::Both`], [`Report::Return`]).
    pub back: Option<Answer>,
    /// The payment the provider told the shopper's browser of (Razorpay's
    /// `razorpay_payment_id`); Stripe's return names only the session.
    pub payment_ref: Option<String>,
}

impl Paid {
    /// The shop's answer to the way back (the shopper must have come back).
    pub fn returned(&self) -> &Answer {
        self.back.as_ref().expect("the shopper did not come back")
    }

    /// Where the shop's answer to the way back sent the shopper: the
    /// order's page.
    pub fn order_url(&self) -> String {
        let back = self.returned();
        back.location
            .clone()
            .unwrap_or_else(|| panic!("the way back answered {back:?}"))
    }
}

/// A shop as its shoppers reach it, and as a test looks behind it: where
/// it answers, its database, the sandbox it pays with. [`TestApp::front`]
/// is the shop on port 0; [`ShopFront::new`] is any other (a `holdfast
/// serve` process).
#[derive(Debug, Clone)]
pub struct ShopFront {
    /// `http://127.0.0.1:<port>`
    pub address: String,
    pool: PgPool,
    sandbox: String,
}

impl ShopFront {
    /// The shop at `address`, against `db`, paying through `sandbox`.
    pub fn new(address: &str, db: &TestDb, sandbox: &TestSandbox) -> Self {
        Self {
            address: address.to_owned(),
            pool: db.pool.clone(),
            sandbox: sandbox.base.clone(),
        }
    }

    /// The purchase up to the provider's page: each line into the basket
    /// (each must be taken), the basket page, the checkout form as it was
    /// rendered; the shop must send the shopper to the provider.
    pub async fn start(&self, shopper: &Client, purchase: &Purchase) -> Started {
        match self.try_start(shopper, purchase).await {
            Attempt::Started(started) => started,
            other => panic!("the checkout did not reach the provider: {other:?}"),
        }
    }

    /// [`ShopFront::start`], where the shop may say no.
    pub async fn try_start(&self, shopper: &Client, purchase: &Purchase) -> Attempt {
        let to_shop = |request: RequestBuilder| match &purchase.forwarded_for {
            Some(client) => request.header("X-Forwarded-For", client),
            None => request,
        };
        for (product, qty) in &purchase.lines {
            let qty = qty.to_string();
            let mut add = vec![("product_id", product.as_str()), ("qty", qty.as_str())];
            if let Some(code) = &purchase.voucher {
                add.push(("code", code.as_str()));
            }
            let added = to_shop(shopper.post(format!("{}/basket/add", self.address)))
                .form(&add)
                .send()
                .await
                .unwrap();
            if added.status() != StatusCode::SEE_OTHER {
                return Attempt::NotAdded(Answer::read(added).await);
            }
        }
        let basket = text_of(to_shop(shopper.get(format!("{}/basket", self.address)))).await;
        let (key, lines) = (checkout_key(&basket), form_lines(&basket));
        let mut form = vec![
            ("checkout_key", key.as_str()),
            ("lines", lines.as_str()),
            ("name", purchase.name.as_str()),
            ("email", purchase.email.as_str()),
            // kept only when the basket holds a booking
            ("phone", "+44 20 7946 0000"),
        ];
        if let Some(provider) = purchase.provider {
            form.push(("provider", provider.as_str()));
        }
        if let Some(code) = &purchase.voucher {
            form.push(("voucher", code.as_str()));
        }
        let checkout = to_shop(shopper.post(format!("{}/checkout", self.address)))
            .form(&form)
            .send()
            .await
            .unwrap();
        if checkout.status() != StatusCode::SEE_OTHER {
            return Attempt::Refused(Answer::read(checkout).await);
        }
        let target = location(&checkout);
        Attempt::Started(self.started(target, basket).await)
    }

    /// The order a checkout's redirect leads to: a Stripe session's hosted
    /// page names the session, the shop's Razorpay page names the order.
    async fn started(&self, target: String, basket: String) -> Started {
        let named = target.rsplit('/').next().unwrap();
        let (order_id, token, provider, page_id): (Uuid, String, String, String) = sqlx::query_as(
            "select id, token, provider, provider_session_id from orders \
              where provider_session_id = $1 or token = $1",
        )
        .bind(named)
        .fetch_one(&self.pool)
        .await
        .unwrap_or_else(|e| panic!("no order for {target}: {e}"));
        let provider = ProviderKind::parse(&provider).expect("a provider we know");
        let pay_url = match provider {
            ProviderKind::Stripe => target.clone(),
            // what checkout.js's open() does in redirect mode
            ProviderKind::Razorpay => format!(
                "{}/razorpay/pay/{page_id}?callback_url={}&cancel_url={}",
                self.sandbox,
                encode(&format!("{}/checkout/return/{token}", self.address)),
                encode(&format!("{}/checkout/cancel/{token}", self.address)),
            ),
        };
        Started {
            provider,
            cancel_url: format!("{}/checkout/cancel/{token}", self.address),
            token,
            order_id,
            page_id,
            location: target,
            pay_url,
            basket,
        }
    }

    /// Pay on the provider's page as `payment` says, and come back to the
    /// shop if the shopper does. The provider must take the money and
    /// point the shopper back at the shop; what the shop then answers is
    /// the test's to judge ([`Paid::back`]).
    pub async fn pay(&self, shopper: &Client, started: &Started, payment: &Payment) -> Paid {
        if payment.report.webhooks_lost() {
            assert_eq!(
                payment.delivery,
                DeliveryMode::Normal,
                "{:?} loses every webhook",
                payment.report
            );
            self.set_delivery(started, DeliveryMode::Never).await;
        } else if payment.delivery != DeliveryMode::Normal {
            self.set_delivery(started, payment.delivery).await;
        }
        let action = payment.press.as_str();
        // what the provider's page answers, and the way back it offers
        let (back_url, way_back, payment_ref) = match started.provider {
            ProviderKind::Stripe => {
                let paid = shopper
                    .post(format!("{}/{action}", started.pay_url))
                    .send()
                    .await
                    .unwrap();
                assert_eq!(paid.status(), StatusCode::SEE_OTHER, "{action}");
                let back_url = location(&paid);
                assert!(
                    back_url.starts_with(&format!("{}/checkout/return/", self.address)),
                    "{back_url}"
                );
                let way_back = shopper.get(&back_url);
                (back_url, way_back, None)
            }
            ProviderKind::Razorpay => {
                let page = read_page(shopper, &started.pay_url).await;
                let back_url = field(&page, "callback_url");
                let (base, _) = started.pay_url.split_once('?').unwrap();
                let answer = shopper
                    .post(format!("{base}/{action}"))
                    .form(&[
                        ("callback_url", back_url.as_str()),
                        ("cancel_url", &field(&page, "cancel_url")),
                    ])
                    .send()
                    .await
                    .unwrap();
                assert_eq!(answer.status(), StatusCode::OK, "{action}");
                // the callback form Checkout posts in redirect mode
                let callback = answer.text().await.unwrap();
                let fields: Vec<(&str, String)> = [
                    "razorpay_payment_id",
                    "razorpay_order_id",
                    "razorpay_signature",
                ]
                .into_iter()
                .map(|name| (name, field(&callback, name)))
                .collect();
                assert_eq!(fields[1].1, started.page_id, "the callback names the order");
                let way_back = shopper.post(&back_url).form(&fields);
                (back_url, way_back, Some(fields[0].1.clone()))
            }
        };
        let back = if payment.report.comes_back() {
            Some(Answer::read(way_back.send().await.unwrap()).await)
        } else {
            None
        };
        Paid {
            started: started.clone(),
            back_url,
            back,
            payment_ref,
        }
    }

    /// [`ShopFront::start`], then [`ShopFront::pay`] as the purchase says.
    pub async fn buy(&self, shopper: &Client, purchase: &Purchase) -> Paid {
        let started = self.start(shopper, purchase).await;
        self.pay(shopper, &started, &purchase.payment).await
    }

    /// How the sandbox delivers the webhooks of this checkout's page from
    /// now on (its test control, which must know the page).
    pub async fn set_delivery(&self, started: &Started, mode: DeliveryMode) {
        let control = match started.provider {
            ProviderKind::Stripe => format!("{}/stripe/_sandbox/sessions", self.sandbox),
            ProviderKind::Razorpay => format!("{}/razorpay/_sandbox/orders", self.sandbox),
        };
        let mode = match mode {
            DeliveryMode::Normal => "normal",
            DeliveryMode::Twice => "twice",
            DeliveryMode::Never => "never",
            DeliveryMode::Late => "late",
            DeliveryMode::Reorder => "reorder",
        };
        let set = http_client()
            .post(format!(
                "{control}/{}/delivery?mode={mode}",
                started.page_id
            ))
            .send()
            .await
            .unwrap();
        assert_eq!(set.status(), StatusCode::NO_CONTENT, "delivery {mode}");
    }
}

/// Percent-encoding for a query value (unreserved characters kept).
fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The purchase helpers on the shop on port 0 ([`TestApp::front`]).
impl TestApp {
    /// This shop, as [`ShopFront`]'s helpers reach it.
    pub fn front(&self) -> ShopFront {
        ShopFront::new(&self.address, &self.db, &self.sandbox)
    }

    /// [`ShopFront::start`]: the purchase up to the provider's page.
    pub async fn start(&self, shopper: &Client, purchase: &Purchase) -> Started {
        self.front().start(shopper, purchase).await
    }

    /// [`ShopFront::try_start`]: the purchase up to the provider's page,
    /// where the shop may say no.
    pub async fn try_start(&self, shopper: &Client, purchase: &Purchase) -> Attempt {
        self.front().try_start(shopper, purchase).await
    }

    /// [`ShopFront::pay`]: pay on the provider's page, come back or not.
    pub async fn pay(&self, shopper: &Client, started: &Started, payment: &Payment) -> Paid {
        self.front().pay(shopper, started, payment).await
    }

    /// [`ShopFront::buy`]: start, then pay as the purchase says.
    pub async fn buy(&self, shopper: &Client, purchase: &Purchase) -> Paid {
        self.front().buy(shopper, purchase).await
    }

    /// [`ShopFront::set_delivery`]: how this checkout's webhooks arrive.
    pub async fn set_delivery(&self, started: &Started, mode: DeliveryMode) {
        self.front().set_delivery(started, mode).await
    }
}
