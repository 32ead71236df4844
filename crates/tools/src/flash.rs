//! `holdfast-tools flash-sale`: a crowd of shoppers for one tier of a
//! running shop, paying at the Stripe sandbox. Each shopper browses the
//! tier's page, asks what is left, adds one ticket, checks out and pays (a
//! few leave the payment page instead, so their tickets come back); the
//! ones refused keep trying, as a crowd does, until the tier is sold for
//! good. Then the ledger: sold equals the units on paid orders, no drift,
//! every charge at the sandbox fulfilled or refunded.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use rand::Rng;
use serde::Serialize;
use sqlx::PgPool;

use crate::browser::{form_field, location};

/// What to run.
#[derive(Debug, Clone)]
pub struct FlashOptions {
    /// The shop, e.g. `http://127.0.0.1:8090`.
    pub shop: String,
    /// The Stripe sandbox's base, e.g. `http://127.0.0.1:8091/stripe`.
    pub sandbox: String,
    pub product: String,
    pub collection: String,
    pub shoppers: usize,
    /// Shoppers on their way at once.
    pub concurrency: usize,
    /// Share of winners who leave the payment page instead of paying.
    pub abandon: f64,
    /// Give up after this long.
    pub limit: Duration,
    /// In the burst, every shopper comes back to the shop after paying, as
    /// a browser does: the returns confirm too, racing the webhooks.
    pub returns: bool,
}

/// One kind of request's figures.
#[derive(Debug, Serialize)]
pub struct Kind {
    pub kind: &'static str,
    pub count: usize,
    pub per_second: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
}

/// What the crowd did and what the ledger says.
#[derive(Debug, Serialize)]
pub struct FlashReport {
    pub shoppers: usize,
    pub units: i64,
    /// From the first request until the resource's last unit was sold.
    pub sold_out_after_s: Option<f64>,
    pub elapsed_s: f64,
    pub kinds: Vec<Kind>,
    pub paid: u64,
    pub abandoned: u64,
    pub gave_up: u64,
    pub errors: u64,
    pub sold: i64,
    pub units_on_paid_orders: i64,
    pub drifting_resources: i64,
    pub charges: usize,
    pub charges_fulfilled: usize,
    pub charges_refunded: usize,
    pub charges_unaccounted: usize,
}

impl FlashReport {
    /// The report as text.
    pub fn lines(&self) -> String {
        let mut out = format!(
            "{} shoppers for {} units: sold out after {}, crowd done after {:.1} s\n",
            self.shoppers,
            self.units,
            self.sold_out_after_s
                .map(|s| format!("{s:.1} s"))
                .unwrap_or_else(|| "(not sold out)".into()),
            self.elapsed_s
        );
        for kind in &self.kinds {
            out += &format!(
                "  {:<20} {:>7} answers {:>8.0}/s  p50 {:>7.1} ms  p99 {:>7.1} ms\n",
                kind.kind, kind.count, kind.per_second, kind.p50_ms, kind.p99_ms
            );
        }
        out += &format!(
            "  shoppers: {} paid, {} left the payment page, {} gave up when it was gone, {} errors\n",
            self.paid, self.abandoned, self.gave_up, self.errors
        );
        out += &format!(
            "ledger: sold {} = units on paid orders {}; resources with drift {}; charges {} = fulfilled {} + refunded {} (unaccounted {}): {}",
            self.sold,
            self.units_on_paid_orders,
            self.drifting_resources,
            self.charges,
            self.charges_fulfilled,
            self.charges_refunded,
            self.charges_unaccounted,
            if self.holds() { "holds" } else { "VIOLATED" }
        );
        out
    }

    /// The promise: every unit sold is on a paid order, nothing drifted,
    /// every charge was fulfilled or refunded.
    pub fn holds(&self) -> bool {
        self.sold == self.units_on_paid_orders
            && self.drifting_resources == 0
            && self.charges_unaccounted == 0
            && self.errors == 0
    }
}

