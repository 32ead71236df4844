//! The two choosers of the best seats agree (issue 45): a batch of
//! checkouts chooses its best-available lines in memory
//! (`src/catalogue/kinds/seats/best.rs`), the waiting list's offers ask
//! the database (`hf_seat_choose`, `hf_seat_best`). On a hall with seats
//! blocked at random, both are asked for the same lines one after
//! another, each around the seats chosen before it, together or not, with
//! either chooser of the section and splits sold or not: every answer must
//! be the same, the seats chosen, the split offered or sold when no
//! stretch holds them, or sold out. Where the
//! batch's choice no longer holds (a checkout before refused, seats named
//! beside it), `hf_start_checkouts` chooses as before.

use holdfast::catalogue::seats::{Chosen, FreeSeats, Pick};
use serde_json::{Value, json};

use crate::seats::hall_in;
use holdfast_testkit::*;

/// A small generator of its own: the same halls (and, in
/// `tables_memory.rs`, rooms) on every run.
pub(crate) struct Lcg(pub(crate) u64);

impl Lcg {
    pub(crate) fn next(&mut self, below: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % below
    }
}

/// The database's choice of the best `qty` seats (`together` or not)
/// around `exclude`, in the words of [`Pick`] (`None`: sold out), and
/// whether it sold a split.
async fn database_choice(
    db: &TestDb,
    qty: i32,
    together: bool,
    exclude: &[String],
) -> (Option<Pick>, bool) {
    type Row = (
        String,
        Option<Vec<String>>,
        Option<serde_json::Value>,
        Option<bool>,
    );
    let (status, labels, offers, split_allowed): Row = sqlx::query_as(
        "select c.status, c.labels, c.offers, c.split_allowed \
               from hf_seat_choose('hall-stalls', null, $1, $3, \
                      (select coalesce(array_agg(id), '{}') from seats \
                        where section = 'hall-stalls' and label = any ($2))) c",
    )
    .bind(qty)
    .bind(exclude)
    .bind(together)
    .fetch_one(&db.pool)
    .await
    .unwrap();
    let pick = match status.as_str() {
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
    };
    (pick, status == "chosen" && split_allowed == Some(true))
}

#[tokio::test]
async fn chooser_agrees_with_the_database() {
    let db = TestDb::new().await;
    // 16 rows: the third band of rows (13 to 28) is looked at too
    hall_in(&db.pool, 16).await;
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
        // every other hall's shop sells a group its seats apart
        sqlx::query("update seating_settings set splits = $1")
            .bind(hall % 2 == 1)
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
            let together = rng.next(3) != 0;
            let mine = match free.choose("hall-stalls", qty, together) {
                Some(Pick::Seats(chosen)) => Some(Pick::Seats(Chosen {
                    ids: Vec::new(),
                    labels: chosen.labels,
                })),
                other => other,
            };
            let (theirs, split_sold) = database_choice(&db, qty as i32, together, &chosen).await;
            assert_eq!(
                mine, theirs,
                "hall {hall} ({chooser}, {share} % blocked), {qty} seats after {chosen:?}"
            );
            compared += 1;
            if split_sold {
                *seen.entry("split sold").or_insert(0) += 1;
            }
            // rows M to P (13 to 16): the third band
            if let Some(Pick::Seats(seats)) = &mine
                && seats
                    .labels
                    .iter()
                    .any(|l| ('M'..='P').contains(&l.chars().next().unwrap()))
            {
                *seen.entry("third band").or_insert(0) += 1;
            }
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
        ["chosen", "apart", "sold out", "split sold", "third band"]
            .iter()
            .all(|k| seen.get(k).is_some_and(|n| *n >= 5)),
        "{seen:?}"
    );
}

/// One checkout of `qty` seats of the hall as `hf_start_checkouts` takes
/// it, with what the batch decided for its line (`chosen` and `seats`, or
/// `apart`), and `extra` lines beside it.
fn checkout(key: &str, qty: i64, decided: Value, extra: Vec<Value>) -> Value {
    let mut line = json!({
        "product": "hall-stalls", "name": "Stalls", "qty": qty, "unit_price": 4000,
        "resource": "hall-stalls", "claim": "seats", "seats": null, "together": true,
    });
    for (field, value) in decided.as_object().unwrap() {
        line[field] = value.clone();
    }
    let mut lines = vec![line];
    lines.extend(extra);
    json!({
        "key": key, "account": format!("basket:{key}"), "token": format!("t-{key}"),
        "name": "Ada Shopper", "email": "ada@example.com", "currency": "eur",
        "provider": "stripe", "lines": lines, "uses": [],
    })
}

async fn ids(db: &TestDb, labels: &[&str]) -> Vec<i64> {
    sqlx::query_scalar(
        "select id from seats where section = 'hall-stalls' and label = any ($1) \
          order by row_rank, run, pos",
    )
    .bind(labels)
    .fetch_all(&db.pool)
    .await
    .unwrap()
}

