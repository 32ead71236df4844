//! Vouchers over HTTP: their uses are capacity in the hold engine (a race
//! for the last use has one winner, an abandoned basket gives its use
//! back, a whole refund gives it back too), the discount is what the
//! provider is asked for and what the order, its page and its refunds
//! say, and a code that cannot be used is named and holds nothing.

use futures::future::join_all;
use holdfast::staff::refunds::{RefundOutcome, RefundRequest, refund_order};
use holdfast::vouchers::{self, Created, NewVoucher};
use reqwest::StatusCode;

use holdfast_testkit::*;

/// A voucher as the admin or the catalogue file makes it.
fn voucher(code: &str, uses: i64) -> NewVoucher {
    NewVoucher {
        code: code.to_owned(),
        percent_off: None,
        amount_off_minor: None,
        per_unit: false,
        currency: None,
        uses,
        products: None,
        unlocks: Vec::new(),
        valid_from: None,
        valid_until: None,
        per_buyer: false,
    }
}

async fn create(app: &TestApp, new: NewVoucher) {
    let created = vouchers::create(&app.db.pool, &new, "eur", "tests")
        .await
        .unwrap();
    assert!(matches!(created, Created::Created { .. }), "{created:?}");
}

/// The engine's counters of a voucher's uses: (held, sold), and the live
/// holds' sum behind each.
async fn uses(app: &TestApp, code: &str) -> ((i32, i32), (i64, i64)) {
    let resource = format!("voucher:{code}");
    let counters = held_and_sold(&app.db, &resource).await;
    let rows: (i64, i64) = sqlx::query_as(
        "select coalesce(sum(qty) filter (where state in ('held', 'awaiting_payment')), 0)::int8, \
                coalesce(sum(qty - returned) filter (where state = 'confirmed'), 0)::int8 \
           from holds where resource_id = $1",
    )
    .bind(&resource)
    .fetch_one(&app.db.pool)
    .await
    .unwrap();
    (counters, rows)
}

