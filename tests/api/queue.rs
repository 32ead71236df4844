//! The drop queue against a real PostgreSQL and the real binary: a
//! 5,000-entry draw recomputed from the published seed and list by an
//! independent HMAC here, by `holdfast queue verify` over HTTP, and
//! matched against what was admitted; a tampered order caught; nobody
//! buying around the queue before or at the opening; arrivals after the
//! draw at the back of the line.

use hmac::{Hmac, Mac};
use holdfast::checkout::{self, StartOutcome};
use holdfast::payments::ProviderKind;
use holdfast::queue;
use holdfast::waitlist::{self, JoinRequest};
use holdfast_testkit::engine::{assert_no_drift, held_and_sold, start};
use holdfast_testkit::*;
use serde_json::Value;
use sha2::{Digest, Sha256};
use uuid::Uuid;

const PRODUCT: &str = "wild-honey";

fn holdfast(db: &TestDb, args: &[&str]) -> std::process::Output {
    run_command(env!("CARGO_BIN_EXE_holdfast"), db, args)
}

/// The product with `total` units, its sale opening in an hour, its queue
/// on: the resource and the commitment.
async fn queued(db: &TestDb, total: i32) -> (String, String) {
    db.load_demo().await;
    let resource: String = sqlx::query_scalar(
        "update products set sale_opens_at = now() + interval '1 hour' where id = $1 \
         returning resource_id",
    )
    .bind(PRODUCT)
    .fetch_one(&db.pool)
    .await
    .unwrap();
    sqlx::query("select hf_upsert_resource($1, $2)")
        .bind(&resource)
        .bind(total)
        .execute(&db.pool)
        .await
        .unwrap();
    let output = holdfast(db, &["--json", "queue", "on", PRODUCT]);
    let commitment = json_output(&output)["commitment"]
        .as_str()
        .unwrap()
        .to_owned();
    (resource, commitment)
}

/// The sale opens now.
async fn open(db: &TestDb) {
    sqlx::query("update products set sale_opens_at = now() - interval '1 second' where id = $1")
        .bind(PRODUCT)
        .execute(&db.pool)
        .await
        .unwrap();
}

async fn join_and_confirm(db: &TestDb, email: &str, qty: i64) -> Uuid {
    waitlist::join(
        &db.pool,
        &JoinRequest {
            product_id: PRODUCT.into(),
            name: "Queued".into(),
            email: email.into(),
            qty,
            provider: ProviderKind::Stripe,
            address: None,
        },
    )
    .await
    .unwrap();
    let (id, token): (Uuid, String) =
        sqlx::query_as("select id, token from waitlist_entries where email = $1")
            .bind(email)
            .fetch_one(&db.pool)
            .await
            .unwrap();
    waitlist::confirm(&db.pool, &token).await.unwrap();
    id
}

async fn held_for_line(db: &TestDb, resource: &str) -> (i64, i64) {
    sqlx::query_as(
        "select coalesce(sum(qty) filter (where account_id like 'waitlist:%'), 0)::bigint, \
                coalesce(sum(qty) filter (where account_id = 'waitlist-line'), 0)::bigint \
           from holds where resource_id = $1 and state in ('held', 'awaiting_payment')",
    )
    .bind(resource)
    .fetch_one(&db.pool)
    .await
    .unwrap()
}