/// Each checkout's word and the seats its order holds.
async fn started(db: &TestDb, batch: Vec<Value>) -> Vec<(String, Vec<String>)> {
    started_by(db, "hf_start_checkouts", batch)
        .await
        .into_iter()
        .map(|(word, seats, _)| (word, seats))
        .collect()
}

/// [`started`] by `function`, with each answer's detail.
async fn started_by(
    db: &TestDb,
    function: &str,
    batch: Vec<Value>,
) -> Vec<(String, Vec<String>, Option<Value>)> {
    let rows: Vec<(String, Option<uuid::Uuid>, Option<Value>)> = sqlx::query_as(&format!(
        "select status, order_id, detail from {function}($1)"
    ))
    .bind(Value::Array(batch))
    .fetch_all(&db.pool)
    .await
    .unwrap();
    let mut out = Vec::new();
    for (status, order, detail) in rows {
        let seats: Vec<String> = sqlx::query_scalar(
            "select s.label from orders o join holds h on h.purchase_id = o.hold_id \
               join seat_pins p on p.hold_id = h.id and p.live join seats s on s.id = p.seat_id \
              where o.id = $1 order by s.row_rank, s.run, s.pos",
        )
        .bind(order)
        .fetch_all(&db.pool)
        .await
        .unwrap();
        out.push((status, seats, detail));
    }
    out
}

#[tokio::test]
async fn where_the_batchs_choice_no_longer_holds_the_database_chooses_as_before() {
    let db = TestDb::new().await;
    hall_in(&db.pool, 1).await;
    // row A: A-1..A-10, an aisle, A-11..A-20

    // A shopper named on the map; the batch, which does not
    // choose named seats, chose the same two for the next line: that line
    // is chosen again around them, and nobody's call fails.
    let batch = vec![
        checkout("named", 2, json!({"seats": ["A-5", "A-6"]}), vec![]),
        checkout(
            "best",
            2,
            json!({"seats": ["A-5", "A-6"], "chosen": ids(&db, &["A-5", "A-6"]).await}),
            vec![],
        ),
    ];
    let answers = started(&db, batch).await;
    assert_eq!(
        answers[0],
        ("started".into(), vec!["A-5".into(), "A-6".into()])
    );
    assert_eq!(answers[1].0, "started");
    assert_eq!(answers[1].1.len(), 2);
    assert!(
        !answers[1].1.iter().any(|s| s == "A-5" || s == "A-6"),
        "{answers:?}"
    );

    // A checkout the batch chose for is refused (its other line's
    // product is unknown); the next line, told by the batch that no stretch
    // holds 3, is chosen again: A-1..A-3 are free, and it gets three
    // together.
    let batch = vec![
        checkout(
            "refused",
            2,
            json!({"seats": ["A-1", "A-2"], "chosen": ids(&db, &["A-1", "A-2"]).await}),
            vec![
                json!({"product": "nothing", "name": "Nothing", "qty": 1, "unit_price": 0,
                        "resource": "no-such-resource", "claim": "units"}),
            ],
        ),
        checkout(
            "after",
            3,
            json!({"apart": {"offers": [["A-1", "A-11", "A-20"]], "split_allowed": false}}),
            vec![],
        ),
    ];
    let answers = started(&db, batch).await;
    assert_eq!(answers[0], ("unknown_products".into(), vec![]));
    assert_eq!(answers[1].0, "started", "{answers:?}");
    assert_eq!(answers[1].1.len(), 3);

    // while the choice holds, the batch's word is taken as it is
    let batch = vec![checkout(
        "trusted",
        2,
        json!({"apart": {"offers": [["A-19", "A-20"]], "split_allowed": false}}),
        vec![],
    )];
    let answers = started(&db, batch).await;
    assert_eq!(answers[0], ("not_together".into(), vec![]));
    assert_eq!(crate::seats::books(&db).await, (7, 7, false));
}

