//! `holdfast simulate`: many shoppers with a seeded mix of behaviours, over
//! HTTP, through the sandbox, against a few units so that most of them
//! collide; then the worker's passes, and a ledger that checks the promise
//! to every shopper: each charge ends in a fulfilment or a refund, never
//! both and never neither; no unit is sold twice; no hold outlives its
//! deadline and a sweep.
//!
//! The simulation owns everything it runs: a fresh database, the shop and
//! the sandbox in this process on ports the system picks. With one lane
//! (the default) the shoppers take turns in an order the seed decides, so
//! the same seed gives the same ledger. With more lanes they also race.

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use sqlx::PgPool;

use holdfast::catalogue::{CatalogueFile, ProductKind, ProductSpec};
use holdfast::configuration::ReconcileTimes;
use holdfast::inventory::Inventory;
use holdfast::payments::{ProviderKind as Provider, ProviderSettings, Providers};
use holdfast::startup::Application;
use holdfast::state::Shop;
use holdfast::worker::Sweeper;
use holdfast::worker::outbox::Outbox;
use holdfast::worker::reconcile::{ReconcileReport, Reconciler};
use holdfast_sandbox::{DeliveryMode, Ledger, Sandbox, SandboxSettings};

/// What to simulate.
#[derive(Debug, Clone)]
pub struct SimulateOptions {
    pub shoppers: usize,
    pub seed: u64,
    pub providers: Vec<Provider>,
    /// Units across all products (default: a fifth of the shoppers, at
    /// least 8).
    pub units: Option<i64>,
    /// Shoppers acting at once; 1 keeps the run reproducible.
    pub lanes: usize,
    /// Run reconciliation (leave it out to see what it saves).
    pub reconcile: bool,
}

/// What a shopper does, drawn from the seed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Behaviour {
    Pay,
    DeclineThenLeave,
    DeclineThenPay,
    Abandon,
    WalkAway,
    PayTwice,
    PayAfterExpiry,
    WebhookLost,
    ReturnLost,
    BothLost,
    WebhookDuplicated,
    WebhookReordered,
    WebhookLate,
    /// The bank authorises the payment after the provider's capture
    /// window (Razorpay): it stays authorised until the shop captures it.
    /// (Stripe's Checkout captures at once: a plain payment there.)
    AuthorizeOnly,
    /// Pays twice; the refund of the second payment stays pending at the
    /// provider until closing time.
    PendingRefund,
    /// Someone pays 1.00 on another payment page that names this order
    /// (a payment link opened with its id); then the shopper pays.
    AnotherPage,
    /// A payment of 1.00 lands on the order's own Razorpay order (on
    /// Stripe, on another page); then the shopper pays in full.
    UnderPayment,
    /// Pays (its webhook late); then staff refund one unit, then the rest,
    /// while the webhook may still be on its way.
    StaffRefund,
    /// Money that takes days, and comes in time: Stripe, a SEPA Direct
    /// Debit that settles while its units are held; Razorpay, a bank that
    /// did not answer and authorises later.
    DebitSettles,
    /// The bank says no (Stripe: the debit fails; Razorpay: the bank never
    /// answers).
    DebitFails,
    /// The money comes after the order's settling deadline and grace:
    /// claimed again if its units are free, else refunded (or, an
    /// authorisation nobody captures, returned by Razorpay).
    DebitLate,
}

/// Out of 100.
const MIX: [(Behaviour, u32); 21] = [
    (Behaviour::Pay, 9),
    (Behaviour::DeclineThenLeave, 5),
    (Behaviour::DeclineThenPay, 5),
    (Behaviour::Abandon, 5),
    (Behaviour::WalkAway, 6),
    (Behaviour::PayTwice, 5),
    (Behaviour::PayAfterExpiry, 5),
    (Behaviour::WebhookLost, 5),
    (Behaviour::ReturnLost, 5),
    (Behaviour::BothLost, 7),
    (Behaviour::WebhookDuplicated, 5),
    (Behaviour::WebhookReordered, 5),
    (Behaviour::WebhookLate, 3),
    (Behaviour::AuthorizeOnly, 5),
    (Behaviour::PendingRefund, 3),
    (Behaviour::AnotherPage, 4),
    (Behaviour::UnderPayment, 4),
    (Behaviour::StaffRefund, 4),
    (Behaviour::DebitSettles, 4),
    (Behaviour::DebitFails, 3),
    (Behaviour::DebitLate, 3),
];

impl Behaviour {
    fn draw(rng: &mut StdRng) -> Self {
        let mut n = rng.gen_range(0..100);
        for (behaviour, weight) in MIX {
            if n < weight {
                return behaviour;
            }
            n -= weight;
        }
        Behaviour::Pay
    }

    fn delivery(self) -> DeliveryMode {
        match self {
            // a late debit's shop hears of it only from reconciliation
            Behaviour::WebhookLost | Behaviour::BothLost | Behaviour::DebitLate => {
                DeliveryMode::Never
            }
            Behaviour::WebhookDuplicated => DeliveryMode::Twice,
            Behaviour::WebhookReordered => DeliveryMode::Reorder,
            Behaviour::WebhookLate | Behaviour::StaffRefund => DeliveryMode::Late,
            _ => DeliveryMode::Normal,
        }
    }

    fn follows_return(self) -> bool {
        !matches!(
            self,
            Behaviour::ReturnLost | Behaviour::BothLost | Behaviour::DebitLate
        )
    }
}

/// The ledger: what the providers hold against what the shop did.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SimLedger {
    pub seed: u64,
    pub shoppers: usize,
    pub providers: Vec<String>,
    pub behaviours: BTreeMap<String, u64>,
    /// Checkouts that got a payment page, and ones refused (sold out).
    pub checkouts_started: u64,
    pub checkouts_refused: u64,
    /// Money taken at the providers.
    pub charges: u64,
    pub charged_minor: i64,
    /// Orders paid and fulfilled (codes issued).
    pub fulfilled_orders: u64,
    pub fulfilled_minor: i64,
    pub refunds: u64,
    pub refunded_minor: i64,
    /// Fulfilled orders staff then refunded (some units or all), and the
    /// provider refunds that gave that money back (not in `refunds`).
    pub staff_refunded_orders: u64,
    pub staff_refunds: u64,
    pub staff_refunded_minor: i64,
    pub orders_by_state: BTreeMap<String, u64>,
    pub resources: Vec<ResourceLine>,
    /// Holds still active after closing time and a sweep (must be none).
    pub leaked_holds: u64,
    pub drifted_resources: u64,
    /// Refund jobs the outbox has not finished.
    pub pending_refund_jobs: u64,
    /// What reconciliation found that no webhook or return had brought.
    pub reconciliation: ReconcileReport,
    /// Orders whose payment settled over days (held in the settling phase).
    pub settled_orders: u64,
    /// Money after the holds ended, by what the one rule decided.
    pub late_money: BTreeMap<String, u64>,
    pub violations: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ResourceLine {
    pub resource: String,
    pub total: i32,
    pub sold: i32,
    /// Units on fulfilled orders' lines.
    pub sold_on_orders: i64,
    pub held: i32,
}

