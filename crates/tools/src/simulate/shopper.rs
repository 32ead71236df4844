//! The shoppers of one lane, a few at a time, each step chosen by the seed:
//! into the basket, through checkout, then on the provider's page what
//! their behaviour says (pay, decline, leave, wait for a bank …), while
//! the worker's outbox runs as a running worker would get to it.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::Context;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use holdfast::payments::ProviderKind as Provider;
use holdfast::worker::outbox::Outbox;

use super::behaviour::Behaviour;
use super::checkout::{Started, press, start_checkout};
use super::closing::run_out;
use super::parties::{bank_answers, finish_refunds, pay_elsewhere, staff_refund, underpay};
use super::{SimulateOptions, World};
use crate::browser::ShopSend;

/// What one lane's shoppers did: their behaviours, and the checkouts that
/// reached a payment page or were refused.
#[derive(Debug, Default)]
pub(super) struct LaneReport {
    pub(super) behaviours: BTreeMap<String, u64>,
    pub(super) started: u64,
    pub(super) refused: u64,
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

/// Shoppers of one lane, a few at a time, each step chosen by the seed.
pub(super) async fn run_lane(
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
                let started = start_checkout(world, &shopper.client, shopper.provider).await?;
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