/// The order a seed gives, computed here without Holdfast's code.
fn independent_order(seed: &[u8], entries: &[Uuid]) -> Vec<Uuid> {
    let mut ranked: Vec<(Vec<u8>, Uuid)> = entries
        .iter()
        .map(|id| {
            let mut mac = Hmac::<Sha256>::new_from_slice(seed).unwrap();
            mac.update(id.to_string().as_bytes());
            (mac.finalize().into_bytes().to_vec(), *id)
        })
        .collect();
    ranked.sort();
    ranked.into_iter().map(|(_, id)| id).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_five_thousand_entry_draw_is_recomputed_from_the_seed_and_matches_what_was_admitted() {
    let app = spawn_app().await;
    let (resource, commitment) = queued(&app.db, 1_000).await;
    // every unit waits for the queue: nobody buys around it
    assert_eq!(held_for_line(&app.db, &resource).await, (0, 1_000));
    // a few through the shopper's path, the rest written as confirmed
    for i in 0..5 {
        join_and_confirm(&app.db, &format!("q{i}@example.com"), 1 + (i % 2)).await;
    }
    sqlx::query(
        "insert into waitlist_entries (product_id, token, name, email, email_key, qty, provider, \
                                       state, confirmed_at) \
         select $1, md5(g::text) || md5((g + 1)::text), 'Queued ' || g, \
                'bulk' || g || '@example.com', 'bulk' || g || '@example.com', 1 + g % 2, \
                'stripe', 'queued', now() \
           from generate_series(1, 4995) g",
    )
    .bind(PRODUCT)
    .execute(&app.db.pool)
    .await
    .unwrap();
    // before the opening only the commitment is published
    let url = format!("{}/queue/{PRODUCT}/order.json", app.address);
    let before: Value = browser()
        .get(&url)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(before["commitment"], commitment.as_str());
    assert!(before["seed"].is_null(), "{before}");
    assert_eq!(before["order"].as_array().unwrap().len(), 0);
    open(&app.db).await;
    // the first look after the opening draws it
    let published: Value = browser()
        .get(&url)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let seed = hex::decode(published["seed"].as_str().unwrap()).unwrap();
    assert_eq!(
        hex::encode(Sha256::digest(&seed)),
        commitment,
        "the seed is the one committed to"
    );
    let ids = |v: &Value| -> Vec<Uuid> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|id| Uuid::parse_str(id.as_str().unwrap()).unwrap())
            .collect()
    };
    let entries = ids(&published["entries"]);
    let order = ids(&published["order"]);
    assert_eq!(entries.len(), 5_000);
    assert_eq!(
        order,
        independent_order(&seed, &entries),
        "every position is the seed's"
    );
    // what was admitted: the entries in that order, as far as 1,000 units go
    // (a group that does not fit keeps its place; the next that fits is served)
    let mut sizes = std::collections::HashMap::new();
    for (id, qty) in sqlx::query_as::<_, (Uuid, i32)>("select id, qty from waitlist_entries")
        .fetch_all(&app.db.pool)
        .await
        .unwrap()
    {
        sizes.insert(id, i64::from(qty));
    }
    let mut left = 1_000;
    let want: Vec<Uuid> = order
        .iter()
        .filter(|id| {
            let fits = sizes[id] <= left;
            if fits {
                left -= sizes[id];
            }
            fits
        })
        .copied()
        .collect();
    let admitted: Vec<Uuid> = sqlx::query_scalar(
        "select w.id from waitlist_entries w join orders o on o.id = w.order_id \
          where w.state = 'offered' order by w.line_no",
    )
    .fetch_all(&app.db.pool)
    .await
    .unwrap();
    assert_eq!(admitted, want, "admitted in the drawn order, by units");
    let offered: i64 = want.iter().map(|id| sizes[id]).sum();
    assert_eq!(held_for_line(&app.db, &resource).await, (offered, left));
    assert_eq!(held_and_sold(&app.db, &resource).await, (1_000, 0));
    // anyone can check it: the command, over HTTP, as a stranger would
    let output = holdfast(
        &app.db,
        &["--json", "queue", "verify", PRODUCT, "--url", &app.address],
    );
    assert_eq!(json_output(&output)["verified"], 5_000);
    // a changed order is caught
    sqlx::query(
        "update waitlist_entries set line_no = -line_no - 100000 \
          where id = $1 or id = $2",
    )
    .bind(order[10])
    .bind(order[20])
    .execute(&app.db.pool)
    .await
    .unwrap();
    sqlx::query(
        "update waitlist_entries set line_no = case when id = $1 then $3 else $4 end \
          where id = $1 or id = $2",
    )
    .bind(order[10])
    .bind(order[20])
    .bind(-5_000 + 20)
    .bind(-5_000 + 10)
    .execute(&app.db.pool)
    .await
    .unwrap();
    let output = holdfast(&app.db, &["queue", "verify", PRODUCT]);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert!(
        String::from_utf8_lossy(&output.stdout).contains("position 11"),
        "{output:?}"
    );
    assert_no_drift(&app.db.inventory()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nobody_buys_around_the_queue_and_later_arrivals_join_at_the_back() {
    let app = spawn_app().await;
    let (resource, commitment) = queued(&app.db, 3).await;
    // the shop says so, and links the rule
    app.settled().await;
    let page = browser()
        .get(&app.address)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains("Join the queue"), "{page}");
    let page = browser()
        .get(format!("{}/queue/{PRODUCT}", app.address))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains(&commitment), "{page}");
    let first = join_and_confirm(&app.db, "first@example.com", 1).await;
    let second = join_and_confirm(&app.db, "second@example.com", 1).await;
    let state = |id: Uuid| {
        let pool = app.db.pool.clone();
        async move {
            sqlx::query_scalar::<_, String>("select state from waitlist_entries where id = $1")
                .bind(id)
                .fetch_one(&pool)
                .await
                .unwrap()
        }
    };
    assert_eq!(state(first).await, "queued");
    // at the opening moment a checkout finds nothing to take: the units
    // wait for the draw
    open(&app.db).await;
    let outcome = checkout::start_checkout(&app.db.pool, &start("early-bird", &[(PRODUCT, 1)]))
        .await
        .unwrap();
    assert!(
        matches!(outcome, StartOutcome::SoldOut { .. }),
        "{outcome:?}"
    );
    assert_eq!(queue::draw_due(&app.db.pool).await.unwrap(), 1);
    assert_eq!(
        queue::draw_due(&app.db.pool).await.unwrap(),
        0,
        "drawn once"
    );
    assert_eq!(
        (state(first).await, state(second).await),
        ("offered".into(), "offered".into())
    );
    // nobody else waits: the third unit is on sale again
    assert_eq!(held_for_line(&app.db, &resource).await, (2, 0));
    // an arrival after the draw joins at the back and is offered it at once
    let late = join_and_confirm(&app.db, "late@example.com", 1).await;
    assert_eq!(state(late).await, "offered");
    let line: Vec<Uuid> = sqlx::query_scalar("select id from waitlist_entries order by line_no")
        .fetch_all(&app.db.pool)
        .await
        .unwrap();
    assert_eq!(line.last(), Some(&late));
    // the next arrival finds it sold out for its place, and says so
    let last = join_and_confirm(&app.db, "last@example.com", 1).await;
    assert_eq!(state(last).await, "waiting");
    let token: String = sqlx::query_scalar("select token from waitlist_entries where id = $1")
        .bind(last)
        .fetch_one(&app.db.pool)
        .await
        .unwrap();
    let page = browser()
        .get(format!("{}/waitlist/entry/{token}", app.address))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains("Sold out for your place in line"), "{page}");
    assert_eq!(held_and_sold(&app.db, &resource).await, (3, 0));
    assert_no_drift(&app.db.inventory()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_is_turned_on_once_and_only_before_its_sale_opens() {
    let db = TestDb::new().await;
    db.load_demo().await;
    // no opening time: refused, nothing written
    let output = holdfast(&db, &["queue", "on", PRODUCT]);
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    assert!(String::from_utf8_lossy(&output.stderr).contains("opening time"));
    let output = holdfast(&db, &["queue", "on", "no-such-thing"]);
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    sqlx::query("update products set sale_opens_at = now() + interval '1 hour' where id = $1")
        .bind(PRODUCT)
        .execute(&db.pool)
        .await
        .unwrap();
    let first = json_output(&holdfast(&db, &["--json", "queue", "on", PRODUCT]));
    // twice: refused, the commitment stays
    let output = holdfast(&db, &["queue", "on", PRODUCT]);
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let kept: String = sqlx::query_scalar("select queue_commitment from products where id = $1")
        .bind(PRODUCT)
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(first["commitment"], kept.as_str());
    // not drawn before the opening, by the command either
    let output = holdfast(&db, &["queue", "draw", PRODUCT]);
    assert_eq!(output.status.code(), Some(4), "{output:?}");
    // a verify before the draw says it cannot be checked yet
    let output = holdfast(&db, &["queue", "verify", PRODUCT]);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leaving_during_the_draw_and_confirming_while_leaving_never_deadlock() {
    let db = TestDb::with_connections(30).await;
    let (resource, _) = queued(&db, 5).await;
    // 200 entrants in the queue, 100 more still to confirm
    sqlx::query(
        "insert into waitlist_entries (product_id, token, name, email, email_key, qty, provider, \
                                       state, confirmed_at) \
         select $1, md5('q' || g) || md5('r' || g), 'Queued', 'q' || g || '@example.com', \
                'q' || g || '@example.com', 1, 'stripe', 'queued', now() \
           from generate_series(1, 200) g",
    )
    .bind(PRODUCT)
    .execute(&db.pool)
    .await
    .unwrap();
    sqlx::query(
        "insert into waitlist_entries (product_id, token, name, email, email_key, qty, provider) \
         select $1, md5('u' || g) || md5('v' || g), 'Late', 'u' || g || '@example.com', \
                'u' || g || '@example.com', 1, 'stripe' \
           from generate_series(1, 100) g",
    )
    .bind(PRODUCT)
    .execute(&db.pool)
    .await
    .unwrap();
    let queued: Vec<Uuid> = sqlx::query_scalar(
        "select id from waitlist_entries where state = 'queued' order by id desc",
    )
    .fetch_all(&db.pool)
    .await
    .unwrap();
    let unconfirmed: Vec<(Uuid, String)> = sqlx::query_as(
        "select id, token from waitlist_entries where state = 'unconfirmed' order by id",
    )
    .fetch_all(&db.pool)
    .await
    .unwrap();
    open(&db).await;
    let by = holdfast::audit::Actor::Operator("tests");
    // no retry anywhere: a deadlock would be an error
    let draw = {
        let pool = db.pool.clone();
        tokio::spawn(async move { queue::draw(&pool, PRODUCT).await.unwrap() })
    };
    let leaving = {
        let pool = db.pool.clone();
        tokio::spawn(async move {
            for id in queued.iter().take(100) {
                waitlist::remove(&pool, by, *id).await.unwrap();
            }
        })
    };
    let pairs = futures::future::join_all(unconfirmed.iter().map(|(id, token)| {
        let pool = db.pool.clone();
        let (id, token) = (*id, token.clone());
        async move {
            let (confirmed, left) = tokio::join!(
                waitlist::confirm(&pool, &token),
                waitlist::remove(&pool, by, id)
            );
            confirmed.unwrap();
            left.unwrap();
        }
    }));
    pairs.await;
    leaving.await.unwrap();
    assert!(draw.await.unwrap(), "the queue was drawn");
    // the units are held for five entries in line, whatever left when
    let offered: i64 =
        sqlx::query_scalar("select count(*) from waitlist_entries where state = 'offered'")
            .fetch_one(&db.pool)
            .await
            .unwrap();
    assert_eq!(offered, 5);
    assert_eq!(held_and_sold(&db, &resource).await, (5, 0));
    assert_no_drift(&db.inventory()).await;
}

/// A hold ending on the product's resource while its queue is drawn: the
/// hold's transaction locks the resource, then offers units to an entry of
/// the product (entries confirmed before the queue was turned on stay in
/// line), and writing that offer's order line checks its foreign key to
/// the product with a key-share lock. The draw locks the product, then
/// waits for the resource; were its product lock exclusive (it was, `for
/// update`), each would wait for the other and one would be aborted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hold_ending_while_the_queue_is_drawn_never_deadlocks_with_it() {
    let db = TestDb::new().await;
    let (resource, _) = queued(&db, 5).await;
    for n in 0..8 {
        join_and_confirm(&db, &format!("early{n}@example.com"), 1).await;
    }
    open(&db).await;
    // the ending hold's transaction, its resource locked as hf_end_holds
    // locks it
    let mut ending = db.pool.begin().await.unwrap();
    sqlx::query("select 1 from resources where id = $1 for no key update")
        .bind(&resource)
        .execute(&mut *ending)
        .await
        .unwrap();
    let draw = {
        let pool = db.pool.clone();
        tokio::spawn(async move { queue::draw(&pool, PRODUCT).await })
    };
    // the draw has its product and waits for the resource
    let mut waited = 0;
    loop {
        let waiting: i64 = sqlx::query_scalar(
            "select count(*) from pg_stat_activity \
              where datname = current_database() and wait_event_type = 'Lock' \
                and query like '%from resources%'",
        )
        .fetch_one(&db.pool)
        .await
        .unwrap();
        if waiting == 1 {
            break;
        }
        waited += 1;
        assert!(waited < 500, "the draw never waited for the resource");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    // the statement PostgreSQL runs for an order line's foreign key to its
    // product; PostgreSQL finds a deadlock within deadlock_timeout (1 s)
    let key_share = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        sqlx::query("select 1 from only products x where id = $1 for key share of x")
            .bind(PRODUCT)
            .execute(&mut *ending),
    )
    .await
    .expect("the foreign key's check waited for the draw");
    key_share.expect("the foreign key's check was not aborted");
    ending.commit().await.unwrap();
    assert!(draw.await.unwrap().unwrap(), "the queue was drawn");
    assert_no_drift(&db.inventory()).await;
}