/// The running pieces a shopper talks to.
struct World {
    shop: String,
    sandbox: String,
    pool: PgPool,
    stripe_sandbox: holdfast_sandbox::StripeSandbox,
    razorpay_sandbox: holdfast_sandbox::RazorpaySandbox,
    /// Every provider, whichever the shop offers: the worker settles both.
    payments: Providers,
    /// Pages whose refunds the banks finish only at closing time.
    slow_refunds: std::sync::Mutex<std::collections::HashSet<String>>,
    /// Debits whose banks answer only after the settling deadline and
    /// grace have passed (closing time): provider and page.
    late_debits: std::sync::Mutex<Vec<(Provider, String)>>,
}

/// Run a whole simulation on `pool`, which must be an empty, migrated
/// database of its own.
pub async fn run(pool: PgPool, options: &SimulateOptions) -> anyhow::Result<SimLedger> {
    anyhow::ensure!(options.shoppers > 0, "--shoppers must be at least 1");
    anyhow::ensure!(
        !options.providers.is_empty(),
        "choose at least one provider"
    );
    let units = options
        .units
        .unwrap_or_else(|| (options.shoppers as i64 / 5).max(8));
    anyhow::ensure!(
        (4..=1_000_000).contains(&units),
        "--units must be between 4 and 1000000"
    );
    let products = catalogue(&pool, units).await?;
    let world = Arc::new(start_world(pool.clone(), &options.providers)?);

    // the shoppers
    let lanes = options.lanes.clamp(1, 64);
    let mut tasks = Vec::new();
    for lane in 0..lanes {
        let world = world.clone();
        let products = products.clone();
        let options = options.clone();
        let count = options.shoppers / lanes + usize::from(lane < options.shoppers % lanes);
        tasks.push(tokio::spawn(async move {
            run_lane(&world, &products, &options, lane as u64, count).await
        }));
    }
    let mut ledger = SimLedger {
        seed: options.seed,
        shoppers: options.shoppers,
        providers: options
            .providers
            .iter()
            .map(|p| p.as_str().to_owned())
            .collect(),
        ..SimLedger::default()
    };
    for task in tasks {
        let lane = task.await.context("a shopper lane panicked")??;
        for (behaviour, n) in lane.behaviours {
            *ledger.behaviours.entry(behaviour).or_insert(0) += n;
        }
        ledger.checkouts_started += lane.started;
        ledger.checkouts_refused += lane.refused;
    }

    closing_time(&world, &mut ledger, options.reconcile).await?;
    account(&world, &mut ledger).await?;
    Ok(ledger)
}

fn start_world(pool: PgPool, providers: &[Provider]) -> anyhow::Result<World> {
    let mut settings = SandboxSettings::development();
    settings.retry_base = Duration::from_millis(50);
    settings.max_attempts = 6;
    // refunds stay pending until the simulation's banks finish them
    settings.refunds_settle_after = None;
    let sandbox_listener = TcpListener::bind("127.0.0.1:0")?;
    let sandbox_base = format!("http://{}", sandbox_listener.local_addr()?);
    let shop_listener = TcpListener::bind("127.0.0.1:0")?;
    let shop_base = format!("http://{}", shop_listener.local_addr()?);
    settings.stripe_webhook_url = Some(format!("{shop_base}/webhooks/stripe"));
    settings.razorpay_webhook_url = Some(format!("{shop_base}/webhooks/razorpay"));
    let sandbox = Sandbox::build(sandbox_listener, settings.clone(), sandbox_base.clone())?;
    // the dashboard's methods, as Stripe's default: SEPA for EUR
    let every = holdfast::payments::sandbox_settings(
        &settings,
        &sandbox_base,
        holdfast::payments::stripe::StripeSettings::DYNAMIC,
    );
    let payments = Providers::build(&every)?;
    let offered = Providers::build(&ProviderSettings {
        stripe: every
            .stripe
            .clone()
            .filter(|_| providers.contains(&Provider::Stripe)),
        razorpay: every
            .razorpay
            .clone()
            .filter(|_| providers.contains(&Provider::Razorpay)),
        roots: every.roots.clone(),
    })?;
    let shop = Shop::local(pool.clone(), offered, shop_base.clone());
    let world = World {
        shop: shop_base,
        sandbox: sandbox_base,
        pool,
        stripe_sandbox: sandbox.stripe.clone(),
        razorpay_sandbox: sandbox.razorpay.clone(),
        payments,
        slow_refunds: Default::default(),
        late_debits: Default::default(),
    };
    let app = Application::build(shop_listener, shop)?;
    tokio::spawn(sandbox.run_until_stopped());
    tokio::spawn(app.run_until_stopped());
    Ok(world)
}

/// Four products on four resources sharing `units`: two pickup slots, a
/// ticket tier and a jar of honey.
async fn catalogue(pool: &PgPool, units: i64) -> anyhow::Result<Vec<String>> {
    let specs = [
        (
            "sim-slot-morning",
            ProductKind::PickupSlot,
            "Morning pickup",
            1200,
        ),
        (
            "sim-slot-evening",
            ProductKind::PickupSlot,
            "Evening pickup",
            1200,
        ),
        ("sim-ticket", ProductKind::Ticket, "Concert ticket", 3500),
        ("sim-honey", ProductKind::Stock, "Wild honey", 900),
    ];
    let per = units / specs.len() as i64;
    let extra = units % specs.len() as i64;
    let products: Vec<ProductSpec> = specs
        .iter()
        .enumerate()
        .map(|(i, (id, kind, name, price))| ProductSpec {
            id: (*id).into(),
            collection: "simulation".into(),
            kind: *kind,
            name: (*name).into(),
            description: String::new(),
            price_minor: *price,
            capacity: per + i64::from((i as i64) < extra),
            when: holdfast::catalogue::When {
                days_ahead: Some(1),
                time_utc: Some("12:00".into()),
                ..Default::default()
            },
            ends_at: None,
            max_per_order: holdfast::catalogue::DEFAULT_MAX_PER_ORDER,
            sale: Default::default(),
        })
        .collect();
    let ids = products.iter().map(|p| p.id.clone()).collect();
    CatalogueFile {
        currency: "eur".into(),
        products,
        ..CatalogueFile::default()
    }
    .load(pool)
    .await?;
    Ok(ids)
}

