use holdfast_testkit::spawn_app;

#[tokio::test]
async fn healthz_answers_when_the_database_does() {
    let app = spawn_app().await;
    let response = app
        .client
        .get(format!("{}/healthz", app.address))
        .send()
        .await
        .expect("request");
    assert_eq!(response.status(), 200);
    let body: serde_json::Value = response.json().await.unwrap();
    assert_eq!(body["database"], "ok");
    // an address nothing serves is a plain 404
    let missing = app
        .client
        .get(format!("{}/healthz/extra", app.address))
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);
    let _ = &app.db;
}

/// One sample's value from a Prometheus text page.
fn sample(page: &str, series: &str) -> Option<f64> {
    page.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

#[tokio::test]
async fn metrics_count_what_happened_in_prometheus_text() {
    use holdfast::inventory::HoldOutcome;
    use holdfast_testkit::{assert_no_drift, hold_ok, request, resource};

    let app = spawn_app().await;
    let metrics = || async {
        let response = app
            .client
            .get(format!("{}/metrics", app.address))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        assert_eq!(
            response.headers()["content-type"],
            "text/plain; version=0.0.4; charset=utf-8"
        );
        response.text().await.unwrap()
    };
    let before = metrics().await;
    let inventory = app.db.inventory();
    let slot = resource(&inventory, "metrics-slot", 2).await;
    hold_ok(&inventory, &request(&slot, 2, "ada")).await;
    for who in ["bob", "cy", "di"] {
        let refused = inventory.hold(&request(&slot, 1, who)).await.unwrap();
        assert!(
            matches!(refused, HoldOutcome::Insufficient { .. }),
            "{refused:?}"
        );
    }
    assert_no_drift(&inventory).await;
    let after = metrics().await;

    // counters are this process's (other tests share it): they grew by at
    // least what this test did
    let grew = |series: &str| {
        sample(&after, series).unwrap_or(0.0) - sample(&before, series).unwrap_or(0.0)
    };
    assert!(
        grew("holdfast_holds_total{outcome=\"held\"}") >= 1.0,
        "{after}"
    );
    assert!(
        grew("holdfast_holds_total{outcome=\"insufficient\"}") >= 3.0,
        "{after}"
    );
    // gauges are this database's: exact
    assert_eq!(sample(&after, "holdfast_database_up"), Some(1.0));
    for (counter, value) in [("total", 2.0), ("held", 2.0), ("sold", 0.0)] {
        assert_eq!(
            sample(
                &after,
                &format!(
                    "holdfast_resource_units{{resource=\"metrics-slot\",counter=\"{counter}\"}}"
                )
            ),
            Some(value),
            "{counter}"
        );
    }
    assert_eq!(
        sample(&after, "holdfast_resource_drift{resource=\"metrics-slot\"}"),
        Some(0.0)
    );
    assert_eq!(
        sample(&after, "holdfast_outbox_pending_jobs{kind=\"refund\"}"),
        Some(0.0)
    );
    assert_eq!(
        sample(&after, "holdfast_orders{state=\"pending\"}"),
        Some(0.0)
    );
    assert_eq!(
        sample(&after, "holdfast_outbox_oldest_pending_seconds"),
        Some(0.0)
    );
    // every family is announced once, with its type
    for family in [
        "holdfast_holds_total counter",
        "holdfast_database_up gauge",
        "holdfast_resource_drift gauge",
        "holdfast_outbox_pending_jobs gauge",
    ] {
        assert_eq!(
            after.matches(&format!("# TYPE {family}\n")).count(),
            1,
            "{family}"
        );
    }

    // drift shows: a hand-made change the counters do not know about
    sqlx::query("update resources set held = 1 where id = 'metrics-slot'")
        .execute(&app.db.pool)
        .await
        .unwrap();
    let drifted = metrics().await;
    assert_eq!(
        sample(
            &drifted,
            "holdfast_resource_drift{resource=\"metrics-slot\"}"
        ),
        Some(1.0)
    );
}

#[tokio::test]
async fn metrics_with_a_token_set_answer_only_the_bearer_of_it() {
    use holdfast::configuration::Secret;
    use holdfast_testkit::{TestDb, spawn_app_shaped};

    let token = "scrape-me-7f3a9c1e2b";
    let app = spawn_app_shaped(TestDb::new().await, |_, shop| {
        shop.metrics = holdfast::metrics::Exporter::new(Some(Secret::new(token)));
    })
    .await;
    let scrape = |authorization: Option<String>| {
        let mut request = app.client.get(format!("{}/metrics", app.address));
        if let Some(value) = authorization {
            request = request.header("Authorization", value);
        }
        async move { request.send().await.unwrap() }
    };
    for refused in [
        None,
        Some("Bearer wrong-token-0000000".to_owned()),
        Some(format!("Bearer {token}x")),
        Some(format!("Basic {token}")),
        Some(format!("bearer{token}")),
    ] {
        let response = scrape(refused.clone()).await;
        assert_eq!(response.status(), 401, "{refused:?}");
        assert_eq!(
            response.headers()["www-authenticate"],
            "Bearer realm=\"metrics\""
        );
        let body = response.text().await.unwrap();
        assert!(!body.contains("holdfast_"), "{body}");
        assert!(!body.contains(token), "the token never prints: {body}");
    }
    let allowed = scrape(Some(format!("Bearer {token}"))).await;
    assert_eq!(allowed.status(), 200);
    let body = allowed.text().await.unwrap();
    assert_eq!(sample(&body, "holdfast_database_up"), Some(1.0), "{body}");
}

#[tokio::test]
async fn metrics_without_a_token_answer_only_this_machine_unproxied() {
    let app = spawn_app().await;
    let scrape = |header: Option<(&'static str, &'static str)>| {
        let mut request = app.client.get(format!("{}/metrics", app.address));
        if let Some((name, value)) = header {
            request = request.header(name, value);
        }
        async move { request.send().await.unwrap() }
    };
    assert_eq!(scrape(None).await.status(), 200);
    // a local reverse proxy that forwards the public says so: not local
    for forwarded in [
        ("X-Forwarded-For", "203.0.113.7"),
        ("X-Forwarded-For", "127.0.0.1"),
        ("Forwarded", "for=198.51.100.2"),
    ] {
        let response = scrape(Some(forwarded)).await;
        assert_eq!(response.status(), 403, "{forwarded:?}");
        assert!(
            response
                .text()
                .await
                .unwrap()
                .contains("HOLDFAST_METRICS_TOKEN")
        );
    }
}

#[tokio::test]
async fn metrics_read_the_database_once_per_ten_seconds_however_many_scrape() {
    use holdfast_testkit::{TestDb, resource, spawn_app_shaped};

    // the production default: gauges kept ten seconds
    let app = spawn_app_shaped(TestDb::with_connections(4).await, |_, shop| {
        shop.metrics = holdfast::metrics::Exporter::new(None);
    })
    .await;
    let inventory = app.db.inventory();
    resource(&inventory, "cached-slot", 5).await;
    let series = "holdfast_resource_units{resource=\"cached-slot\",counter=\"total\"}";
    let scrape = || async {
        let response = app
            .client
            .get(format!("{}/metrics", app.address))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        response.text().await.unwrap()
    };
    let first_read = std::time::Instant::now();
    assert_eq!(sample(&scrape().await, series), Some(5.0));
    // the database changes; scrapes within ten seconds see the copy, and
    // three hundred at once on a four-connection pool neither queue on it
    // nor fail
    sqlx::query("update resources set total = 9 where id = 'cached-slot'")
        .execute(&app.db.pool)
        .await
        .unwrap();
    let pages = futures::future::join_all((0..300).map(|_| scrape())).await;
    for page in &pages {
        assert_eq!(sample(page, series), Some(5.0));
        assert_eq!(sample(page, "holdfast_database_up"), Some(1.0));
    }
    // the shop itself still answers at once: the pool was not drained
    let shop = app
        .client
        .get(format!("{}/healthz", app.address))
        .send()
        .await
        .unwrap();
    assert_eq!(shop.status(), 200);
    // and once the copy is ten seconds old, the next scrape reads anew
    loop {
        let page = scrape().await;
        if sample(&page, series) == Some(9.0) {
            break;
        }
        assert!(
            first_read.elapsed() < std::time::Duration::from_secs(15),
            "{page}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
    assert!(first_read.elapsed() >= holdfast::metrics::GAUGES_FRESH_FOR);
}
