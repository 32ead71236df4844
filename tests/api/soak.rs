//! A soak: every operation interleaved across twelve resources from several
//! workers for several seconds. No deadlock, no error, no drift.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use holdfast::inventory::{
    Basket, BasketLine, BasketOutcome, BasketRequest, ConfirmOutcome, HoldId, HoldOutcome,
    PaymentRef,
};
use holdfast::worker::Sweeper;

use holdfast_testkit::*;

/// A small deterministic generator, so a failing run can be replayed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_five_second_soak_of_every_operation_leaves_no_drift_and_no_deadlock() {
    let db = TestDb::with_connections(24).await;
    let inventory = db.inventory();
    fast_clock(&inventory, 0.4, 0.9).await;
    let mut resources = Vec::new();
    for i in 0..12 {
        resources.push(resource(&inventory, &format!("soak-{i:02}"), 15).await);
    }

    let run_for = Duration::from_secs(5);
    let started = Instant::now();
    let workers: Vec<_> = (0..8u64)
        .map(|worker| {
            let (inventory, resources) = (inventory.clone(), resources.clone());
            tokio::spawn(async move {
                let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ (worker + 1).wrapping_mul(0x2545_f491));
                let mut mine: Vec<HoldId> = Vec::new();
                let mut counts: HashMap<&'static str, u64> = HashMap::new();
                let sweeper = Sweeper::new(inventory.clone(), format!("sweeper:soak-{worker}"));
                while started.elapsed() < run_for {
                    let pick = |rng: &mut Rng| resources[rng.below(12) as usize].clone();
                    let who = format!("w{worker}-{}", rng.below(5));
                    let op = rng.below(100);
                    let kind = if op < 30 {
                        let mut request = request(&pick(&mut rng), 1 + rng.below(3) as i64, &who);
                        if rng.below(4) == 0 {
                            request.ttl = Some(ttl(0.2));
                        }
                        match inventory.hold(&request).await.expect("hold") {
                            HoldOutcome::Held { hold, .. } => {
                                mine.push(hold.id);
                                "held"
                            }
                            _ => "hold_refused",
                        }
                    } else if op < 45 {
                        let lines = (0..2 + rng.below(2))
                            .map(|_| BasketLine {
                                resource: pick(&mut rng),
                                qty: qty(1),
                            })
                            .collect();
                        let request = BasketRequest {
                            basket: Basket::parse(lines).unwrap(),
                            account: account(&who),
                            idempotency_key: None,
                            ttl: None,
                        };
                        match inventory.hold_basket(&request).await.expect("basket") {
                            BasketOutcome::Held { basket_id, .. } => {
                                mine.push(basket_id);
                                "basket_held"
                            }
                            _ => "basket_refused",
                        }
                    } else if op < 60 && !mine.is_empty() {
                        let id = mine[rng.below(mine.len() as u64) as usize];
                        inventory
                            .begin_payment(id, None)
                            .await
                            .expect("begin payment");
                        "begin_payment"
                    } else if op < 75 && !mine.is_empty() {
                        let id = mine[rng.below(mine.len() as u64) as usize];
                        // now and then reuse a reference to provoke in-use
                        let reference = format!("pi-{worker}-{}", rng.below(40));
                        match inventory
                            .confirm(id, &PaymentRef::parse(&reference).unwrap())
                            .await
                            .expect("confirm")
                        {
                            ConfirmOutcome::Confirmed { .. } => "confirmed",
                            _ => "confirm_other",
                        }
                    } else if op < 85 && !mine.is_empty() {
                        let id = mine.swap_remove(rng.below(mine.len() as u64) as usize);
                        inventory
                            .release(id, "soak", "shopper")
                            .await
                            .expect("release");
                        "release"
                    } else if op < 93 && !mine.is_empty() {
                        let id = mine[rng.below(mine.len() as u64) as usize];
                        inventory.extend(id, None).await.expect("extend");
                        "extend"
                    } else {
                        sweeper.run_once().await.expect("sweep");
                        "sweep"
                    };
                    *counts.entry(kind).or_default() += 1;
                    if mine.len() > 50 {
                        mine.drain(..25);
                    }
                }
                counts
            })
        })
        .collect();

    let mut totals: HashMap<&'static str, u64> = HashMap::new();
    for worker in workers {
        for (kind, n) in worker.await.expect("a worker failed") {
            *totals.entry(kind).or_default() += n;
        }
    }
    let operations: u64 = totals.values().sum();
    assert!(operations > 500, "the soak barely ran: {totals:?}");
    for kind in [
        "held",
        "basket_held",
        "begin_payment",
        "confirmed",
        "release",
        "extend",
        "sweep",
    ] {
        assert!(
            totals.get(kind).copied().unwrap_or(0) > 0,
            "no {kind} in {totals:?}"
        );
    }
    let expired: i64 = sqlx::query_scalar("select count(*) from holds where state = 'expired'")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert!(expired > 0, "nothing expired during the soak");
    assert_no_drift(&inventory).await;
    eprintln!("soak: {operations} operations {totals:?}, {expired} expired");
}
