//! Orders paid before items (migration 0200) keep every code their shoppers
//! hold: a database migrated up to 0197, with orders written as that
//! schema held them (one pickup code on the order for its pickup and its
//! table, ticket codes of their own, some used or refunded), is migrated
//! on; each line the old code covered becomes an item with that code, an
//! old redemption of it goes to the items of that day, and the table the
//! bread's redemption did not touch still seats its guest.

use chrono::{Duration, Utc};
use sqlx::PgPool;
use sqlx::migrate::Migrator;
use uuid::Uuid;

use holdfast::database::MIGRATOR;
use holdfast::redemption::{self, Door, Outcome};
use holdfast_testkit::TestDb;

/// The migrations before items.
fn before_items() -> Migrator {
    Migrator {
        migrations: MIGRATOR
            .iter()
            .filter(|m| m.version < 200)
            .cloned()
            .collect::<Vec<_>>()
            .into(),
        ignore_missing: false,
        locking: true,
        no_tx: false,
    }
}

/// A paid order as the old schema kept it, with its lines and its one
/// pickup code.
async fn old_order(pool: &PgPool, key: &str, pickup_code: &str, lines: &[(&str, i32)]) -> Uuid {
    let id: Uuid = sqlx::query_scalar(
        "insert into orders (token, checkout_key, state, customer_name, customer_email, currency, \
                             amount_minor, provider, payment_ref, paid_at, pickup_code) \
         values (md5($1), $1, 'paid', 'Ada', 'ada@example.com', 'eur', 0, 'stripe', \
                 'pi_' || $1, now() - interval '1 day', $2) returning id",
    )
    .bind(key)
    .bind(pickup_code)
    .fetch_one(pool)
    .await
    .unwrap();
    for (product, qty) in lines {
        sqlx::query(
            "insert into order_lines (order_id, product_id, name, qty, unit_price_minor) \
             select $1, id, name, $2, 0 from products where id = $3",
        )
        .bind(id)
        .bind(qty)
        .bind(product)
        .execute(pool)
        .await
        .unwrap();
    }
    id
}

async fn redeemed(pool: &PgPool, code: &str, order: Uuid, kind: &str, at_hours: i64) {
    sqlx::query(
        "insert into redemptions (code, order_id, kind, redeemed_at, redeemed_by, place) \
         values ($1, $2, $3, $4, 'counter@holdfast.test', 'Counter')",
    )
    .bind(code)
    .bind(order)
    .bind(kind)
    .bind(Utc::now() + Duration::hours(at_hours))
    .execute(pool)
    .await
    .unwrap();
}