#[derive(Debug, Default)]
struct LaneReport {
    behaviours: BTreeMap<String, u64>,
    started: u64,
    refused: u64,
}

/// Where one shopper is.
struct Shopper {
    behaviour: Behaviour,
    provider: Provider,
    product: String,
    qty: u32,
    client: reqwest::Client,
    step: u32,
    started: Option<Started>,
}

struct Started {
    /// The Stripe session or the Razorpay order.
    reference: String,
    /// Stripe: the hosted page. Razorpay: the sandbox checkout's page.
    pay_url: String,
    callback_url: String,
    cancel_url: String,
}

/// Shoppers of one lane, a few at a time, each step chosen by the seed.
async fn run_lane(
    world: &World,
    products: &[String],
    options: &SimulateOptions,
    lane: u64,
    count: usize,
) -> anyhow::Result<LaneReport> {
    const LIVE: usize = 6;
    let mut rng = StdRng::seed_from_u64(options.seed.wrapping_mul(1_000_003).wrapping_add(lane));
    let mut report = LaneReport::default();
    let mut live: Vec<Shopper> = Vec::new();
    let mut arrived = 0;
    let outbox = Outbox::new(world.pool.clone(), world.payments.clone());
    let mut steps = 0u64;
    while arrived < count || !live.is_empty() {
        while live.len() < LIVE && arrived < count {
            arrived += 1;
            let behaviour = Behaviour::draw(&mut rng);
            *report
                .behaviours
                .entry(
                    serde_json::to_value(behaviour)?
                        .as_str()
                        .unwrap_or("?")
                        .to_owned(),
                )
                .or_insert(0) += 1;
            live.push(Shopper {
                behaviour,
                provider: options.providers[rng.gen_range(0..options.providers.len())],
                product: products[rng.gen_range(0..products.len())].clone(),
                qty: if rng.gen_range(0..4) == 0 { 2 } else { 1 },
                client: holdfast::payments::http::client_builder(
                    &holdfast::payments::http::TrustedRoots::mozilla(),
                )
                .cookie_store(true)
                .timeout(Duration::from_secs(30))
                .build()?,
                step: 0,
                started: None,
            });
        }
        let i = rng.gen_range(0..live.len());
        let done = step(world, &mut live[i], &mut report)
            .await
            .with_context(|| {
                format!(
                    "shopper ({:?}, {:?}) at step {}",
                    live[i].behaviour, live[i].provider, live[i].step
                )
            })?;
        if done {
            live.swap_remove(i);
        }
        // the worker's outbox, as a running worker would get to it, and
        // the banks finishing the refunds it asked for
        steps += 1;
        if steps.is_multiple_of(25) {
            outbox.drain().await?;
            finish_refunds(world, false);
        }
    }
    Ok(report)
}

/// One step of one shopper. Returns whether they are done.
async fn step(
    world: &World,
    shopper: &mut Shopper,
    report: &mut LaneReport,
) -> anyhow::Result<bool> {
    shopper.step += 1;
    let Some(started) = &shopper.started else {
        return match shopper.step {
            1 => {
                let added = shopper
                    .client
                    .post(format!("{}/basket/add", world.shop))
                    .form(&[
                        ("product_id", shopper.product.as_str()),
                        ("qty", &shopper.qty.to_string()),
                    ])
                    .shop_send()
                    .await?;
                anyhow::ensure!(added.status() == 303, "add to basket: {}", added.status());
                Ok(false)
            }
            _ => {
                let started = start_checkout(world, shopper).await?;
                match started {
                    Some(started) => {
                        report.started += 1;
                        let mode = shopper.behaviour.delivery();
                        let found = match shopper.provider {
                            Provider::Stripe => {
                                world.stripe_sandbox.set_delivery(&started.reference, mode)
                            }
                            Provider::Razorpay => world
                                .razorpay_sandbox
                                .set_delivery(&started.reference, mode),
                        };
                        anyhow::ensure!(found, "the sandbox does not know {}", started.reference);
                        shopper.started = Some(started);
                        Ok(false)
                    }
                    None => {
                        report.refused += 1;
                        Ok(true)
                    }
                }
            }
        };
    };
    // steps on the provider's page, from step 3
    let page_step = shopper.step - 2;
    use Behaviour::*;
    let action = match (shopper.behaviour, page_step) {
        (AnotherPage, 1) => {
            pay_elsewhere(world, shopper.provider, started).await?;
            return Ok(false);
        }
        (UnderPayment, 1) => {
            underpay(world, shopper.provider, started).await?;
            return Ok(false);
        }
        (AnotherPage | UnderPayment, 2) => "pay",
        // a late authorisation; Stripe's Checkout has none
        (AuthorizeOnly, 1) => match shopper.provider {
            Provider::Razorpay => "pay-late",
            Provider::Stripe => "pay",
        },
        (PendingRefund, 1) => {
            world
                .slow_refunds
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .insert(started.reference.clone());
            "pay-twice"
        }
        (WalkAway, _) => return Ok(true),
        (Abandon, 1) | (DeclineThenLeave, 2) | (PayAfterExpiry, 1) => "abandon",
        (DeclineThenLeave, 1) | (DeclineThenPay, 1) => "decline",
        (PayAfterExpiry, 2) => {
            // the provider's clock: the page we closed is closed there too
            if let Some(provider) = world.payments.get(shopper.provider) {
                provider.close_page(&started.reference).await?;
            }
            return Ok(false);
        }
        (PayAfterExpiry, 3) => "pay-late",
        (PayTwice, 1) => "pay-twice",
        (StaffRefund, 1) => "pay",
        (StaffRefund, 2 | 3) => {
            staff_refund(world, started, page_step == 3).await?;
            return Ok(page_step == 3);
        }
        // money that takes days: a SEPA debit on Stripe's page, a bank
        // that does not answer on Razorpay's
        (DebitSettles | DebitFails | DebitLate, 1) => match shopper.provider {
            Provider::Stripe => "pay-delayed",
            Provider::Razorpay => "bank-silent",
        },
        (DebitSettles | DebitFails, 2) => {
            bank_answers(
                world,
                shopper.provider,
                started,
                shopper.behaviour == DebitSettles,
            )?;
            return Ok(true);
        }
        (DebitLate, 2) => {
            // its deadline and grace pass while the sale goes on: its units
            // go back on sale, and its bank pays at closing time
            run_out(world, &started.reference).await?;
            world
                .late_debits
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .push((shopper.provider, started.reference.clone()));
            return Ok(true);
        }
        (DeclineThenPay, 2) => "pay",
        (
            Pay | WebhookLost | ReturnLost | BothLost | WebhookDuplicated | WebhookReordered
            | WebhookLate,
            1,
        ) => "pay",
        _ => return Ok(true),
    };
    press(
        shopper.provider,
        started,
        &shopper.client,
        action,
        shopper.behaviour.follows_return(),
    )
    .await?;
    // a shopper whose order staff will refund is not done after paying
    Ok(matches!(action, "abandon")
        || (matches!(action, "pay" | "pay-twice" | "pay-late") && shopper.behaviour != StaffRefund))
}