#[tokio::test]
async fn seats_chosen_ahead_of_the_locks_are_checked_under_them_and_chosen_again_when_gone() {
    let db = TestDb::new().await;
    hall_in(&db.pool, 1).await;
    // row A: A-1..A-10, an aisle, A-11..A-20; are sold, A-20
    // is kept for a wheelchair
    let answers = started(
        &db,
        vec![checkout(
            "earlier",
            2,
            json!({"seats": ["A-5", "A-6"]}),
            vec![],
        )],
    )
    .await;
    assert_eq!(answers[0].0, "started");
    sqlx::query(
        "update seats set access = 'wheelchair' where section = 'hall-stalls' and label = 'A-20'",
    )
    .execute(&db.pool)
    .await
    .unwrap();

    let chosen = |labels: &[&str], ids: Vec<i64>| json!({"seats": labels, "chosen": ids});
    const AHEAD: &str = "hf_start_checkouts_chosen";
    // every started checkout says the seats it was given (the next choice
    // from memory leaves them), whoever chose them
    async fn said_as_given(db: &TestDb, seats: &[String], detail: &Option<Value>) {
        let pinned: Vec<i64> =
            serde_json::from_value(detail.as_ref().unwrap()["pinned"]["hall-stalls"].clone())
                .unwrap();
        let labels: Vec<&str> = seats.iter().map(String::as_str).collect();
        let mut given = ids(db, &labels).await;
        given.sort_unstable();
        assert_eq!(pinned, given, "{detail:?}");
    }

    // chosen ahead and still free: taken as they are (A-12, A-13, though
    // the database's chooser would not strand A-11)
    let ahead = ids(&db, &["A-12", "A-13"]).await;
    let answers = started_by(
        &db,
        AHEAD,
        vec![checkout(
            "kept",
            2,
            chosen(&["A-12", "A-13"], ahead),
            vec![],
        )],
    )
    .await;
    assert_eq!(answers[0].0, "started");
    assert_eq!(answers[0].1, ["A-12", "A-13"]);
    said_as_given(&db, &answers[0].1, &answers[0].2).await;

    // each way a chosen seat can be gone, first in a call of its own: sold
    // a moment ago, kept for a wheelchair, not there. The line is chosen
    // by the database, never given that seat, and nobody's call fails.
    let cases = [
        ("sold", vec!["A-5", "A-6"], ids(&db, &["A-5", "A-6"]).await),
        (
            "access",
            vec!["A-19", "A-20"],
            ids(&db, &["A-19", "A-20"]).await,
        ),
        ("gone", vec!["A-99"], vec![999_999_999_999]),
    ];
    for (key, labels, seat_ids) in cases {
        let qty = labels.len() as i64;
        let answers = started_by(
            &db,
            AHEAD,
            vec![checkout(key, qty, chosen(&labels, seat_ids), vec![])],
        )
        .await;
        assert_eq!(answers[0].0, "started", "{key}: {answers:?}");
        assert_eq!(answers[0].1.len() as i64, qty, "{key}: {answers:?}");
        assert!(
            !answers[0]
                .1
                .iter()
                .any(|s| ["A-5", "A-6", "A-12", "A-13", "A-20"].contains(&s.as_str())),
            "{key}: {answers:?}"
        );
        said_as_given(&db, &answers[0].1, &answers[0].2).await;
    }

    // a line chosen again, then one whose choice still holds: the second
    // is decided after the first's (its section diverged), and each says
    // what it was really given
    let free_pair: Vec<String> = sqlx::query_scalar(
        "select s.label from seats s where s.section = 'hall-stalls' and s.access = 'none' \
            and not exists (select 1 from seat_pins p where p.seat_id = s.id and p.live) \
          order by s.row_rank, s.run, s.pos desc limit 2",
    )
    .fetch_all(&db.pool)
    .await
    .unwrap();
    let mut pair: Vec<&str> = free_pair.iter().map(String::as_str).collect();
    pair.reverse();
    let batch = vec![
        checkout(
            "sold-again",
            2,
            chosen(&["A-5", "A-6"], ids(&db, &["A-5", "A-6"]).await),
            vec![],
        ),
        checkout("after", 2, chosen(&pair, ids(&db, &pair).await), vec![]),
    ];
    let answers = started_by(&db, AHEAD, batch).await;
    for (word, seats, detail) in &answers {
        assert_eq!(word, "started", "{answers:?}");
        said_as_given(&db, seats, detail).await;
    }
    let mut given: Vec<String> = sqlx::query_scalar(
        "select s.label from seat_pins p join seats s on s.id = p.seat_id where p.live",
    )
    .fetch_all(&db.pool)
    .await
    .unwrap();
    let pinned = given.len();
    given.sort();
    given.dedup();
    assert_eq!((pinned, given.len()), (13, 13), "no seat given twice");
    assert_eq!(crate::seats::books(&db).await, (13, 13, false));

    // a chosen seat that is no seat id is the application's mistake, said
    // so, and nothing is held
    let bad = checkout(
        "bad",
        1,
        json!({"seats": ["A-1"], "chosen": ["A-1"]}),
        vec![],
    );
    let refused = sqlx::query("select * from hf_start_checkouts_chosen($1)")
        .bind(Value::Array(vec![bad]))
        .execute(&db.pool)
        .await
        .unwrap_err();
    assert!(
        refused.to_string().contains("chosen seats are seat ids"),
        "{refused}"
    );
    assert_eq!(crate::seats::books(&db).await, (13, 13, false));

    // the call says what hf_start_checkouts says of what is no list
    let refused = sqlx::query("select * from hf_start_checkouts_chosen('{}'::jsonb)")
        .execute(&db.pool)
        .await
        .unwrap_err();
    assert_eq!(
        refused
            .as_database_error()
            .and_then(|e| e.code())
            .as_deref(),
        Some("22023"),
        "{refused}"
    );
}