#[derive(Default)]
struct Timings(Mutex<HashMap<&'static str, Vec<Duration>>>);

impl Timings {
    fn add(&self, kind: &'static str, took: Duration) {
        self.0
            .lock()
            .expect("never poisoned")
            .entry(kind)
            .or_default()
            .push(took);
    }
}

#[derive(Default)]
struct Tally {
    paid: AtomicU64,
    abandoned: AtomicU64,
    gave_up: AtomicU64,
    errors: AtomicU64,
}

struct Crowd {
    options: FlashOptions,
    timings: Timings,
    tally: Tally,
    /// Someone saw the tier sold for good (nothing left, nothing pending).
    over: AtomicBool,
    deadline: Instant,
}

pub async fn run(pool: PgPool, options: FlashOptions) -> anyhow::Result<FlashReport> {
    let resource: String = sqlx::query_scalar("select resource_id from products where id = $1")
        .bind(&options.product)
        .fetch_optional(&pool)
        .await?
        .with_context(|| format!("no product {:?}", options.product))?;
    let units: i64 =
        sqlx::query_scalar("select (total - held - sold)::int8 from resources where id = $1")
            .bind(&resource)
            .fetch_one(&pool)
            .await?;
    let started = Instant::now();
    let crowd = Arc::new(Crowd {
        deadline: started + options.limit,
        options: options.clone(),
        timings: Timings::default(),
        tally: Tally::default(),
        over: AtomicBool::new(false),
    });
    // when the last unit was sold, as the database says
    let sold_out = {
        let (pool, resource) = (pool.clone(), resource.clone());
        tokio::spawn(async move {
            loop {
                let left: Option<i32> =
                    sqlx::query_scalar("select total - sold from resources where id = $1")
                        .bind(&resource)
                        .fetch_optional(&pool)
                        .await
                        .ok()
                        .flatten();
                if left == Some(0) {
                    return started.elapsed();
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
    };
    let gate = Arc::new(tokio::sync::Semaphore::new(options.concurrency));
    let mut shoppers = Vec::with_capacity(options.shoppers);
    for n in 0..options.shoppers {
        let (crowd, gate) = (crowd.clone(), gate.clone());
        shoppers.push(tokio::spawn(async move {
            let _turn = gate.acquire_owned().await.expect("never closed");
            if let Err(error) = shop(&crowd, n).await
                && crowd.tally.errors.fetch_add(1, Ordering::Relaxed) < 5
            {
                eprintln!("shopper {n}: {error:#}");
            }
        }));
    }
    for shopper in shoppers {
        shopper.await?;
    }
    let elapsed = started.elapsed();
    let sold_out_after = tokio::time::timeout(Duration::from_secs(30), sold_out)
        .await
        .ok()
        .and_then(Result::ok);

    // webhooks and refunds settle; then the ledger
    let paid = crowd.tally.paid.load(Ordering::Relaxed);
    let settle_by = Instant::now() + Duration::from_secs(60);
    let (sold, on_paid) = loop {
        let (sold, on_paid): (i64, i64) = sqlx::query_as(
            "select (select sold::int8 from resources where id = $1), \
                    (select coalesce(sum(l.qty), 0)::int8 from order_lines l join orders o on o.id = l.order_id \
                      where o.state = 'paid' and l.product_id in (select id from products where resource_id = $1))",
        )
        .bind(&resource)
        .fetch_one(&pool)
        .await?;
        if (on_paid as u64 >= paid && sold == on_paid) || Instant::now() > settle_by {
            break (sold, on_paid);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let drifting: i64 = sqlx::query_scalar("select count(*) from hf_check() where drift")
        .fetch_one(&pool)
        .await?;
    let (charges, fulfilled, refunded) = charges(&pool, &options.sandbox).await?;

    let mut kinds: Vec<Kind> = crowd
        .timings
        .0
        .lock()
        .expect("never poisoned")
        .iter_mut()
        .map(|(kind, took)| {
            took.sort();
            let at = |q: f64| took[((took.len() as f64 * q) as usize).min(took.len() - 1)];
            Kind {
                kind,
                count: took.len(),
                per_second: took.len() as f64 / elapsed.as_secs_f64(),
                p50_ms: at(0.50).as_secs_f64() * 1000.0,
                p99_ms: at(0.99).as_secs_f64() * 1000.0,
            }
        })
        .collect();
    kinds.sort_by_key(|k| k.kind);
    Ok(FlashReport {
        shoppers: options.shoppers,
        units,
        sold_out_after_s: sold_out_after.map(|d| d.as_secs_f64()),
        elapsed_s: elapsed.as_secs_f64(),
        kinds,
        paid,
        abandoned: crowd.tally.abandoned.load(Ordering::Relaxed),
        gave_up: crowd.tally.gave_up.load(Ordering::Relaxed),
        errors: crowd.tally.errors.load(Ordering::Relaxed),
        sold,
        units_on_paid_orders: on_paid,
        drifting_resources: drifting,
        charges,
        charges_fulfilled: fulfilled,
        charges_refunded: refunded,
        charges_unaccounted: charges - fulfilled - refunded,
    })
}

/// Charges at the sandbox, and how many of them are on a paid order or
/// refunded in full.
async fn charges(pool: &PgPool, sandbox: &str) -> anyhow::Result<(usize, usize, usize)> {
    let ledger: serde_json::Value = builder()
        .build()?
        .get(format!("{sandbox}/_sandbox/ledger"))
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    let mut refunded: BTreeMap<String, i64> = BTreeMap::new();
    for refund in ledger["refunds"].as_array().into_iter().flatten() {
        if refund["status"] != "failed" {
            *refunded
                .entry(
                    refund["payment_intent"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned(),
                )
                .or_default() += refund["amount"].as_i64().unwrap_or_default();
        }
    }
    let paid: Vec<String> = sqlx::query_scalar(
        "select payment_ref from orders where state = 'paid' and payment_ref is not null",
    )
    .fetch_all(pool)
    .await?;
    let paid: std::collections::HashSet<String> = paid.into_iter().collect();
    let (mut total, mut fulfilled, mut back) = (0, 0, 0);
    for charge in ledger["charges"].as_array().into_iter().flatten() {
        total += 1;
        let intent = charge["payment_intent"].as_str().unwrap_or_default();
        if paid.contains(intent) {
            fulfilled += 1;
        } else if refunded.get(intent).copied().unwrap_or(0)
            >= charge["amount"].as_i64().unwrap_or(i64::MAX)
        {
            back += 1;
        }
    }
    Ok((total, fulfilled, back))
}

/// Holdfast's HTTP client (rustls with aws-lc-rs), redirects left to us.
fn builder() -> reqwest::ClientBuilder {
    holdfast::payments::http::client_builder(&holdfast::payments::http::TrustedRoots::mozilla())
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(30))
}

/// Times one request of `kind`.
async fn timed(
    crowd: &Crowd,
    kind: &'static str,
    request: reqwest::RequestBuilder,
) -> anyhow::Result<reqwest::Response> {
    let started = Instant::now();
    let response = request.send().await?;
    crowd.timings.add(kind, started.elapsed());
    Ok(response)
}

/// What the availability answer says of the tier: (available, pending).
async fn poll(crowd: &Crowd, client: &reqwest::Client) -> anyhow::Result<(i64, i64)> {
    let o = &crowd.options;
    let answer: serde_json::Value = timed(
        crowd,
        "poll",
        client.get(format!("{}/availability?ids={}", o.shop, o.product)),
    )
    .await?
    .error_for_status()?
    .json()
    .await?;
    let product = &answer["products"][0];
    Ok((
        product["available"].as_i64().unwrap_or(0),
        product["pending"].as_i64().unwrap_or(0),
    ))
}

async fn shop(crowd: &Crowd, n: usize) -> anyhow::Result<()> {
    let o = &crowd.options;
    let client = builder().cookie_store(true).build()?;
    let page = timed(
        crowd,
        "page",
        client.get(format!("{}/c/{}", o.shop, o.collection)),
    )
    .await?;
    anyhow::ensure!(
        page.status() == 200,
        "the tier's page answered {}",
        page.status()
    );
    page.bytes().await?;
    if crowd.over.load(Ordering::Relaxed) {
        crowd.tally.gave_up.fetch_add(1, Ordering::Relaxed);
        return Ok(());
    }
    poll(crowd, &client).await?;
    let added = timed(
        crowd,
        "add",
        client
            .post(format!("{}/basket/add", o.shop))
            .form(&[("product_id", o.product.as_str()), ("qty", "1")]),
    )
    .await?;
    anyhow::ensure!(added.status() == 303, "adding answered {}", added.status());
    loop {
        if Instant::now() > crowd.deadline {
            crowd.tally.gave_up.fetch_add(1, Ordering::Relaxed);
            return Ok(());
        }
        let basket = timed(crowd, "basket", client.get(format!("{}/basket", o.shop))).await?;
        let basket = basket.text().await?;
        let key = form_field(&basket, "checkout_key").context("no checkout form")?;
        // a shop that does not send the lines back (an older build) reads
        // the basket itself
        let lines = form_field(&basket, "lines").unwrap_or_default();
        let started = Instant::now();
        let answer = client
            .post(format!("{}/checkout", o.shop))
            .form(&[
                ("checkout_key", key.as_str()),
                ("lines", lines.as_str()),
                ("name", "Crowd Shopper"),
                ("email", &format!("crowd-{n}@example.com")),
            ])
            .send()
            .await?;
        let took = started.elapsed();
        match answer.status().as_u16() {
            303 => {
                crowd.timings.add("checkout granted", took);
                let page = location(&answer)?;
                return pay(crowd, &client, &page).await;
            }
            409 => {
                crowd.timings.add("checkout refused", took);
                answer.bytes().await?;
            }
            other => anyhow::bail!("checkout answered {other}"),
        }
        // wait a moment, look again; stop once nothing is left or pending
        let pause = rand::thread_rng().gen_range(200..700);
        tokio::time::sleep(Duration::from_millis(pause)).await;
        if crowd.over.load(Ordering::Relaxed) || poll(crowd, &client).await? == (0, 0) {
            crowd.over.store(true, Ordering::Relaxed);
            crowd.tally.gave_up.fetch_add(1, Ordering::Relaxed);
            return Ok(());
        }
    }
}

/// On the sandbox's hosted page: pay and follow the way back, or leave.
async fn pay(crowd: &Crowd, client: &reqwest::Client, page: &str) -> anyhow::Result<()> {
    let leave = rand::thread_rng().gen_bool(crowd.options.abandon);
    let action = if leave { "abandon" } else { "pay" };
    let answer = timed(
        crowd,
        "pay at the sandbox",
        client.post(format!("{page}/{action}")),
    )
    .await?;
    anyhow::ensure!(
        answer.status() == 303,
        "the sandbox answered {} to {action}",
        answer.status()
    );
    let back = location(&answer)?;
    if leave {
        // "Leave checkout?" then the button
        timed(crowd, "return", client.get(&back))
            .await?
            .bytes()
            .await?;
        let left = timed(crowd, "return", client.post(&back)).await?;
        anyhow::ensure!(
            left.status().is_success() || left.status().is_redirection(),
            "leaving answered {}",
            left.status()
        );
        crowd.tally.abandoned.fetch_add(1, Ordering::Relaxed);
        return Ok(());
    }
    crowd.tally.paid.fetch_add(1, Ordering::Relaxed);
    let returned = timed(crowd, "return", client.get(&back)).await?;
    anyhow::ensure!(
        returned.status().is_success() || returned.status().is_redirection(),
        "the return answered {}",
        returned.status()
    );
    Ok(())
}

/// The payment burst on one tier: grants, then confirmations.
#[derive(Debug, Serialize)]
pub struct BurstReport {
    pub orders: usize,
    pub concurrency: usize,
    /// Checkouts started (each reached a payment page) per second.
    pub grants_per_second: f64,
    /// Orders paid per second, from the first payment to the last order
    /// confirmed (by its webhook or its shopper's return).
    pub confirmations_per_second: f64,
    /// Payments the sandbox took per second (it sends each webhook as it
    /// takes the payment), each with its shopper's return if `returns`:
    /// the most the shop could confirm.
    pub payments_per_second: f64,
    /// Whether the shoppers came back to the shop after paying.
    pub returns: bool,
    pub paid: i64,
    pub drifting_resources: i64,
}

impl BurstReport {
    pub fn lines(&self) -> String {
        format!(
            "payment burst, {} orders on one tier, {} at a time: {:.0} grants/s, then {:.0} confirmations/s ({:.2} of the grant rate) while the sandbox took {:.0} payments/s{}; {} paid, resources with drift {}",
            self.orders,
            self.concurrency,
            self.grants_per_second,
            self.confirmations_per_second,
            self.confirmations_per_second / self.grants_per_second,
            self.payments_per_second,
            if self.returns {
                " (each shopper coming back)"
            } else {
                ""
            },
            self.paid,
            self.drifting_resources
        )
    }
}

/// `options.shoppers` shoppers check out the product, `concurrency` at a
/// time; then they all pay at the sandbox, `concurrency` at a time, and
/// the webhooks confirm, with the shoppers' returns if `returns`.
pub async fn burst(pool: PgPool, options: FlashOptions) -> anyhow::Result<BurstReport> {
    let o = &options;
    let paid_before: i64 = sqlx::query_scalar("select count(*) from orders where state = 'paid'")
        .fetch_one(&pool)
        .await?;
    let gate = Arc::new(tokio::sync::Semaphore::new(o.concurrency));
    let started = Instant::now();
    let mut starts = Vec::with_capacity(o.shoppers);
    for n in 0..o.shoppers {
        let (gate, o) = (gate.clone(), options.clone());
        starts.push(tokio::spawn(async move {
            let _turn = gate.acquire_owned().await.expect("never closed");
            let client = builder().cookie_store(true).build()?;
            let added = client
                .post(format!("{}/basket/add", o.shop))
                .form(&[("product_id", o.product.as_str()), ("qty", "1")])
                .send()
                .await?;
            anyhow::ensure!(added.status() == 303, "adding answered {}", added.status());
            let basket = client
                .get(format!("{}/basket", o.shop))
                .send()
                .await?
                .text()
                .await?;
            let key = form_field(&basket, "checkout_key").context("no checkout form")?;
            let lines = form_field(&basket, "lines").unwrap_or_default();
            let answer = client
                .post(format!("{}/checkout", o.shop))
                .form(&[
                    ("checkout_key", key.as_str()),
                    ("lines", lines.as_str()),
                    ("name", "Burst Shopper"),
                    ("email", &format!("burst-{n}@example.com")),
                ])
                .send()
                .await?;
            anyhow::ensure!(
                answer.status() == 303,
                "checkout answered {}",
                answer.status()
            );
            Ok((client, location(&answer)?))
        }));
    }
    let mut pages = Vec::with_capacity(o.shoppers);
    for start in starts {
        pages.push(start.await??);
    }
    let grants = o.shoppers as f64 / started.elapsed().as_secs_f64();

    let started = Instant::now();
    let mut payments = Vec::with_capacity(o.shoppers);
    for (client, page) in pages {
        let (gate, returns) = (gate.clone(), o.returns);
        payments.push(tokio::spawn(async move {
            let _turn = gate.acquire_owned().await.expect("never closed");
            let paid = client.post(format!("{page}/pay")).send().await?;
            anyhow::ensure!(
                paid.status() == 303,
                "the sandbox answered {}",
                paid.status()
            );
            if returns {
                let back = client.get(location(&paid)?).send().await?;
                anyhow::ensure!(
                    back.status() == 303,
                    "the return answered {}",
                    back.status()
                );
            }
            Ok(())
        }));
    }
    for payment in payments {
        payment.await??;
    }
    let payments_per_second = o.shoppers as f64 / started.elapsed().as_secs_f64();
    let target = paid_before + o.shoppers as i64;
    let paid = loop {
        let paid: i64 = sqlx::query_scalar("select count(*) from orders where state = 'paid'")
            .fetch_one(&pool)
            .await?;
        if paid >= target || Instant::now() > started + o.limit {
            break paid;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let confirmations = (paid - paid_before) as f64 / started.elapsed().as_secs_f64();
    let drifting: i64 = sqlx::query_scalar("select count(*) from hf_check() where drift")
        .fetch_one(&pool)
        .await?;
    Ok(BurstReport {
        orders: o.shoppers,
        concurrency: o.concurrency,
        grants_per_second: grants,
        confirmations_per_second: confirmations,
        payments_per_second,
        returns: o.returns,
        paid: paid - paid_before,
        drifting_resources: drifting,
    })
}