/// One order's time runs out as if days had passed for it alone (its
/// payment deadline, and a settling phase's deadline and grace), and the
/// sweeper gives its units back to the sale. One transaction, the hints
/// with the rows.
async fn run_out(world: &World, page: &str) -> anyhow::Result<()> {
    let mut tx = world.pool.begin().await?;
    let resources: Vec<String> = sqlx::query_scalar(
        "update holds h set expires_at = least(h.expires_at, now()), \
                payment_deadline = case when h.payment_deadline is not null \
                                        then least(h.payment_deadline, now()) end, \
                settle_deadline = case when h.settle_deadline is not null \
                                       then least(h.settle_deadline, now() - h.settle_grace) end, \
                settling_at = case when h.settling_at is not null \
                                   then least(h.settling_at, now() - h.settle_grace - interval '1 second') end \
          where h.purchase_id = (select hold_id from orders where provider_session_id = $1) \
            and h.state in ('held', 'awaiting_payment') \
         returning h.resource_id",
    )
    .bind(page)
    .fetch_all(&mut *tx)
    .await?;
    sqlx::query(
        "update resources set next_expiry = least(next_expiry, now()), \
                next_deadline = least(next_deadline, now()) \
          where id = any($1)",
    )
    .bind(&resources)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Sweeper::new(Inventory::new(world.pool.clone()), "simulate")
        .run_once()
        .await?;
    holdfast::checkout::expire_abandoned_orders(&world.pool).await?;
    Ok(())
}

/// A debit's bank answers: Stripe's debit settles (or fails); Razorpay's
/// bank authorises the payment late (or never answers: nothing happens, and
/// nothing was taken).
fn bank_answers(
    world: &World,
    provider: Provider,
    started: &Started,
    pays: bool,
) -> anyhow::Result<()> {
    match provider {
        Provider::Stripe => world
            .stripe_sandbox
            .settle_delayed(&started.reference, pays)
            .map_err(|e| anyhow::anyhow!("settle {}: {e}", started.reference)),
        Provider::Razorpay if pays => {
            for payment in world.razorpay_sandbox.order_payments(&started.reference) {
                // the one its bank did not answer for
                let _ = world.razorpay_sandbox.authorize_late(&payment);
            }
            Ok(())
        }
        Provider::Razorpay => Ok(()),
    }
}

/// Staff refund one unit of the shopper's order (or, with `rest`, all that
/// is left), through the same routine as the admin. An order not paid yet
/// (its money still on the way) is refused and left as it is.
async fn staff_refund(world: &World, started: &Started, rest: bool) -> anyhow::Result<()> {
    use holdfast::staff::refunds::{RefundRequest, refund_order};
    let order: Option<(uuid::Uuid, String, i32)> = sqlx::query_as(
        "select o.id, l.product_id, l.qty - l.refunded_qty from orders o \
           join order_lines l on l.order_id = o.id \
          where o.provider_session_id = $1 order by l.product_id limit 1",
    )
    .bind(&started.reference)
    .fetch_optional(&world.pool)
    .await?;
    let Some((order_id, product, left)) = order else {
        return Ok(());
    };
    let units = if rest || left < 2 {
        Vec::new()
    } else {
        vec![(product, 1)]
    };
    let request = RefundRequest {
        order_id,
        units,
        reason: "simulated: the shopper cannot come".into(),
        restock: true,
        override_redeemed: false,
        by: "simulate".into(),
        staff: None,
        key: Some(format!(
            "sim-{order_id}-{}",
            if rest { "rest" } else { "one" }
        )),
    };
    refund_order(&world.pool, &request)
        .await
        .map_err(|error| anyhow::anyhow!("staff refund: {error}"))?;
    Ok(())
}

/// Basket, checkout form, submit. `None` when the shop refused (sold out).
async fn start_checkout(world: &World, shopper: &Shopper) -> anyhow::Result<Option<Started>> {
    let basket = shopper
        .client
        .get(format!("{}/basket", world.shop))
        .shop_send()
        .await?
        .text()
        .await?;
    let key = form_field(&basket, "checkout_key").context("no checkout key on the basket page")?;
    let submitted = shopper
        .client
        .post(format!("{}/checkout", world.shop))
        .form(&[
            ("checkout_key", key.as_str()),
            ("name", "Simulated Shopper"),
            ("email", "shopper@example.com"),
            ("provider", shopper.provider.as_str()),
        ])
        .shop_send()
        .await?;
    match submitted.status().as_u16() {
        409 => return Ok(None),
        303 => {}
        other => anyhow::bail!("checkout answered {other}"),
    }
    let target = location(&submitted)?;
    match shopper.provider {
        Provider::Stripe => {
            let reference = target
                .rsplit('/')
                .next()
                .context("a payment page address")?
                .to_owned();
            Ok(Some(Started {
                reference,
                pay_url: target,
                callback_url: String::new(),
                cancel_url: String::new(),
            }))
        }
        Provider::Razorpay => {
            let token = target
                .rsplit('/')
                .next()
                .context("a payment page address")?
                .to_owned();
            let page_url = if target.starts_with("http") {
                target.clone()
            } else {
                format!("{}{target}", world.shop)
            };
            let page = shop_send(shopper.client.get(page_url))
                .await?
                .text()
                .await?;
            // what Razorpay's checkout.js reads from the page
            let options = page
                .split("<script id=\"pay-options\" type=\"application/json\">")
                .nth(1)
                .and_then(|rest| rest.split("</script>").next())
                .context("no Razorpay options on the payment page")?;
            let options: serde_json::Value = serde_json::from_str(options)?;
            let reference = options["order_id"]
                .as_str()
                .context("no order id in the Razorpay options")?
                .to_owned();
            let callback_url = options["callback_url"]
                .as_str()
                .context("no callback URL in the Razorpay options")?
                .to_owned();
            Ok(Some(Started {
                pay_url: format!("{}/razorpay/pay/{reference}", world.sandbox),
                cancel_url: format!("{}/checkout/cancel/{token}", world.shop),
                reference,
                callback_url,
            }))
        }
    }
}

