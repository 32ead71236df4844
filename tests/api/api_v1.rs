//! The JSON API under /api/v1, over real HTTP: the OpenAPI document
//! (validated by openapi-spec-validator from PyPI, and describing exactly
//! the routes of the one table), a storefront buying through the API
//! alone, every route refusing a key without its scope, bad input on every
//! POST, and 200 parallel checkouts for 10 units.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use holdfast::routes::api::ROUTES;
use holdfast::staff::api_keys::Scope;
use holdfast_testkit::*;
use reqwest::StatusCode;
use serde_json::{Value, json};

const VALIDATOR: &str = "openapi-spec-validator==0.9.0";

fn validator_python() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let venv = root.join(".holdfast/openapi-venv");
    let python = venv.join("bin/python");
    let marker = venv.join(format!("installed-{VALIDATOR}"));
    if marker.exists() {
        return python;
    }
    assert!(
        Command::new("python3")
            .args(["-m", "venv"])
            .arg(&venv)
            .status()
            .unwrap()
            .success()
    );
    let installed = Command::new(&python)
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            VALIDATOR,
        ])
        .status()
        .unwrap();
    assert!(installed.success(), "pip could not install {VALIDATOR}");
    std::fs::write(&marker, b"").unwrap();
    python
}

fn client() -> reqwest::Client {
    holdfast::payments::http::client(Duration::from_secs(30))
}

/// A key with these scopes, made by the owner in the admin: its token.
async fn key_with(app: &TestApp, scopes: &[Scope]) -> String {
    let (staff, csrf) = app.signed_in(STAFF_EMAIL, STAFF_PASSWORD).await;
    let mut form = vec![("csrf", csrf.as_str()), ("name", "tests")];
    form.extend(scopes.iter().map(|s| ("scope", s.as_str())));
    let page = app.admin_post(&staff, "/admin/api-keys", &form).await;
    assert_eq!(page.status(), StatusCode::OK);
    let page = page.text().await.unwrap();
    let start = page.find("<code id=\"token\">").unwrap() + 17;
    page[start..].split('<').next().unwrap().to_owned()
}

async fn shop() -> TestApp {
    let app = spawn_app().await;
    app.load_demo().await;
    app.add_staff().await;
    app
}

fn checkout_body(email: &str, qty: i32) -> Value {
    json!({ "lines": [{ "product_id": "wild-honey", "qty": qty }], "name": "Ada", "email": email })
}

