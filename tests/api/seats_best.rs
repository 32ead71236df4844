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

    // memory chose from what it knew: A-12, A-13 (free: taken as they are,
    // though the database's chooser would not strand A-11), then
    // (sold a moment ago), A-19, A-20 (A-20 is for a wheelchair) and a
    // seat that is not there
    let chosen = |labels: &[&str], ids: Vec<i64>| json!({"seats": labels, "chosen": ids});
    let batch = vec![
        checkout(
            "kept",
            2,
            chosen(&["A-12", "A-13"], ids(&db, &["A-12", "A-13"]).await),
            vec![],
        ),
        checkout(
            "sold",
            2,
            chosen(&["A-5", "A-6"], ids(&db, &["A-5", "A-6"]).await),
            vec![],
        ),
        checkout(
            "access",
            2,
            chosen(&["A-19", "A-20"], ids(&db, &["A-19", "A-20"]).await),
            vec![],
        ),
        checkout("gone", 1, chosen(&["A-99"], vec![i64::MAX]), vec![]),
    ];
    let with_detail = started_by(&db, "hf_start_checkouts_chosen", batch).await;
    // each checkout whose seats the call chose itself says which (the next
    // choice from memory leaves them); one chosen ahead says nothing
    assert_eq!(
        with_detail[0].2.as_ref().and_then(|d| d.get("pinned")),
        None
    );
    for (_, seats, detail) in &with_detail[1..] {
        let pinned: Vec<i64> =
            serde_json::from_value(detail.as_ref().unwrap()["pinned"]["hall-stalls"].clone())
                .unwrap();
        let labels: Vec<&str> = seats.iter().map(String::as_str).collect();
        let mut expected = ids(&db, &labels).await;
        expected.sort_unstable();
        assert_eq!(pinned, expected, "{detail:?}");
    }
    let answers: Vec<(String, Vec<String>)> =
        with_detail.into_iter().map(|(w, s, _)| (w, s)).collect();
    assert_eq!(
        answers[0],
        ("started".into(), vec!["A-12".into(), "A-13".into()])
    );
    let mut given: Vec<&String> = answers.iter().flat_map(|(_, seats)| seats).collect();
    for (word, seats) in &answers[1..] {
        assert_eq!(word, "started", "{answers:?}");
        assert!(
            !seats
                .iter()
                .any(|s| ["A-5", "A-6", "A-20", "A-99"].contains(&s.as_str())),
            "{answers:?}"
        );
    }
    assert_eq!(
        answers.iter().map(|(_, s)| s.len()).collect::<Vec<_>>(),
        [2, 2, 2, 1]
    );
    given.sort();
    given.dedup();
    assert_eq!(given.len(), 7, "no seat given twice: {answers:?}");
    assert_eq!(crate::seats::books(&db).await, (9, 9, false));

    // a group memory found no stretch for is offered the split memory
    // found, and told whether the shop sells splits as it says now
    sqlx::query("update seating_settings set splits = true")
        .execute(&db.pool)
        .await
        .unwrap();
    let offer =
        json!({"apart": {"offers": [["A-1", "A-2", "A-3", "A-4", "A-7"]], "split_allowed": false}});
    let answers = started_by(
        &db,
        "hf_start_checkouts_chosen",
        vec![checkout("group", 5, offer, vec![])],
    )
    .await;
    assert_eq!(answers[0].0, "not_together", "{answers:?}");
    let detail = answers[0].2.as_ref().unwrap();
    assert_eq!(detail["split_allowed"], true, "{detail}");
    assert_eq!(
        detail["offers"],
        json!([["A-1", "A-2", "A-3", "A-4", "A-7"]])
    );

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