/// Press a button on the provider's page; follow the way back to the shop
/// unless the return is lost.
/// Back at the shop's cancel URL, the shopper reads "Leave checkout?" and
/// presses the button (the GET alone changes nothing).
async fn leave(client: &reqwest::Client, cancel_url: &str) -> anyhow::Result<()> {
    let asked = shop_send(client.get(cancel_url)).await?;
    anyhow::ensure!(
        asked.status().is_success() || asked.status().is_redirection(),
        "the cancel URL answered {}",
        asked.status()
    );
    if asked.text().await?.contains("Leave checkout?") {
        let left = shop_send(client.post(cancel_url)).await?;
        anyhow::ensure!(
            left.status().is_success() || left.status().is_redirection(),
            "leaving answered {}",
            left.status()
        );
    }
    Ok(())
}

async fn press(
    provider: Provider,
    started: &Started,
    client: &reqwest::Client,
    action: &str,
    follow: bool,
) -> anyhow::Result<()> {
    match provider {
        Provider::Stripe => {
            let answer = client
                .post(format!("{}/{action}", started.pay_url))
                .send()
                .await?;
            if answer.status() == 303 && action == "abandon" {
                leave(client, &location(&answer)?).await?;
            } else if answer.status() == 303 && follow {
                let back = shop_send(client.get(location(&answer)?)).await?;
                anyhow::ensure!(
                    back.status().is_success() || back.status().is_redirection(),
                    "the way back answered {}",
                    back.status()
                );
            }
        }
        Provider::Razorpay => {
            let answer = client
                .post(format!("{}/{action}", started.pay_url))
                .form(&[
                    ("callback_url", started.callback_url.as_str()),
                    ("cancel_url", started.cancel_url.as_str()),
                ])
                .send()
                .await?;
            if action == "abandon" {
                if answer.status() == 303 {
                    leave(client, &location(&answer)?).await?;
                }
                return Ok(());
            }
            let page = answer.text().await?;
            let fields: Vec<(&str, String)> = [
                "razorpay_payment_id",
                "razorpay_order_id",
                "razorpay_signature",
            ]
            .into_iter()
            .filter_map(|name| form_field(&page, name).map(|value| (name, value)))
            .collect();
            if follow && fields.len() == 3 {
                let back = client
                    .post(&started.callback_url)
                    .form(&fields)
                    .shop_send()
                    .await?;
                anyhow::ensure!(
                    back.status().is_success() || back.status().is_redirection(),
                    "the callback answered {}",
                    back.status()
                );
            } else if follow && page.contains("name=\"error[code]\"") {
                // a declined card comes back too, with Razorpay's error fields
                let errors: Vec<(&str, String)> = [
                    "error[code]",
                    "error[description]",
                    "error[source]",
                    "error[step]",
                    "error[reason]",
                    "error[metadata]",
                ]
                .into_iter()
                .filter_map(|name| form_field(&page, name).map(|value| (name, value)))
                .collect();
                let back = client
                    .post(&started.callback_url)
                    .form(&errors)
                    .shop_send()
                    .await?;
                // a try-again page, or (a bank that may still answer) the
                // order's page
                anyhow::ensure!(
                    back.status() == reqwest::StatusCode::OK || back.status().is_redirection(),
                    "the failure callback answered {}",
                    back.status()
                );
            }
        }
    }
    Ok(())
}

/// The order a page belongs to.
async fn order_of(world: &World, page_id: &str) -> anyhow::Result<uuid::Uuid> {
    Ok(
        sqlx::query_scalar("select id from orders where provider_session_id = $1")
            .bind(page_id)
            .fetch_one(&world.pool)
            .await?,
    )
}

/// Someone pays 1.00 on another page that names the order: a Stripe
/// session (a payment link) with the order's id as client_reference_id, or
/// a Razorpay order with it in its notes.
async fn pay_elsewhere(world: &World, provider: Provider, started: &Started) -> anyhow::Result<()> {
    let order_id = order_of(world, &started.reference).await?;
    let http = holdfast::payments::http::client(Duration::from_secs(30));
    let keys = SandboxSettings::development();
    match provider {
        Provider::Stripe => {
            let expires_at = chrono::Utc::now().timestamp() + 3600;
            let body = format!(
                "mode=payment&success_url=https%3A%2F%2Felsewhere.test%2F&expires_at={expires_at}\
                 &client_reference_id={order_id}&line_items[0][quantity]=1\
                 &line_items[0][price_data][currency]=eur&line_items[0][price_data][unit_amount]=100\
                 &line_items[0][price_data][product_data][name]=Elsewhere"
            );
            let session: serde_json::Value = http
                .post(format!("{}/stripe/v1/checkout/sessions", world.sandbox))
                .bearer_auth(keys.stripe_secret_key.expose())
                .header("Content-Type", "application/x-www-form-urlencoded")
                .body(body)
                .send()
                .await?
                .error_for_status()?
                .json()
                .await?;
            let id = session["id"].as_str().context("a session id")?;
            http.post(format!("{}/stripe/pay/{id}/pay", world.sandbox))
                .send()
                .await?;
        }
        Provider::Razorpay => {
            let order: serde_json::Value = http
                .post(format!("{}/razorpay/v1/orders", world.sandbox))
                .basic_auth(
                    &keys.razorpay_key_id,
                    Some(keys.razorpay_key_secret.expose()),
                )
                .json(&serde_json::json!({
                    "amount": 100, "currency": "EUR",
                    "notes": { "holdfast_order_id": order_id.to_string() },
                    "payment": { "capture": "automatic",
                                 "capture_options": { "automatic_expiry_period": 12 } },
                }))
                .send()
                .await?
                .error_for_status()?
                .json()
                .await?;
            let id = order["id"].as_str().context("an order id")?;
            world
                .razorpay_sandbox
                .authorize(id, None, false)
                .map_err(|e| anyhow::anyhow!(e))?;
        }
    }
    Ok(())
}