async fn post_checkout(app: &TestApp, token: &str, idem: Option<&str>, body: &str) -> (u16, Value) {
    let mut request = client()
        .post(format!("{}/api/v1/checkouts", app.address))
        .bearer_auth(token)
        .header("content-type", "application/json")
        .body(body.to_owned());
    if let Some(idem) = idem {
        request = request.header("idempotency-key", idem);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

fn is_error(body: &Value, code: &str) {
    assert_eq!(body["error"]["code"], code, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()),
        "{body}"
    );
}

async fn count(app: &TestApp, table: &str) -> i64 {
    sqlx::query_scalar(&format!("select count(*) from {table}"))
        .fetch_one(&app.db.pool)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openapi_document_is_valid_and_describes_exactly_the_routes() {
    let app = shop().await;
    let document: Value = client()
        .get(format!("{}/api/v1/openapi.json", app.address))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(
        document["openapi"].as_str().unwrap().starts_with("3.1"),
        "{}",
        document["openapi"]
    );
    // the official validator accepts it
    let file = std::env::temp_dir().join(format!("holdfast-openapi-{}.json", std::process::id()));
    std::fs::write(&file, document.to_string()).unwrap();
    let python = tokio::task::spawn_blocking(validator_python).await.unwrap();
    let checked = Command::new(python)
        .args(["-m", "openapi_spec_validator"])
        .arg(&file)
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&file);
    assert!(
        checked.status.success(),
        "{}{}",
        String::from_utf8_lossy(&checked.stdout),
        String::from_utf8_lossy(&checked.stderr)
    );
    // every route of the table is described, and nothing else
    let routes: BTreeSet<(String, String)> = ROUTES
        .iter()
        .map(|r| (r.verb.as_str().to_owned(), format!("/api/v1{}", r.path)))
        .collect();
    let mut described = BTreeSet::new();
    for (path, item) in document["paths"].as_object().unwrap() {
        for method in item.as_object().unwrap().keys() {
            if ["get", "post", "put", "patch", "delete"].contains(&method.as_str()) {
                described.insert((method.clone(), path.clone()));
            }
        }
    }
    assert_eq!(routes, described, "the router and the document differ");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_storefront_buys_through_the_api_alone() {
    let app = shop().await;
    let token = key_with(&app, &[Scope::ReadCatalogue, Scope::StartCheckouts]).await;
    let catalogue: Value = client()
        .get(format!("{}/api/v1/catalogue", app.address))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let honey = catalogue["products"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["id"] == "wild-honey")
        .expect("honey is on sale");
    assert!(honey["available"].as_i64().unwrap() >= 2);
    let body = checkout_body("ada@example.com", 2).to_string();
    let (status, started) = post_checkout(&app, &token, Some("storefront-order-1"), &body).await;
    assert_eq!(status, 201, "{started}");
    let payment_url = started["payment_url"].as_str().unwrap().to_owned();
    let order_token = started["order_token"].as_str().unwrap().to_owned();
    // a retry with the same key and body: the same answer, no second order
    let (again_status, again) =
        post_checkout(&app, &token, Some("storefront-order-1"), &body).await;
    assert_eq!((again_status, &again), (201, &started));
    assert_eq!(count(&app, "orders").await, 1);
    // the shopper pays on the provider's page
    let shopper = browser();
    let paid = shopper
        .post(format!("{payment_url}/pay"))
        .send()
        .await
        .unwrap();
    assert_eq!(paid.status(), StatusCode::SEE_OTHER);
    let back = paid.headers()["location"].to_str().unwrap().to_owned();
    shopper.get(&back).send().await.unwrap();
    app.wait_for_state(&order_token, "paid").await;
    let order: Value = client()
        .get(format!(
            "{}/api/v1/orders/by-token/{order_token}",
            app.address
        ))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(order["order"]["state"], "paid", "{order}");
    assert_eq!(order["order"]["lines"][0]["qty"], 2);
    // availability from memory knows it
    app.settled().await;
    let stock: Value = client()
        .get(format!(
            "{}/api/v1/availability?ids=wild-honey",
            app.address
        ))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        stock["products"][0]["available"].as_i64().unwrap(),
        honey["available"].as_i64().unwrap() - 2
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_refuses_a_key_without_its_scope_and_a_revoked_key() {
    let app = shop().await;
    let mut checked = 0;
    for route in ROUTES {
        let Some(scope) = route.scope else { continue };
        let others: Vec<Scope> = Scope::ALL.into_iter().filter(|s| *s != scope).collect();
        let token = key_with(&app, &others).await;
        let path = format!("/api/v1{}", route.path.replace("{token}", "nosuchtoken"));
        let url = format!("{}{path}", app.address);
        let request = match route.verb {
            holdfast::routes::api::Verb::Get => client().get(&url),
            holdfast::routes::api::Verb::Post => client()
                .post(&url)
                .header("idempotency-key", "scope-test")
                .body("{}"),
        };
        let answer = request.bearer_auth(&token).send().await.unwrap();
        assert_eq!(answer.status(), StatusCode::FORBIDDEN, "{path}");
        is_error(&answer.json().await.unwrap(), "missing_scope");
        // without a key, or with a made-up one: 401
        for bad in ["", "hf_000000000000_nothing"] {
            let answer = client().get(&url).bearer_auth(bad).send().await.unwrap();
            if route.verb == holdfast::routes::api::Verb::Get {
                assert_eq!(answer.status(), StatusCode::UNAUTHORIZED, "{path}");
                is_error(&answer.json().await.unwrap(), "unauthenticated");
            }
        }
        checked += 1;
    }
    assert_eq!(checked, ROUTES.iter().filter(|r| r.scope.is_some()).count());
    assert!(checked >= 5);
    let activity = sqlx::query_scalar::<_, i64>(
        "select count(*) from staff_actions where action = 'api_refused'",
    )
    .fetch_one(&app.db.pool)
    .await
    .unwrap();
    assert_eq!(activity, checked as i64, "every refusal recorded");

    // a revoked key: 401
    let token = key_with(&app, &Scope::ALL).await;
    let id = token.split('_').nth(1).unwrap();
    let (staff, csrf) = app.signed_in(STAFF_EMAIL, STAFF_PASSWORD).await;
    let url = format!("{}/api/v1/catalogue", app.address);
    assert_eq!(
        client()
            .get(&url)
            .bearer_auth(&token)
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    app.admin_post(
        &staff,
        &format!("/admin/api-keys/{id}/revoke"),
        &[("csrf", &csrf)],
    )
    .await;
    let answer = client().get(&url).bearer_auth(&token).send().await.unwrap();
    assert_eq!(answer.status(), StatusCode::UNAUTHORIZED);
    is_error(&answer.json().await.unwrap(), "unauthenticated");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_on_every_post_is_refused_with_nothing_changed() {
    let app = shop().await;
    let token = key_with(&app, &Scope::ALL).await;
    let before = snapshot(&app.db.pool).await;
    for route in ROUTES
        .iter()
        .filter(|r| r.verb == holdfast::routes::api::Verb::Post)
    {
        assert_eq!(
            route.path, "/checkouts",
            "a new POST route needs its bad input here"
        );
        let (status, body) = post_checkout(&app, &token, Some("bad-1"), "{\"lines\": [").await;
        assert_eq!(status, 400);
        is_error(&body, "bad_json");
        let (status, body) = post_checkout(&app, &token, Some("bad-2"), "[1, 2, 3]").await;
        assert_eq!(status, 400);
        is_error(&body, "bad_json");
        let (status, body) =
            post_checkout(&app, &token, Some("bad-3"), &"x".repeat(64 * 1024)).await;
        assert_eq!(status, 413);
        is_error(&body, "too_large");
        let good = checkout_body("bad@example.com", 1).to_string();
        let (status, body) = post_checkout(&app, &token, None, &good).await;
        assert_eq!(status, 400);
        is_error(&body, "idempotency_key_required");
        let (status, body) = post_checkout(&app, &token, Some("has spaces"), &good).await;
        assert_eq!(status, 400);
        is_error(&body, "idempotency_key_required");
        let zero = checkout_body("bad@example.com", 0).to_string();
        let (status, body) = post_checkout(&app, &token, Some("bad-4"), &zero).await;
        assert_eq!(status, 422);
        is_error(&body, "bad_lines");
    }
    assert_eq!(snapshot(&app.db.pool).await, before, "nothing changed");
    // a key used twice with different bodies: the second is refused
    let first = checkout_body("one@example.com", 1).to_string();
    let (status, _) = post_checkout(&app, &token, Some("reused"), &first).await;
    assert_eq!(status, 201);
    let other = checkout_body("two@example.com", 1).to_string();
    let (status, body) = post_checkout(&app, &token, Some("reused"), &other).await;
    assert_eq!(status, 422);
    is_error(&body, "idempotency_key_reused");
    assert_eq!(count(&app, "orders").await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_api_checkouts_for_ten_units_get_ten_payment_pages() {
    let app = shop().await;
    let token = key_with(&app, &[Scope::StartCheckouts]).await;
    sqlx::query(
        "update resources set total = held + sold + 10 \
          where id = (select resource_id from products where id = 'wild-honey')",
    )
    .execute(&app.db.pool)
    .await
    .unwrap();
    app.settled().await;
    let calls = (0..200).map(|i| {
        let (app, token) = (&app, &token);
        async move {
            let body = checkout_body(&format!("crowd{i}@example.com"), 1).to_string();
            post_checkout(app, token, Some(&format!("crowd-{i}")), &body).await
        }
    });
    let answers = futures::future::join_all(calls).await;
    let paying: Vec<&Value> = answers
        .iter()
        .filter(|(s, b)| *s == 201 && b["payment_url"].as_str().is_some())
        .map(|(_, b)| b)
        .collect();
    let refused = answers
        .iter()
        .filter(|(s, b)| *s == 409 && b["error"]["code"] == "sold_out")
        .count();
    let others: Vec<_> = answers
        .iter()
        .filter(|(s, _)| *s != 201 && *s != 409)
        .collect();
    assert!(others.is_empty(), "{others:?}");
    assert_eq!(paying.len(), 10, "exactly ten payment pages");
    assert_eq!(refused, 190, "190 clear refusals");
    let urls: BTreeSet<&str> = paying
        .iter()
        .map(|b| b["payment_url"].as_str().unwrap())
        .collect();
    assert_eq!(urls.len(), 10, "ten different pages");
    assert_no_drift(&app.db.inventory()).await;
    assert_eq!(count(&app, "orders").await, 10);
}
