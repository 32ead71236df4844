//! A fair flash sale, tested with storms: one address with hundreds of
//! fresh cookies and e-mails, one e-mail from many addresses, and two
//! server processes that must enforce one limit. Every count is exact.

use std::net::IpAddr;
use std::time::Duration;

use futures::future::join_all;
use holdfast::limits::client::Fairness;
use holdfast::limits::{Limits, Rate, TrustedProxies};
use holdfast::payments::ProviderKind;

use holdfast_testkit::*;

/// The shop with these limits (and trusted proxies).
async fn fair_shop(limits: Limits, proxies: &str) -> TestApp {
    let proxies = TrustedProxies::parse(proxies).unwrap();
    let app = spawn_app_shaped(TestDb::new().await, |_, shop| {
        shop.fairness = Fairness::new(shop.pool.clone(), limits, proxies);
    })
    .await;
    app.load_demo().await;
    app
}

/// A bucket that does not refill while a test runs.
fn no_refill(capacity: f64) -> Rate {
    Rate {
        capacity,
        per_second: 1.0 / 3600.0,
    }
}

fn ip(text: &str) -> IpAddr {
    text.parse().unwrap()
}

/// One would-be buyer: a fresh cookie jar from `from`, `qty` of a product
/// into the basket, then checkout with Stripe under `email` (with
/// `forwarded` as the `X-Forwarded-For` of every request, if any). The
/// statuses of the add and of the checkout (None when the add failed).
async fn try_checkout(
    front: ShopFront,
    from: IpAddr,
    forwarded: Option<String>,
    product: &str,
    qty: i64,
    email: impl Into<String>,
) -> (u16, Option<u16>) {
    let email: String = email.into();
    let mut purchase = Purchase::of(product, qty)
        .with(ProviderKind::Stripe)
        .by("Storm Trooper", &email);
    if let Some(client) = forwarded {
        purchase = purchase.forwarded_for(client);
    }
    match front.try_start(&browser_from(from), &purchase).await {
        Attempt::NotAdded(added) => (added.status.as_u16(), None),
        Attempt::Refused(answer) => (303, Some(answer.status.as_u16())),
        Attempt::Started(_) => (303, Some(303)),
    }
}

fn count(statuses: &[(u16, Option<u16>)], add: u16, checkout: Option<u16>) -> usize {
    statuses.iter().filter(|s| **s == (add, checkout)).count()
}