/// A payment of 1.00 lands on the order's own Razorpay order (Stripe's
/// session takes only its own amount: there, on another page).
async fn underpay(world: &World, provider: Provider, started: &Started) -> anyhow::Result<()> {
    match provider {
        Provider::Razorpay => {
            world
                .razorpay_sandbox
                .authorize(&started.reference, Some(100), false)
                .map_err(|e| anyhow::anyhow!(e))?;
            Ok(())
        }
        Provider::Stripe => pay_elsewhere(world, provider, started).await,
    }
}

/// The banks finish the refunds the providers accepted: all of them at
/// closing time, else all but those of pages whose refunds are slow.
fn finish_refunds(world: &World, all: bool) {
    let slow = world
        .slow_refunds
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .clone();
    for (refund, page) in world.stripe_sandbox.pending_refunds() {
        if all || !slow.contains(&page) {
            let _ = world.stripe_sandbox.settle_refund(&refund, true);
        }
    }
    for (refund, page) in world.razorpay_sandbox.pending_refunds() {
        if all || !slow.contains(&page) {
            let _ = world.razorpay_sandbox.settle_refund(&refund, true);
        }
    }
}

/// The end of the sale: every provider page closes, every payment window
/// runs out, and the worker's passes run until nothing changes.
async fn closing_time(
    world: &World,
    ledger: &mut SimLedger,
    reconcile: bool,
) -> anyhow::Result<()> {
    let outbox = Outbox::new(world.pool.clone(), world.payments.clone());
    let reconciler = Reconciler::new(world.pool.clone(), world.payments.clone())
        .with_times(ReconcileTimes::immediately());
    outbox.drain().await?;
    finish_refunds(world, false);
    settle(world).await;
    // during the payment window, the worker asks about quiet pages
    if reconcile {
        let found = reconciler.drain().await?;
        ledger.reconciliation.add(&found);
    }

    // the providers' clock: every page still open expires
    let open: Vec<String> = sqlx::query_scalar(
        "select provider_session_id from orders \
          where provider = 'stripe' and state = 'pending' and provider_session_id is not null \
          order by created_at",
    )
    .fetch_all(&world.pool)
    .await?;
    let stripe = world
        .payments
        .get(Provider::Stripe)
        .context("the simulation has every provider")?;
    for session in open {
        stripe.close_page(&session).await?;
    }
    settle(world).await;

    // Our clock: every payment window and hold has run out, settling ones
    // too (their deadline and grace behind us: days pass). One
    // transaction, so the hints move to the very instant the rows do (a
    // hint later than a hold's time would hide it from the sweeper).
    let mut tx = world.pool.begin().await?;
    sqlx::query(
        "update holds set expires_at = least(expires_at, now()), \
                payment_deadline = case when payment_deadline is not null \
                                        then least(payment_deadline, now()) end, \
                settle_deadline = case when settle_deadline is not null \
                                       then least(settle_deadline, now() - settle_grace) end, \
                settling_at = case when settling_at is not null \
                                   then least(settling_at, now() - settle_grace - interval '1 second') end \
          where state in ('held', 'awaiting_payment')",
    )
    .execute(&mut *tx)
    .await?;
    sqlx::query(
        "update resources set next_expiry = least(next_expiry, now()), \
                next_deadline = least(next_deadline, now())",
    )
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    // and the reconciler's waits between checks are over
    sqlx::query("update orders set reconcile_after = null where reconciled_at is null")
        .execute(&world.pool)
        .await?;
    tokio::time::sleep(Duration::from_millis(20)).await;
    Sweeper::new(Inventory::new(world.pool.clone()), "simulate")
        .run_once()
        .await?;
    holdfast::checkout::expire_abandoned_orders(&world.pool).await?;
    // the late debits' banks answer now, after the deadline and grace:
    // the one rule for late money judges what comes
    let late = std::mem::take(
        &mut *world
            .late_debits
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()),
    );
    for (provider, page) in late {
        let _ = match provider {
            Provider::Stripe => world.stripe_sandbox.settle_delayed(&page, true),
            Provider::Razorpay => {
                for payment in world.razorpay_sandbox.order_payments(&page) {
                    let _ = world.razorpay_sandbox.authorize_late(&payment);
                }
                Ok(())
            }
        };
    }
    settle(world).await;
    if reconcile {
        let found = reconciler.drain().await?;
        ledger.reconciliation.add(&found);
    }
    sqlx::query("update outbox_jobs set run_after = now() where state = 'pending'")
        .execute(&world.pool)
        .await?;
    outbox.drain().await?;
    // days pass at the providers: authorisations nobody captured go back
    // (Razorpay: 5 days after their creation), banks stop answering, and
    // every refund the banks were slow with is finished
    world.razorpay_sandbox.days_pass(6);

    // the worker until quiet: reconciliation finds what nothing reported
    for _ in 0..8 {
        if reconcile {
            let found = reconciler.drain().await?;
            ledger.reconciliation.add(&found);
        }
        // the outbox's waits between tries are over too
        sqlx::query("update outbox_jobs set run_after = now() where state = 'pending'")
            .execute(&world.pool)
            .await?;
        outbox.drain().await?;
        finish_refunds(world, true);
        settle(world).await;
        let unfinished: i64 =
            sqlx::query_scalar("select count(*) from outbox_jobs where state = 'pending'")
                .fetch_one(&world.pool)
                .await?;
        let waiting: i64 = sqlx::query_scalar(
            "select count(*) from orders where reconciled_at is null and provider_session_id is not null",
        )
        .fetch_one(&world.pool)
        .await?;
        if unfinished == 0 && (!reconcile || waiting == 0) {
            break;
        }
        sqlx::query("update orders set reconcile_after = null where reconciled_at is null")
            .execute(&world.pool)
            .await?;
    }
    Ok(())
}