#[tokio::test]
async fn old_orders_keep_their_codes_and_an_old_redemption_goes_to_the_items_of_its_day() {
    let db = TestDb::unmigrated().await;
    before_items().run(&db.pool).await.unwrap();
    // the rows `holdfast migrate` wrote from the code before 0200
    sqlx::query(
        "insert into product_kinds (kind, code) values ('pickup_slot', 'pickup'), \
             ('ticket', 'ticket'), ('stock', null), ('table', 'pickup'), ('seat', 'ticket') \
         on conflict (kind) do update set code = excluded.code",
    )
    .execute(&db.pool)
    .await
    .unwrap();
    sqlx::query(
        "insert into collection_kinds (kind) values ('dining_room') on conflict do nothing",
    )
    .execute(&db.pool)
    .await
    .unwrap();
    // a bakery slot tomorrow, a bistro's table the day after, a concert
    sqlx::raw_sql(
        "insert into resources (id, total) values ('bread-mon', 10), ('bistro-tue', 16), \
             ('gig-general', 100); \
         insert into collections (id, kind, title) values ('bakery', 'schedule', 'Bakery pickup'), \
             ('bistro', 'dining_room', 'A table at the Bistro'), ('gig', 'event', 'Harbour Lights'); \
         insert into products (id, resource_id, kind, name, price_minor, currency, starts_at, \
                               collection) \
         values ('bread-mon', 'bread-mon', 'pickup_slot', 'Sourdough box, pickup Mon', 1800, 'eur', \
                 now() + interval '1 day', 'bakery'), \
                ('bistro-tue', 'bistro-tue', 'table', 'A table at the Bistro, Tue', 0, 'eur', \
                 now() + interval '2 days', 'bistro'), \
                ('gig-general', 'gig-general', 'ticket', 'Harbour Lights — General', 3500, 'eur', \
                 now() + interval '14 days', 'gig');",
    )
    .execute(&db.pool)
    .await
    .unwrap();
    // the bread collected at its slot; the table not yet; two tickets, one
    // used, one refunded
    let mixed = old_order(
        &db.pool,
        "old-mixed",
        "K7P2QX",
        &[("bread-mon", 2), ("bistro-tue", 2), ("gig-general", 2)],
    )
    .await;
    sqlx::query(
        "insert into order_codes (code, order_id, product_id, refunded_at) \
         values ('TKT-AAAA-AAAA', $1, 'gig-general', null), \
                ('TKT-BBBB-BBBB', $1, 'gig-general', now())",
    )
    .bind(mixed)
    .execute(&db.pool)
    .await
    .unwrap();
    redeemed(&db.pool, "K7P2QX", mixed, "pickup", 24).await;
    redeemed(&db.pool, "TKT-AAAA-AAAA", mixed, "ticket", 1).await;
    // an order whose code was said at a counter far from either day:
    // what that door handed over was all of it
    let far = old_order(
        &db.pool,
        "old-far",
        "PQRS23",
        &[("bread-mon", 1), ("bistro-tue", 2)],
    )
    .await;
    redeemed(&db.pool, "PQRS23", far, "pickup", -72).await;

    holdfast::database::migrate(&mut db.pool.acquire().await.unwrap())
        .await
        .expect("the data migrates");

    let items: Vec<(Uuid, String, String, String)> = sqlx::query_as(
        "select order_id, code, product_id, state from order_items order by order_id, product_id, code",
    )
    .fetch_all(&db.pool)
    .await
    .unwrap();
    let of = |order: Uuid| -> Vec<(String, String, String)> {
        items
            .iter()
            .filter(|i| i.0 == order)
            .map(|i| (i.1.clone(), i.2.clone(), i.3.clone()))
            .collect()
    };
    let owned = |c: &str, p: &str, s: &str| (c.to_owned(), p.to_owned(), s.to_owned());
    assert_eq!(
        of(mixed),
        [
            owned("K7P2QX", "bistro-tue", "valid"),
            owned("K7P2QX", "bread-mon", "used"),
            owned("TKT-AAAA-AAAA", "gig-general", "used"),
            owned("TKT-BBBB-BBBB", "gig-general", "refunded"),
        ]
    );
    assert_eq!(
        of(far),
        [
            owned("PQRS23", "bistro-tue", "used"),
            owned("PQRS23", "bread-mon", "used"),
        ]
    );
    // one redemption per item it stood for, its kind the item's
    let uses: Vec<(String, String)> =
        sqlx::query_as("select r.code, r.kind from redemptions r order by r.code, r.kind")
            .fetch_all(&db.pool)
            .await
            .unwrap();
    assert_eq!(
        uses,
        [
            ("K7P2QX".to_owned(), "pickup_slot".to_owned()),
            ("PQRS23".to_owned(), "pickup_slot".to_owned()),
            ("PQRS23".to_owned(), "table".to_owned()),
            ("TKT-AAAA-AAAA".to_owned(), "ticket".to_owned()),
        ]
    );
    let column: Option<String> = sqlx::query_scalar(
        "select column_name::text from information_schema.columns \
          where table_name = 'orders' and column_name = 'pickup_code'",
    )
    .fetch_optional(&db.pool)
    .await
    .unwrap();
    assert_eq!(column, None, "the order's code is its items' now");

    // the guest the bread's code was said for on Monday is seated on Tuesday
    let stand = Door {
        by: "host@holdfast.test",
        place: "host stand",
        checks: Some(&["bistro-tue".to_owned()]),
        overrule: false,
        attempt: Uuid::new_v4(),
    };
    let seated = redemption::redeem(&db.pool, "K7P2QX", &stand)
        .await
        .unwrap();
    assert!(
        matches!(seated.outcome, Outcome::Redeemed { .. }),
        "{seated:?}"
    );
    // a second scan (another attempt) finds it used
    let again = redemption::redeem(
        &db.pool,
        "K7P2QX",
        &Door {
            attempt: Uuid::new_v4(),
            ..stand.clone()
        },
    )
    .await
    .unwrap();
    assert!(
        matches!(again.outcome, Outcome::AlreadyUsed { .. }),
        "{again:?}"
    );
    let refunded = redemption::redeem(
        &db.pool,
        "TKT-BBBB-BBBB",
        &Door {
            checks: None,
            attempt: Uuid::new_v4(),
            ..stand.clone()
        },
    )
    .await
    .unwrap();
    assert_eq!(refunded.outcome, Outcome::Refunded);
}
