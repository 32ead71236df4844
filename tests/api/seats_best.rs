//! The two choosers of the best seats agree (issue 45): a batch of
//! checkouts chooses its best-available lines in memory
//! (`src/catalogue/kinds/seats/best.rs`), the waiting list's offers ask
//! the database (`hf_seat_choose`, `hf_seat_best`). On a hall with seats
//! blocked at random, both are asked for the same lines one after
//! another, each around the seats chosen before it, with either chooser
//! of the section: every answer must be the same, the seats chosen, the
//! split offered when no stretch holds them, or sold out.

use holdfast::catalogue::seats::{Chosen, FreeSeats, Pick};

use crate::seats::hall_in;
use holdfast_testkit::*;

/// A small generator of its own: the same halls on every run.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, below: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % below
    }
}

/// The database's choice of the best `qty` seats together around
/// `exclude`, in the words of [`Pick`] (`None`: sold out).
async fn database_choice(db: &TestDb, qty: i32, exclude: &[String]) -> Option<Pick> {
    type Row = (
        String,
        Option<Vec<String>>,
        Option<serde_json::Value>,
        Option<bool>,
    );
    let (status, labels, offers, split_allowed): Row = sqlx::query_as(
        "select c.status, c.labels, c.offers, c.split_allowed \
               from hf_seat_choose('hall-stalls', null, $1, true, \
                      (select coalesce(array_agg(id), '{}') from seats \
                        where section = 'hall-stalls' and label = any ($2))) c",
    )
    .bind(qty)
    .bind(exclude)
    .fetch_one(&db.pool)
    .await
    .unwrap();
    match status.as_str() {
        "chosen" => Some(Pick::Seats(Chosen {
            ids: Vec::new(),
            labels: labels.unwrap(),
        })),
        "not_together" => Some(Pick::Apart {
            offer: serde_json::from_value(offers.unwrap()[0].clone()).unwrap(),
            split_allowed: split_allowed.unwrap(),
        }),
        "sold_out" => None,
        other => panic!("the database chose {other}"),
    }
}

#[tokio::test]
async fn chooser_agrees_with_the_database() {
    let db = TestDb::new().await;
    hall_in(&db.pool, 8).await;
    let mut rng = Lcg(45);
    let mut compared = 0;
    let mut seen = std::collections::BTreeMap::new();
    for hall in 0..24 {
        let chooser = if hall % 4 == 3 { "first_fit" } else { "best" };
        // every seat open again, then a share of them (15 % to 97 %) blocked
        let share = [15, 35, 55, 75, 90, 97][hall % 6];
        let blocked: Vec<String> = sqlx::query_scalar::<_, String>(
            "select label from seats where section = 'hall-stalls' order by id",
        )
        .fetch_all(&db.pool)
        .await
        .unwrap()
        .into_iter()
        .filter(|_| rng.next(100) < share)
        .collect();
        sqlx::query(
            "update seats set state = case when label = any ($1) then 'blocked' else 'open' end \
              where section = 'hall-stalls'",
        )
        .bind(&blocked)
        .execute(&db.pool)
        .await
        .unwrap();
        // the section's units are its open seats (hf_seat_choose counts them)
        sqlx::query(
            "update resources set total = (select count(*) from seats \
                                            where section = 'hall-stalls' and state = 'open') \
              where id = 'hall-stalls'",
        )
        .execute(&db.pool)
        .await
        .unwrap();
        sqlx::query("update seat_sections set chooser = $1 where product_id = 'hall-stalls'")
            .bind(chooser)
            .execute(&db.pool)
            .await
            .unwrap();

        let mut tx = db.pool.begin().await.unwrap();
        let mut free = FreeSeats::read(&mut tx, &[], &["hall-stalls"])
            .await
            .unwrap();
        tx.rollback().await.unwrap();
        let mut chosen: Vec<String> = Vec::new();
        for _ in 0..12 {
            let qty = 1 + rng.next(6) as usize;
            let mine = match free.choose("hall-stalls", qty, true) {
                Some(Pick::Seats(chosen)) => Some(Pick::Seats(Chosen {
                    ids: Vec::new(),
                    labels: chosen.labels,
                })),
                other => other,
            };
            let theirs = database_choice(&db, qty as i32, &chosen).await;
            assert_eq!(
                mine, theirs,
                "hall {hall} ({chooser}, {share} % blocked), {qty} seats after {chosen:?}"
            );
            compared += 1;
            *seen
                .entry(match &mine {
                    Some(Pick::Seats(_)) => "chosen",
                    Some(Pick::Apart { .. }) => "apart",
                    None => "sold out",
                })
                .or_insert(0) += 1;
            if let Some(Pick::Seats(seats)) = mine {
                chosen.extend(seats.labels);
            }
        }
    }
    assert_eq!(compared, 24 * 12);
    // every answer was met, often enough to mean something
    assert!(
        ["chosen", "apart", "sold out"]
            .iter()
            .all(|k| seen.get(k).is_some_and(|n| *n >= 10)),
        "{seen:?}"
    );
}