async fn units_held(app: &TestApp, product: &str) -> i64 {
    let status = app
        .db
        .inventory()
        .status(&rid(product))
        .await
        .unwrap()
        .unwrap();
    i64::from(status.held)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_storm_from_one_address_holds_its_cap_and_another_address_still_buys() {
    // the address cap and the e-mail cap as shipped; the rate is left out
    // here (the next test counts it) so every request reaches checkout
    let app = fair_shop(
        Limits {
            address_rate: None,
            ..Limits::default()
        },
        "",
    )
    .await;
    let cap = Limits::default().address_units.unwrap();
    assert_eq!(cap, 20);
    let bot = ip("127.0.0.2");
    // 300 fresh cookies and e-mails, each for the most one order may take,
    // each claiming to be someone else in a header nobody trusts
    let statuses = join_all((0..300).map(|i| {
        try_checkout(
            app.front(),
            bot,
            Some(format!("198.51.100.{}", i % 250)),
            "wild-honey",
            10,
            format!("bot{i}@scalper.example"),
        )
    }))
    .await;
    let started = count(&statuses, 303, Some(303));
    let refused = count(&statuses, 303, Some(409));
    assert_eq!(started, (cap / 10) as usize, "{statuses:?}");
    assert_eq!(refused, 300 - started, "{statuses:?}");
    assert_eq!(units_held(&app, "wild-honey").await, i64::from(cap));
    // what the refused were told
    let refusal = {
        let shopper = browser_from(bot);
        app.add(&shopper, "wild-honey", 1).await;
        let page = app.checkout(&shopper).await;
        assert_eq!(page.status(), 409);
        page.text().await.unwrap()
    };
    assert!(
        refusal.contains("there is a limit per buyer and per address"),
        "{refusal}"
    );

    // a shopper from another address buys as if nothing had happened
    let (added, started) = try_checkout(
        app.front(),
        ip("127.0.0.3"),
        None,
        "wild-honey",
        10,
        "ada@example.com",
    )
    .await;
    assert_eq!((added, started), (303, Some(303)));
    assert_eq!(units_held(&app, "wild-honey").await, i64::from(cap) + 10);
    assert_no_drift(&app.db.inventory()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_address_over_its_rate_is_told_to_wait_and_others_are_not() {
    let app = fair_shop(
        Limits {
            address_rate: Some(no_refill(60.0)),
            ..Limits::off()
        },
        "",
    )
    .await;
    let bot = ip("127.0.0.4");
    let answers = join_all((0..300).map(|_| {
        let shopper = browser_from(bot);
        let url = format!("{}/basket/add", app.address);
        async move {
            shopper
                .post(url)
                .form(&[("product_id", "wild-honey"), ("qty", "1")])
                .send()
                .await
                .unwrap()
        }
    }))
    .await;
    let added = answers.iter().filter(|a| a.status() == 303).count();
    let slowed: Vec<&reqwest::Response> = answers.iter().filter(|a| a.status() == 429).collect();
    assert_eq!(added, 60);
    assert_eq!(slowed.len(), 240);
    for answer in &slowed {
        let wait: u64 = answer.headers()["retry-after"]
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!((1..=3600).contains(&wait), "{wait}");
    }
    let page = answers
        .into_iter()
        .find(|a| a.status() == 429)
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        page.contains("Too many requests from your address"),
        "{page}"
    );
    assert!(page.contains("nothing was changed"), "{page}");
    let lines: i64 = sqlx::query_scalar("select count(*) from basket_lines")
        .fetch_one(&app.db.pool)
        .await
        .unwrap();
    assert_eq!(lines, 60, "a refused add wrote nothing");
    // checkout starts from that address are refused too; another address
    // is not slowed at all
    let (add, _) = try_checkout(app.front(), bot, None, "wild-honey", 1, "a@example.com").await;
    assert_eq!(add, 429);
    let (add, started) = try_checkout(
        app.front(),
        ip("127.0.0.5"),
        None,
        "wild-honey",
        1,
        "b@example.com",
    )
    .await;
    assert_eq!((add, started), (303, Some(303)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_email_from_many_addresses_holds_one_orders_worth() {
    // behind a proxy on this machine: the header names the client
    let app = fair_shop(
        Limits {
            address_rate: None,
            ..Limits::default()
        },
        "127.0.0.1",
    )
    .await;
    // one inbox, written fifty ways, from fifty addresses, 4 jars each: a
    // product's max_per_order (10) held at once is 2 orders
    let statuses = join_all((0..50).map(|i| {
        let email = match i % 3 {
            0 => "Scalper@Example.com".to_owned(),
            1 => format!("scalper+{i}@example.com"),
            _ => " scalper@EXAMPLE.com ".to_owned(),
        };
        try_checkout(
            app.front(),
            ip("127.0.0.1"),
            Some(format!("203.0.113.{i}")),
            "wild-honey",
            4,
            email.trim().to_owned(),
        )
    }))
    .await;
    assert_eq!(count(&statuses, 303, Some(303)), 2, "{statuses:?}");
    assert_eq!(count(&statuses, 303, Some(409)), 48, "{statuses:?}");
    assert_eq!(units_held(&app, "wild-honey").await, 8);
    // each order remembers who it counts against
    let keys: Vec<(String, String)> = sqlx::query_as(
        "select email_key, client_address from orders where state = 'pending' order by client_address",
    )
    .fetch_all(&app.db.pool)
    .await
    .unwrap();
    assert_eq!(keys.len(), 2);
    for (email, address) in &keys {
        assert_eq!(email, "scalper@example.com");
        assert!(address.starts_with("203.0.113."), "{address}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_server_processes_enforce_one_limit() {
    let db = TestDb::new().await;
    db.load_demo().await;
    let sandbox = spawn_sandbox();
    let mut servers = Vec::new();
    for _ in 0..2 {
        let port = free_port();
        let child = holdfast_process(
            env!("CARGO_BIN_EXE_holdfast"),
            &db,
            &sandbox,
            &["serve", "--no-worker"],
        )
        .env("HOLDFAST_ADDR", format!("127.0.0.1:{port}"))
        .env("HOLDFAST_BASE_URL", format!("http://127.0.0.1:{port}"))
        .env("HOLDFAST_ADDRESS_RATE", "100/1h")
        .env("HOLDFAST_ADDRESS_UNITS", "20")
        .env("HOLDFAST_EMAIL_LIMIT", "on")
        .spawn()
        .unwrap();
        let server = Server {
            child,
            address: format!("http://127.0.0.1:{port}"),
        };
        ready(&server).await;
        servers.push(server);
    }
    let server = |i: usize| servers[i % 2].address.clone();
    let front = |i: usize| ShopFront::new(&servers[i % 2].address, &db, &sandbox);

    // the rate: 150 adds from one address, half through each server
    let flooder = ip("127.0.0.6");
    let answers = join_all((0..150).map(|i| {
        let shopper = browser_from(flooder);
        let url = format!("{}/basket/add", server(i));
        async move {
            shopper
                .post(url)
                .form(&[("product_id", "harbour-lights-general"), ("qty", "1")])
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        }
    }))
    .await;
    assert_eq!(answers.iter().filter(|s| **s == 303).count(), 100);
    assert_eq!(answers.iter().filter(|s| **s == 429).count(), 50);

    // the address cap: 30 buyers of 10 from another address, across both
    // (30 adds and 30 checkouts fit the rate of 100)
    let bot = ip("127.0.0.7");
    let statuses = join_all((0..30).map(|i| {
        let at = front(i);
        async move {
            try_checkout(
                at,
                bot,
                None,
                "wild-honey",
                10,
                &format!("bot{i}@example.com"),
            )
            .await
        }
    }))
    .await;
    assert_eq!(count(&statuses, 303, Some(303)), 2, "{statuses:?}");
    assert_eq!(count(&statuses, 303, Some(409)), 28, "{statuses:?}");
    let held: i32 = sqlx::query_scalar("select held from resources where id = 'wild-honey'")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(held, 20);
    drop(servers);
}

#[tokio::test]
async fn no_order_takes_more_than_a_products_limit_per_order() {
    let app = fair_shop(Limits::off(), "").await;
    // the page offers no more than the limit (10 by default)
    let catalogue = browser()
        .get(format!("{}/c/pantry", app.address))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        catalogue.contains(r#"name="qty" value="1" min="1" max="10""#),
        "{catalogue}"
    );
    // the basket refuses more, in one add or in two
    let shopper = browser();
    let add = |qty: &'static str| {
        shopper
            .post(format!("{}/basket/add", app.address))
            .form(&[("product_id", "wild-honey"), ("qty", qty)])
            .send()
    };
    let eleven = add("11").await.unwrap();
    assert_eq!(eleven.status(), 409);
    let told = eleven.text().await.unwrap();
    assert!(
        told.contains("One order takes at most 10 units of this"),
        "{told}"
    );
    assert!(told.contains("Nothing was added"), "{told}");
    assert_eq!(add("6").await.unwrap().status(), 303);
    let five_more = add("5").await.unwrap();
    assert_eq!(five_more.status(), 409);
    assert!(
        five_more
            .text()
            .await
            .unwrap()
            .contains("your basket has 6"),
    );
    let lines: Vec<i32> = sqlx::query_scalar("select qty from basket_lines")
        .fetch_all(&app.db.pool)
        .await
        .unwrap();
    assert_eq!(lines, [6], "a refused add changed nothing");

    // the shop lowers the limit while the basket waits: checkout refuses
    // the line, names it, and writes nothing
    sqlx::query("update products set max_per_order = 4 where id = 'wild-honey'")
        .execute(&app.db.pool)
        .await
        .unwrap();
    let before = snapshot(&app.db.pool).await;
    let page = app.checkout(&shopper).await;
    assert_eq!(page.status(), 409);
    let told = page.text().await.unwrap();
    assert!(
        told.contains("at most 4 for you right now (you asked for 6)"),
        "{told}"
    );
    assert_eq!(snapshot(&app.db.pool).await, before);
    assert_eq!(units_held(&app, "wild-honey").await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_address_told_to_wait_is_told_again_from_memory_until_a_token_is_back() {
    let mut fairness = None;
    let app = spawn_app_shaped(TestDb::new().await, |_, shop| {
        shop.fairness = Fairness::new(
            shop.pool.clone(),
            Limits {
                address_rate: Some(no_refill(5.0)),
                ..Limits::off()
            },
            TrustedProxies::parse("").unwrap(),
        );
        fairness = Some(shop.fairness.clone());
    })
    .await;
    app.load_demo().await;
    let fairness = fairness.unwrap();
    let bot = browser_from(ip("127.0.0.6"));
    let mut statuses = Vec::new();
    for _ in 0..50 {
        let answer = bot
            .post(format!("{}/basket/add", app.address))
            .form(&[("product_id", "wild-honey"), ("qty", "1")])
            .send()
            .await
            .unwrap();
        statuses.push(answer.status().as_u16());
    }
    assert_eq!(statuses.iter().filter(|s| **s == 303).count(), 5);
    assert_eq!(statuses.iter().filter(|s| **s == 429).count(), 45);
    assert_eq!(
        fairness.refused_from_memory(),
        44,
        "the database refused the first; memory the rest"
    );
    // another address is not slowed
    let other = browser_from(ip("127.0.0.7"));
    let answer = other
        .post(format!("{}/basket/add", app.address))
        .form(&[("product_id", "wild-honey"), ("qty", "1")])
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 303);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_never_refuses_past_the_moment_a_token_is_back() {
    let limits = Limits {
        address_rate: Some(Rate {
            capacity: 1.0,
            per_second: 4.0,
        }),
        ..Limits::off()
    };
    let db = TestDb::new().await;
    let fairness = Fairness::new(db.pool.clone(), limits, TrustedProxies::parse("").unwrap());
    assert!(fairness.take("10.0.0.1").await.unwrap().is_ok());
    let refused = fairness.take("10.0.0.1").await.unwrap().unwrap_err();
    assert!(
        refused.token_in <= Duration::from_millis(250),
        "{refused:?}"
    );
    // asked again at once: memory refuses
    assert!(fairness.take("10.0.0.1").await.unwrap().is_err());
    assert_eq!(fairness.refused_from_memory(), 1);
    // once the token is back, the database is asked, and grants it
    tokio::time::sleep(refused.token_in + Duration::from_millis(30)).await;
    assert!(fairness.take("10.0.0.1").await.unwrap().is_ok());
}
