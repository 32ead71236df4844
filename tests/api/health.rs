use crate::helpers::spawn_app;

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
    use crate::helpers::{assert_no_drift, hold_ok, request, resource};
    use holdfast::inventory::HoldOutcome;

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