/// Wait until the sandbox has stopped delivering webhooks (late ones come
/// after three seconds).
async fn settle(world: &World) {
    let deliveries = || {
        world.stripe_sandbox.ledger().deliveries.len()
            + world.razorpay_sandbox.ledger().deliveries.len()
    };
    let mut seen = deliveries();
    let mut quiet = Duration::ZERO;
    while quiet < Duration::from_millis(3500) {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let now = deliveries();
        if now == seen {
            quiet += Duration::from_millis(250);
        } else {
            seen = now;
            quiet = Duration::ZERO;
        }
    }
}

/// Compare what the providers hold with what the shop did.
async fn account(world: &World, ledger: &mut SimLedger) -> anyhow::Result<()> {
    let mut charges: Vec<(String, String, i64)> = Vec::new();
    let mut refunds: Vec<(String, String, i64)> = Vec::new();
    let sandboxes: [(&str, Ledger); 2] = [
        ("stripe", world.stripe_sandbox.ledger()),
        ("razorpay", world.razorpay_sandbox.ledger()),
    ];
    for (provider, sandbox) in &sandboxes {
        for charge in &sandbox.charges {
            charges.push((
                provider.to_string(),
                charge.payment_intent.clone(),
                charge.amount,
            ));
        }
        for refund in sandbox.refunds_standing() {
            refunds.push((
                provider.to_string(),
                refund.payment_intent.clone(),
                refund.amount,
            ));
        }
    }
    ledger.charges = charges.len() as u64;
    ledger.charged_minor = charges.iter().map(|c| c.2).sum();

    // fulfilled: paid, or paid and then refunded (some or all) by staff
    let paid: Vec<(String, String, i64, i64)> = sqlx::query_as(
        "select provider, payment_ref, amount_minor, refunded_minor from orders o \
          where payment_ref is not null \
            and (state = 'paid' or exists (select 1 from order_refunds r where r.order_id = o.id))",
    )
    .fetch_all(&world.pool)
    .await?;
    ledger.fulfilled_orders = paid.len() as u64;
    ledger.fulfilled_minor = paid.iter().map(|p| p.2).sum();
    ledger.staff_refunded_orders = paid.iter().filter(|p| p.3 > 0).count() as u64;
    let fulfilled: BTreeMap<(String, String), i64> = paid
        .iter()
        .map(|(provider, payment, amount, _)| ((provider.clone(), payment.clone()), *amount))
        .collect();
    let by_staff: BTreeMap<(String, String), i64> = paid
        .iter()
        .filter(|p| p.3 > 0)
        .map(|(provider, payment, _, refunded)| ((provider.clone(), payment.clone()), *refunded))
        .collect();
    let mut refunded: BTreeMap<(String, String), u64> = BTreeMap::new();
    let mut refunded_sum: BTreeMap<(String, String), i64> = BTreeMap::new();
    for (provider, payment, amount) in &refunds {
        let key = (provider.clone(), payment.clone());
        // money staff gave back of a sale is counted apart from payments
        // that were never sold
        if by_staff.contains_key(&key) {
            ledger.staff_refunds += 1;
            ledger.staff_refunded_minor += amount;
        } else {
            ledger.refunds += 1;
            ledger.refunded_minor += amount;
        }
        *refunded.entry(key.clone()).or_insert(0) += 1;
        *refunded_sum.entry(key).or_insert(0) += amount;
    }
    for (provider, payment, amount) in &charges {
        let key = (provider.clone(), payment.clone());
        let kept = fulfilled.get(&key);
        let back = refunded.get(&key).copied().unwrap_or(0);
        // staff gave some of a sold payment back: exactly what the order
        // records, never more than it took
        if let Some(staff) = by_staff.get(&key) {
            let back_minor = refunded_sum.get(&key).copied().unwrap_or(0);
            if back_minor != *staff || back_minor > *amount {
                ledger.violations.push(format!(
                    "{provider} charge {payment} ({amount}): staff refunded {staff}, \
                     the provider gave back {back_minor}"
                ));
            }
            continue;
        }
        match (kept, back) {
            (None, 0) => ledger.violations.push(format!(
                "{provider} charge {payment} ({amount}) has neither a fulfilment nor a refund"
            )),
            (Some(_), n) if n > 0 => ledger.violations.push(format!(
                "{provider} charge {payment} was fulfilled and refunded"
            )),
            (_, n) if n > 1 => ledger.violations.push(format!(
                "{provider} charge {payment} was refunded {n} times"
            )),
            (Some(order_amount), _) if order_amount != amount => ledger.violations.push(format!(
                "{provider} charge {payment} took {amount} for an order of {order_amount}"
            )),
            _ => {}
        }
    }
    for key in fulfilled.keys() {
        if !charges.iter().any(|(p, id, _)| (p, id) == (&key.0, &key.1)) {
            ledger.violations.push(format!(
                "order paid by {} {} that no provider charged",
                key.0, key.1
            ));
        }
    }
    for key in refunded.keys() {
        if !charges.iter().any(|(p, id, _)| (p, id) == (&key.0, &key.1)) {
            ledger.violations.push(format!(
                "refund of {} {} that was never charged",
                key.0, key.1
            ));
        }
    }

    let states: Vec<(String, i64)> =
        sqlx::query_as("select state, count(*) from orders group by state order by state")
            .fetch_all(&world.pool)
            .await?;
    ledger.orders_by_state = states
        .into_iter()
        .map(|(state, n)| (state, n as u64))
        .collect();

    let resources: Vec<(String, i32, i32, i32, i64)> = sqlx::query_as(
        "select r.id, r.total, r.sold, r.held, \
                coalesce((select sum(l.qty - l.refunded_qty) from order_lines l \
                            join orders o on o.id = l.order_id \
                            join products p on p.id = l.product_id \
                           where p.resource_id = r.id \
                             and (o.state = 'paid' \
                                  or exists (select 1 from order_refunds x \
                                              where x.order_id = o.id))), 0)::int8 \
           from resources r order by r.id",
    )
    .fetch_all(&world.pool)
    .await?;
    for (resource, total, sold, held, on_orders) in resources {
        if i64::from(sold) != on_orders {
            ledger.violations.push(format!(
                "{resource}: {sold} sold by the counters, {on_orders} on fulfilled orders"
            ));
        }
        if on_orders > i64::from(total) || sold + held > total {
            ledger.violations.push(format!(
                "{resource}: oversold ({on_orders} on orders, {held} held, {total} in all)"
            ));
        }
        ledger.resources.push(ResourceLine {
            resource,
            total,
            sold,
            sold_on_orders: on_orders,
            held,
        });
    }

    ledger.leaked_holds = sqlx::query_scalar::<_, i64>(
        "select count(*) from holds where state in ('held', 'awaiting_payment')",
    )
    .fetch_one(&world.pool)
    .await? as u64;
    if ledger.leaked_holds > 0 {
        ledger.violations.push(format!(
            "{} holds still active after their deadline and a sweep",
            ledger.leaked_holds
        ));
    }
    ledger.drifted_resources = Inventory::new(world.pool.clone())
        .check(None)
        .await?
        .iter()
        .filter(|row| row.drift)
        .count() as u64;
    if ledger.drifted_resources > 0 {
        ledger.violations.push(format!(
            "{} resources whose counters disagree with their rows",
            ledger.drifted_resources
        ));
    }
    ledger.pending_refund_jobs = sqlx::query_scalar::<_, i64>(
        "select count(*) from outbox_jobs where kind = 'refund' and state = 'pending'",
    )
    .fetch_one(&world.pool)
    .await? as u64;
    if ledger.pending_refund_jobs > 0 {
        ledger.violations.push(format!(
            "{} refund jobs not finished",
            ledger.pending_refund_jobs
        ));
    }
    let stuck: i64 =
        sqlx::query_scalar("select count(*) from orders where state in ('pending', 'settling')")
            .fetch_one(&world.pool)
            .await?;
    if stuck > 0 {
        ledger.violations.push(format!(
            "{stuck} orders still pending or settling after closing time"
        ));
    }
    let late: Vec<(String, i64)> = sqlx::query_as(
        "select late_money, count(*) from orders where late_money is not null \
          group by late_money order by late_money",
    )
    .fetch_all(&world.pool)
    .await?;
    ledger.late_money = late.into_iter().map(|(v, n)| (v, n as u64)).collect();
    ledger.settled_orders =
        sqlx::query_scalar::<_, i64>("select count(*) from orders where settle_method is not null")
            .fetch_one(&world.pool)
            .await? as u64;
    Ok(())
}