/// `n` shoppers at once, each checking out one ticket with `code`: the
/// ones who reached the provider, and the refusals' bodies.
async fn race(app: &TestApp, from: usize, n: usize, code: &str) -> (Vec<Started>, Vec<Answer>) {
    let attempts = join_all((from..from + n).map(|i| {
        let purchase = Purchase::of("harbour-lights-general", 1)
            .by(&format!("Shopper {i}"), &format!("shopper{i}@example.com"))
            .voucher(code);
        async move { app.try_start(&browser(), &purchase).await }
    }))
    .await;
    let (mut started, mut refused) = (Vec::new(), Vec::new());
    for attempt in attempts {
        match attempt {
            Attempt::Started(s) => started.push(s),
            Attempt::Refused(answer) => refused.push(answer),
            Attempt::NotAdded(answer) => panic!("the basket refused a ticket: {answer:?}"),
        }
    }
    (started, refused)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_hundred_shoppers_race_for_ten_uses_and_three_abandoned_baskets_free_three() {
    let app = spawn_app().await;
    app.load_demo().await;
    create(
        &app,
        NewVoucher {
            percent_off: Some(10),
            products: Some(vec!["harbour-lights-general".into()]),
            ..voucher("RACE-10", 10)
        },
    )
    .await;

    let (started, refused) = race(&app, 0, 200, "race-10").await;
    assert_eq!((started.len(), refused.len()), (10, 190));
    for answer in &refused {
        assert_eq!(answer.status, StatusCode::CONFLICT);
        assert!(
            answer
                .body
                .contains("The code RACE-10 has been used as often as it may be"),
            "{}",
            answer.body
        );
    }
    // exactly ten orders carry it, each 10% off, and nothing else was held
    let carried: Vec<(i64, i64)> = sqlx::query_as(
        "select amount_minor, discount_minor from orders where voucher_code = 'RACE-10'",
    )
    .fetch_all(&app.db.pool)
    .await
    .unwrap();
    assert_eq!(carried, vec![(3150, 350); 10]);
    let orders: i64 = sqlx::query_scalar("select count(*) from orders")
        .fetch_one(&app.db.pool)
        .await
        .unwrap();
    assert_eq!(orders, 10, "a refused code starts no order");
    assert_eq!(
        held_and_sold(&app.db, "harbour-lights-general").await,
        (10, 0)
    );
    assert_eq!(uses(&app, "RACE-10").await, ((10, 0), (10, 0)));

    // three of those shoppers walk away: their Checkout Sessions expire at
    // the provider, whose webhook gives back their tickets and their uses
    for s in &started[..3] {
        let expired = http_client()
            .post(format!(
                "{}v1/checkout/sessions/{}/expire",
                app.sandbox.stripe.api_base(),
                s.page_id
            ))
            .bearer_auth(app.sandbox.settings.stripe_secret_key.expose())
            .send()
            .await
            .unwrap();
        assert_eq!(expired.status(), StatusCode::OK);
    }
    for s in &started[..3] {
        app.wait_for_state(&s.token, "expired").await;
    }
    assert_eq!(uses(&app, "RACE-10").await, ((7, 0), (7, 0)));
    app.settled().await;

    // exactly three more of the next fifty get it
    let (again, refused_again) = race(&app, 200, 50, "RACE-10").await;
    assert_eq!((again.len(), refused_again.len()), (3, 47));
    assert_eq!(uses(&app, "RACE-10").await, ((10, 0), (10, 0)));

    // paid, the uses are used; no counter drifts from its holds
    for s in again.iter().chain(&started[3..5]) {
        app.pay(&browser(), s, &Payment::default()).await;
    }
    for s in again.iter().chain(&started[3..5]) {
        app.wait_for_state(&s.token, "paid").await;
    }
    assert_eq!(uses(&app, "RACE-10").await, ((5, 5), (5, 5)));
    let listed = vouchers::list(&app.db.pool).await.unwrap();
    assert_eq!(
        (listed[0].uses, listed[0].held, listed[0].used),
        (10, 5, 5),
        "the list counts what the engine counts"
    );
    assert_no_drift(&app.db.inventory()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_discounted_order_pays_what_it_shows_and_its_refunds_never_give_back_more() {
    let app = spawn_app().await;
    app.load_demo().await;
    create(
        &app,
        NewVoucher {
            amount_off_minor: Some(1000),
            products: Some(vec!["harbour-lights-general".into()]),
            ..voucher("TEN-OFF", 5)
        },
    )
    .await;
    let shopper = browser();
    // three tickets at 35.00 and a jar of honey the voucher is not for
    let purchase = Purchase::of("harbour-lights-general", 3)
        .and("wild-honey", 1)
        .voucher("TEN-OFF");
    let started = app.start(&shopper, &purchase).await;
    // the provider is asked for the discounted total
    let hosted = read_page(&shopper, &started.pay_url).await;
    assert!(hosted.contains("Pay 109.00 EUR"), "{hosted}");
    let paid = app.pay(&shopper, &started, &Payment::default()).await;
    app.wait_for_state(&started.token, "paid").await;
    let page = read_page(&shopper, &format!("{}{}", app.address, paid.order_url())).await;
    assert!(page.contains("Your order is paid: €109.00."), "{page}");
    assert!(page.contains("Voucher TEN-OFF: €10.00 off."), "{page}");
    // each line shows what was paid for it
    assert!(page.contains("€95.00") && page.contains("€14.00"), "{page}");
    let (amount, discount): (i64, i64) =
        sqlx::query_as("select amount_minor, discount_minor from orders where id = $1")
            .bind(started.order_id)
            .fetch_one(&app.db.pool)
            .await
            .unwrap();
    assert_eq!((amount, discount), (10_900, 1_000));
    assert_eq!(uses(&app, "TEN-OFF").await, ((0, 1), (0, 1)));

    // the staff's order page says so too
    app.add_staff().await;
    let (staff, _) = app.staff_browser().await;
    let admin = app
        .admin_page(&staff, &format!("/admin/orders/{}", started.order_id))
        .await;
    assert!(
        admin.contains("TEN-OFF") && admin.contains("€10.00 off"),
        "{admin}"
    );

    // one ticket back: its share of the 95.00 paid for three, never its
    // list price
    let refund = |units: Vec<(String, i32)>, key: &str| RefundRequest {
        order_id: started.order_id,
        units,
        reason: "the band moved the date".into(),
        restock: true,
        override_redeemed: false,
        by: "tests".into(),
        staff: None,
        key: Some(format!("refund-key-{key}-0000000")),
    };
    let amounts = |outcome: RefundOutcome| match outcome {
        RefundOutcome::Queued { amount_minor, .. } => amount_minor,
        other => panic!("not refunded: {other:?}"),
    };
    let one = refund_order(
        &app.db.pool,
        &refund(vec![("harbour-lights-general".into(), 1)], "one"),
    )
    .await
    .unwrap();
    assert_eq!(amounts(one), 3166);
    assert_eq!(
        uses(&app, "TEN-OFF").await.0,
        (0, 1),
        "part of it still uses it"
    );
    let two = refund_order(
        &app.db.pool,
        &refund(vec![("harbour-lights-general".into(), 1)], "two"),
    )
    .await
    .unwrap();
    assert_eq!(amounts(two), 3167);
    // the rest: what is left of the payment, and the use comes back
    let rest = refund_order(&app.db.pool, &refund(Vec::new(), "rest"))
        .await
        .unwrap();
    assert_eq!(amounts(rest), 10_900 - 3166 - 3167);
    let refunded: i64 = sqlx::query_scalar("select refunded_minor from orders where id = $1")
        .bind(started.order_id)
        .fetch_one(&app.db.pool)
        .await
        .unwrap();
    assert_eq!(refunded, 10_900, "never more than was paid");
    assert_eq!(uses(&app, "TEN-OFF").await, ((0, 0), (0, 0)));
    assert_eq!(
        held_and_sold(&app.db, "harbour-lights-general").await,
        (0, 0)
    );
    assert_no_drift(&app.db.inventory()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_code_that_cannot_be_used_is_named_on_the_basket_page_and_holds_nothing() {
    let app = spawn_app().await;
    app.load_demo().await;
    let now = chrono::Utc::now();
    create(
        &app,
        NewVoucher {
            percent_off: Some(50),
            valid_from: Some(now + chrono::Duration::days(2)),
            ..voucher("LATER", 5)
        },
    )
    .await;
    create(
        &app,
        NewVoucher {
            percent_off: Some(50),
            valid_until: Some(now - chrono::Duration::minutes(1)),
            ..voucher("OVER", 5)
        },
    )
    .await;
    create(
        &app,
        NewVoucher {
            percent_off: Some(50),
            products: Some(vec!["wild-honey".into()]),
            ..voucher("HONEY", 5)
        },
    )
    .await;
    create(
        &app,
        NewVoucher {
            percent_off: Some(20),
            per_buyer: true,
            ..voucher("ONCE-EACH", 50)
        },
    )
    .await;
    let before = snapshot(&app.db.pool).await;
    let long = "X".repeat(300);
    let long_told = format!("The code {} is not a code of ours", "X".repeat(40));
    for (code, words) in [
        ("NOPE-404", "The code NOPE-404 is not a code of ours"),
        ("later", "The code LATER is valid from"),
        ("OVER", "The code OVER expired on"),
        (
            "HONEY",
            "The code HONEY is not for the items in your basket",
        ),
        ("bad code!", "The code bad code! is not a code of ours"),
        (long.as_str(), long_told.as_str()),
    ] {
        let shopper = browser();
        let attempt = app
            .try_start(
                &shopper,
                &Purchase::of("harbour-lights-general", 1).voucher(code),
            )
            .await;
        let Attempt::Refused(answer) = attempt else {
            panic!("{code}: {attempt:?}");
        };
        assert!(answer.status.is_client_error(), "{code}: {answer:?}");
        assert!(answer.body.contains(words), "{code}: {}", answer.body);
        assert!(answer.body.contains("aria-invalid=\"true\""), "{code}");
        // the basket keeps its line for another try
        let basket = read_page(&shopper, &format!("{}/basket", app.address)).await;
        assert!(basket.contains("General admission"), "{basket}");
    }
    // a basket line is all a refused code leaves behind
    sqlx::query("delete from basket_lines")
        .execute(&app.db.pool)
        .await
        .unwrap();
    assert_eq!(snapshot(&app.db.pool).await, before);

    // one use per buyer: the same address, however written, once
    let first = app
        .buy(
            &browser(),
            &Purchase::of("wild-honey", 1)
                .by("Ada", "ada@example.com")
                .voucher("ONCE-EACH"),
        )
        .await;
    app.wait_for_state(&first.started.token, "paid").await;
    let again = app
        .try_start(
            &browser(),
            &Purchase::of("wild-honey", 1)
                .by("Ada", "  ADA@Example.com ")
                .voucher("ONCE-EACH"),
        )
        .await;
    let Attempt::Refused(answer) = again else {
        panic!("the same buyer used it twice: {again:?}");
    };
    assert!(
        answer
            .body
            .contains("The code ONCE-EACH was used already with your e-mail address"),
        "{}",
        answer.body
    );
    app.start(
        &browser(),
        &Purchase::of("wild-honey", 1)
            .by("Grace", "grace@example.com")
            .voucher("ONCE-EACH"),
    )
    .await;
    assert_no_drift(&app.db.inventory()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_hidden_product_is_sold_only_with_the_code_that_unlocks_it() {
    let app = spawn_app().await;
    app.load_demo().await;
    sqlx::query("update products set hidden = true where id = 'harbour-lights-vip'")
        .execute(&app.db.pool)
        .await
        .unwrap();
    create(
        &app,
        NewVoucher {
            unlocks: vec!["harbour-lights-vip".into()],
            ..voucher("FANS-FIRST", 20)
        },
    )
    .await;
    app.settled().await;
    let shopper = browser();
    let catalogue = read_page(&shopper, &format!("{}/c/harbour-lights", app.address)).await;
    assert!(!catalogue.contains("VIP"), "{catalogue}");
    // without the code it does not go in the basket
    let without = app
        .try_start(&browser(), &Purchase::of("harbour-lights-vip", 1))
        .await;
    assert!(matches!(without, Attempt::NotAdded(_)), "{without:?}");
    let wrong = app
        .try_start(
            &browser(),
            &Purchase::of("harbour-lights-vip", 1).voucher("FANS-LAST"),
        )
        .await;
    assert!(matches!(wrong, Attempt::NotAdded(_)), "{wrong:?}");
    // with it, its page opens and it sells at its price
    let unlocked = read_page(
        &shopper,
        &format!("{}/c/harbour-lights?code=fans-first", app.address),
    )
    .await;
    assert!(unlocked.contains("VIP"), "{unlocked}");
    let paid = app
        .buy(
            &shopper,
            &Purchase::of("harbour-lights-vip", 2).voucher("FANS-FIRST"),
        )
        .await;
    app.wait_for_state(&paid.started.token, "paid").await;
    let (amount, code): (i64, Option<String>) =
        sqlx::query_as("select amount_minor, voucher_code from orders where id = $1")
            .bind(paid.started.order_id)
            .fetch_one(&app.db.pool)
            .await
            .unwrap();
    assert_eq!((amount, code.as_deref()), (18_000, Some("FANS-FIRST")));
    assert_no_drift(&app.db.inventory()).await;
}
