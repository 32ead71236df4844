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
//!
//! Its rooms: who the shoppers are and what they do (`behaviour.rs`), one
//! lane of them stepping through the shop (`shopper.rs`), the checkout as
//! a browser goes through it, at the shop and on the provider's page
//! (`checkout.rs`), the other parties to an order, banks, staff and other
//! payers (`parties.rs`), time running out for one order and for the sale
//! (`closing.rs`), and the ledger (`ledger.rs`) with the accounting that
//! fills it (`account.rs`). This file starts the world and runs them.

mod account;
mod behaviour;
mod checkout;
mod closing;
mod ledger;
mod parties;
mod shopper;

use std::collections::HashSet;
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use sqlx::PgPool;

use holdfast::catalogue::{CatalogueFile, ProductKind, ProductSpec};
use holdfast::payments::{ProviderKind as Provider, ProviderSettings, Providers};
use holdfast::startup::Application;
use holdfast::state::Shop;
use holdfast_sandbox::{Sandbox, SandboxSettings};

pub use behaviour::Behaviour;
pub use ledger::{ResourceLine, SimLedger};

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
    slow_refunds: Mutex<HashSet<String>>,
    /// Debits whose banks answer only after the settling deadline and
    /// grace have passed (closing time): provider and page.
    late_debits: Mutex<Vec<(Provider, String)>>,
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
            shopper::run_lane(&world, &products, &options, lane as u64, count).await
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

    closing::closing_time(&world, &mut ledger, options.reconcile).await?;
    account::account(&world, &mut ledger).await?;
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