/// The shop answers 503 while it is too busy to get a database connection
/// (its pool waits two seconds at most): a shopper tries again, as a person
/// at a browser would. Every request sent this way is safe to repeat.
trait ShopSend {
    async fn shop_send(self) -> anyhow::Result<reqwest::Response>;
}

impl ShopSend for reqwest::RequestBuilder {
    async fn shop_send(self) -> anyhow::Result<reqwest::Response> {
        shop_send(self).await
    }
}

async fn shop_send(request: reqwest::RequestBuilder) -> anyhow::Result<reqwest::Response> {
    for _ in 0..50 {
        let attempt = request
            .try_clone()
            .context("a request that cannot be sent again")?;
        let answer = attempt.send().await?;
        if answer.status() != reqwest::StatusCode::SERVICE_UNAVAILABLE {
            return Ok(answer);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(request.send().await?)
}

pub(crate) fn location(response: &reqwest::Response) -> anyhow::Result<String> {
    Ok(response
        .headers()
        .get("location")
        .context("a redirect without a location")?
        .to_str()?
        .to_owned())
}

/// A hidden or filled form field's value from a page (escaped quotes and
/// ampersands decoded, the ampersand last).
pub(crate) fn form_field(page: &str, name: &str) -> Option<String> {
    let marker = format!("name=\"{name}\" value=\"");
    let start = page.find(&marker)? + marker.len();
    let end = page[start..].find('"')? + start;
    Some(
        page[start..end]
            .replace("&#34;", "\"")
            .replace("&quot;", "\"")
            .replace("&#39;", "'")
            .replace("&amp;", "&"),
    )
}

impl SimLedger {
    /// The ledger for people.
    pub fn text(&self) -> String {
        let mut out = format!(
            "simulation: {} shoppers, seed {}, providers {}\n",
            self.shoppers,
            self.seed,
            self.providers.join("+")
        );
        out.push_str(&format!(
            "checkouts: {} reached a payment page, {} refused (sold out)\n",
            self.checkouts_started, self.checkouts_refused
        ));
        out.push_str(&format!(
            "money: {} charges ({} minor units); {} orders fulfilled ({}); {} refunds ({})\n",
            self.charges,
            self.charged_minor,
            self.fulfilled_orders,
            self.fulfilled_minor,
            self.refunds,
            self.refunded_minor
        ));
        out.push_str(&format!(
            "staff refunds: {} orders, {} refunds ({})\n",
            self.staff_refunded_orders, self.staff_refunds, self.staff_refunded_minor
        ));
        out.push_str("units:\n");
        for r in &self.resources {
            out.push_str(&format!(
                "  {:<18} total {:>6}  sold {:>6}  on fulfilled orders {:>6}  held {}\n",
                r.resource, r.total, r.sold, r.sold_on_orders, r.held
            ));
        }
        out.push_str(&format!(
            "orders: {}\n",
            self.orders_by_state
                .iter()
                .map(|(state, n)| format!("{state} {n}"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
        out.push_str(&format!(
            "behaviours: {}\n",
            self.behaviours
                .iter()
                .map(|(b, n)| format!("{b} {n}"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
        out.push_str(&format!(
            "reconciliation: {} checks, {} fulfilled, {} refunds queued, {} released\n",
            self.reconciliation.checked,
            self.reconciliation.fulfilled,
            self.reconciliation.refunds_queued,
            self.reconciliation.released
        ));
        out.push_str(&format!(
            "money that takes days: {} orders settled over days ({} found by reconciliation); late money: {}\n",
            self.settled_orders,
            self.reconciliation.settling,
            if self.late_money.is_empty() {
                "none".to_owned()
            } else {
                self.late_money
                    .iter()
                    .map(|(verdict, n)| format!("{verdict} {n}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        ));
        out.push_str(&format!(
            "leaked holds: {}; drifted resources: {}; refund jobs pending: {}\n",
            self.leaked_holds, self.drifted_resources, self.pending_refund_jobs
        ));
        if self.violations.is_empty() {
            out.push_str("violations: none\n");
        } else {
            out.push_str(&format!("violations: {}\n", self.violations.len()));
            for v in self.violations.iter().take(50) {
                out.push_str(&format!("  - {v}\n"));
            }
        }
        out
    }
}
