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
pub(crate) async fn key_with(app: &TestApp, scopes: &[Scope]) -> String {
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
    post_to(app, token, "/checkouts", idem, body).await
}

/// A POST to `path` under /api/v1: its status and JSON answer.
async fn post_to(
    app: &TestApp,
    token: &str,
    path: &str,
    idem: Option<&str>,
    body: &str,
) -> (u16, Value) {
    let mut request = client()
        .post(format!("{}/api/v1{path}", app.address))
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

/// An order id no order has.
const NO_ORDER: &str = "00000000-0000-0000-0000-000000000000";

/// Each POST route: the path to ask, a body it takes, and one it refuses
/// as bad input with the status and code it says.
fn post_bodies(route: &str) -> (String, Value, Value, u16, &'static str) {
    match route {
        "/checkouts" => (
            route.into(),
            checkout_body("bad@example.com", 1),
            checkout_body("bad@example.com", 0),
            422,
            "bad_lines",
        ),
        "/orders/{id}/refunds" => (
            format!("/orders/{NO_ORDER}/refunds"),
            json!({ "reason": "broken" }),
            json!({ "reason": "  " }),
            422,
            "invalid_input",
        ),
        "/redemptions" => (
            route.into(),
            json!({ "code": "TKT-AAAA-BBBB", "place": "North door" }),
            json!({ "code": "TKT-AAAA-BBBB", "place": "x".repeat(101) }),
            422,
            "invalid_input",
        ),
        "/vouchers" => (
            route.into(),
            json!({ "code": "BADINPUT", "percent_off": 10, "uses": 5 }),
            json!({ "code": "BADINPUT", "percent_off": 10, "uses": 0 }),
            422,
            "invalid_input",
        ),
        // it takes no body: anything in one is refused
        "/vouchers/{code}/archive" => (
            "/vouchers/NO-SUCH-VOUCHER/archive".into(),
            json!({}),
            json!({ "reason": "spring is over" }),
            400,
            "bad_json",
        ),
        other => panic!("a new POST route needs its bad input here: {other}"),
    }
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
    // the key's checkout is in Activity, once
    let recorded: Vec<String> =
        sqlx::query_scalar("select target from staff_actions where action = 'api_checkout'")
            .fetch_all(&app.db.pool)
            .await
            .unwrap();
    assert_eq!(recorded, vec![order_token.clone()]);
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
        let path = format!(
            "/api/v1{}",
            route
                .path
                .replace("{token}", "nosuchtoken")
                .replace("{id}", NO_ORDER)
                .replace("{code}", "NO-SUCH-VOUCHER")
        );
        let url = format!("{}{path}", app.address);
        let request = || match route.verb {
            holdfast::routes::api::Verb::Get => client().get(&url),
            holdfast::routes::api::Verb::Post => client()
                .post(&url)
                .header("idempotency-key", "scope-test")
                .body("{}"),
        };
        let answer = request().bearer_auth(&token).send().await.unwrap();
        assert_eq!(answer.status(), StatusCode::FORBIDDEN, "{path}");
        is_error(&answer.json().await.unwrap(), "missing_scope");
        // without a key, or with a made-up one: 401, on every route
        for bad in ["", "hf_000000000000_nothing"] {
            let answer = request().bearer_auth(bad).send().await.unwrap();
            assert_eq!(answer.status(), StatusCode::UNAUTHORIZED, "{path}");
            is_error(&answer.json().await.unwrap(), "unauthenticated");
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
    let mut checked = 0;
    for route in ROUTES
        .iter()
        .filter(|r| r.verb == holdfast::routes::api::Verb::Post)
    {
        let (path, good, bad, bad_status, code) = post_bodies(route.path);
        let post = |idem, body: String| {
            let (app, token, path) = (&app, &token, path.clone());
            async move { post_to(app, token, &path, idem, &body).await }
        };
        let (status, body) = post(Some("bad-1"), "{\"lines\": [".into()).await;
        assert_eq!(status, 400, "{path}");
        is_error(&body, "bad_json");
        let (status, body) = post(Some("bad-2"), "[1, 2, 3]".into()).await;
        assert_eq!(status, 400, "{path}");
        is_error(&body, "bad_json");
        let (status, body) = post(Some("bad-3"), "x".repeat(64 * 1024)).await;
        assert_eq!(status, 413, "{path}");
        is_error(&body, "too_large");
        let (status, body) = post(None, good.to_string()).await;
        assert_eq!(status, 400, "{path}");
        is_error(&body, "idempotency_key_required");
        let (status, body) = post(Some("has spaces"), good.to_string()).await;
        assert_eq!(status, 400, "{path}");
        is_error(&body, "idempotency_key_required");
        let (status, body) = post(Some("bad-4"), bad.to_string()).await;
        assert_eq!(status, bad_status, "{path}: {body}");
        is_error(&body, code);
        checked += 1;
    }
    assert!(checked >= 5, "every POST route checked");
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

/// What keys did, as Activity keeps it: (action, outcome) of each row an
/// API key is the actor of, oldest first.
async fn key_activity(app: &TestApp, action: &str) -> Vec<(String, String)> {
    sqlx::query_as(
        "select operator, outcome from staff_actions \
          where action = $1 and operator like 'api key %' order by id",
    )
    .bind(action)
    .fetch_all(&app.db.pool)
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_back_office_refunds_through_the_api_once_per_idempotency_key() {
    let app = shop().await;
    let token = key_with(&app, &[Scope::Refund]).await;
    let order =
        holdfast_testkit::engine::paid(&app.db, "api-refund", &[("harbour-lights-general", 2)])
            .await;
    let path = format!("/orders/{}/refunds", order.id);
    let one = json!({
        "units": [{ "product_id": "harbour-lights-general", "qty": 1 }],
        "reason": "could not come",
    })
    .to_string();
    let (status, first) = post_to(&app, &token, &path, Some("refund-1"), &one).await;
    assert_eq!(status, 201, "{first}");
    assert_eq!(first["outcome"], "queued");
    assert_eq!(first["units"], 1);
    assert_eq!(first["whole"], false);
    assert!(first["amount_minor"].as_i64().unwrap() > 0, "{first}");
    assert_eq!(first["currency"], order.currency);
    // the same key again: the same refund, not a second one
    let (status, again) = post_to(&app, &token, &path, Some("refund-1"), &one).await;
    assert_eq!((status, &again), (201, &first));
    assert_eq!(count(&app, "order_refunds").await, 1);
    // the same key with another body: refused
    let other = json!({ "reason": "the whole of it" }).to_string();
    let (status, body) = post_to(&app, &token, &path, Some("refund-1"), &other).await;
    assert_eq!(status, 422);
    is_error(&body, "idempotency_key_reused");
    // the same key and body for another order: refused, not answered with
    // the first order's refund (which would leave this one unrefunded)
    let another =
        holdfast_testkit::engine::paid(&app.db, "api-refund-b", &[("harbour-lights-general", 1)])
            .await;
    let (status, body) = post_to(
        &app,
        &token,
        &format!("/orders/{}/refunds", another.id),
        Some("refund-1"),
        &one,
    )
    .await;
    assert_eq!(status, 422, "{body}");
    is_error(&body, "idempotency_key_reused");
    let refunded: i64 =
        sqlx::query_scalar("select count(*) from order_refunds where order_id = $1")
            .bind(another.id)
            .fetch_one(&app.db.pool)
            .await
            .unwrap();
    assert_eq!(refunded, 0);
    // refusals, each with its code
    let cases = [
        (
            json!({ "units": [{ "product_id": "wild-honey", "qty": 1 }], "reason": "x" }),
            422,
            "not_in_order",
        ),
        (
            json!({ "units": [{ "product_id": "harbour-lights-general", "qty": 2 }], "reason": "x" }),
            422,
            "too_many",
        ),
    ];
    for (i, (body, want, code)) in cases.iter().enumerate() {
        let (status, answer) = post_to(
            &app,
            &token,
            &path,
            Some(&format!("refused-{i}")),
            &body.to_string(),
        )
        .await;
        assert_eq!(status, *want, "{answer}");
        is_error(&answer, code);
    }
    let (status, answer) = post_to(
        &app,
        &token,
        &format!("/orders/{NO_ORDER}/refunds"),
        Some("nowhere"),
        &other,
    )
    .await;
    assert_eq!(status, 404);
    is_error(&answer, "not_found");
    // the rest of the order; then it is refunded, no longer paid
    let (status, rest) = post_to(&app, &token, &path, Some("refund-2"), &other).await;
    assert_eq!(status, 201, "{rest}");
    assert_eq!(rest["whole"], true);
    let (status, answer) = post_to(&app, &token, &path, Some("refund-3"), &other).await;
    assert_eq!(status, 409);
    is_error(&answer, "not_paid");
    assert_eq!(count(&app, "order_refunds").await, 2);
    // the key is the actor of each attempt, in Activity
    let outcomes: Vec<String> = key_activity(&app, "refund_order")
        .await
        .into_iter()
        .map(|(by, outcome)| {
            assert!(by.ends_with("(tests)"), "{by}");
            outcome
        })
        .collect();
    assert_eq!(
        outcomes,
        [
            "queued",
            "not_in_order",
            "too_many",
            "not_found",
            "queued",
            "not_paid"
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_door_scanner_redeems_a_code_once_through_the_api() {
    let app = shop().await;
    let token = key_with(&app, &[Scope::Redeem]).await;
    holdfast_testkit::engine::paid(&app.db, "api-door", &[("harbour-lights-general", 1)]).await;
    let code: String = sqlx::query_scalar("select code from order_items")
        .fetch_one(&app.db.pool)
        .await
        .unwrap();
    // typed loosely: lower case, with spaces
    let typed = code.to_lowercase().replace('-', " ");
    let scan = json!({ "code": typed, "place": "North door" }).to_string();
    let (status, first) = post_to(&app, &token, "/redemptions", Some("scan-1"), &scan).await;
    assert_eq!(status, 200, "{first}");
    assert_eq!(first["outcome"], "admitted", "{first}");
    assert_eq!(first["code"], code.as_str());
    assert_eq!(first["kind"], "ticket");
    assert_eq!(first["lets_through"], true);
    // the same scan again (its answer lost): told what it did
    let (status, again) = post_to(&app, &token, "/redemptions", Some("scan-1"), &scan).await;
    assert_eq!((status, &again), (200, &first));
    // another scan of the same code: already used, by this key, here
    let (status, second) = post_to(&app, &token, "/redemptions", Some("scan-2"), &scan).await;
    assert_eq!(status, 200, "{second}");
    assert_eq!(second["outcome"], "already_used", "{second}");
    assert_eq!(second["lets_through"], false);
    assert_eq!(second["place"], "North door");
    assert!(
        second["redeemed_by"]
            .as_str()
            .unwrap()
            .starts_with("api key "),
        "{second}"
    );
    let nothing = json!({ "code": "TKT-NONE-NONE", "place": "" }).to_string();
    let (status, answer) = post_to(&app, &token, "/redemptions", Some("scan-3"), &nothing).await;
    assert_eq!(status, 200);
    assert_eq!(answer["outcome"], "not_valid");
    assert_eq!(count(&app, "redemptions").await, 1);
    let outcomes: Vec<String> = key_activity(&app, "redeem")
        .await
        .into_iter()
        .map(|(_, outcome)| outcome)
        .collect();
    assert_eq!(outcomes, ["admitted", "already_used", "not_valid"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_back_office_makes_and_lists_vouchers_through_the_api() {
    let app = shop().await;
    let token = key_with(&app, &[Scope::ManageVouchers]).await;
    let spring = json!({ "code": "spring-ten", "percent_off": 10, "uses": 5 }).to_string();
    let (status, made) = post_to(&app, &token, "/vouchers", Some("v-1"), &spring).await;
    assert_eq!(status, 201, "{made}");
    let code = made["code"].as_str().unwrap().to_owned();
    assert!(code.eq_ignore_ascii_case("spring-ten"), "{made}");
    // replayed: the same answer
    let (status, again) = post_to(&app, &token, "/vouchers", Some("v-1"), &spring).await;
    assert_eq!((status, &again), (201, &made));
    // the same code under another key: it exists
    let (status, body) = post_to(&app, &token, "/vouchers", Some("v-2"), &spring).await;
    assert_eq!(status, 409);
    is_error(&body, "exists");
    // the check's words
    let both = json!({ "code": "both", "percent_off": 10, "amount_off_minor": 100, "uses": 5 })
        .to_string();
    let (status, body) = post_to(&app, &token, "/vouchers", Some("v-3"), &both).await;
    assert_eq!(status, 422);
    is_error(&body, "invalid_input");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not both"),
        "{body}"
    );
    let unknown =
        json!({ "code": "nosuch", "percent_off": 10, "uses": 5, "products": ["no-such-thing"] })
            .to_string();
    let (status, body) = post_to(&app, &token, "/vouchers", Some("v-4"), &unknown).await;
    assert_eq!(status, 422);
    is_error(&body, "unknown_products");
    // listed with its uses
    let listed: Value = client()
        .get(format!("{}/api/v1/vouchers", app.address))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let vouchers = listed["vouchers"].as_array().unwrap();
    let spring = vouchers
        .iter()
        .find(|v| v["code"] == code.as_str())
        .unwrap_or_else(|| panic!("{listed}"));
    assert_eq!(
        (&spring["uses"], &spring["held"], &spring["used"]),
        (&json!(5), &json!(0), &json!(0)),
        "{spring}"
    );
    assert!(
        spring["created_by"]
            .as_str()
            .unwrap()
            .starts_with("api key "),
        "{spring}"
    );
    assert_eq!(
        key_activity(&app, "create_voucher").await.len(),
        1,
        "the one made is recorded, by the key"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_replays_of_one_refund_are_one_refund_and_a_redeemed_code_is_not_refunded() {
    let app = shop().await;
    let token = key_with(&app, &[Scope::Refund, Scope::Redeem]).await;
    let order =
        holdfast_testkit::engine::paid(&app.db, "api-race", &[("harbour-lights-general", 2)]).await;
    let path = format!("/orders/{}/refunds", order.id);
    let one = json!({
        "units": [{ "product_id": "harbour-lights-general", "qty": 1 }],
        "reason": "one of two",
        "restock": false,
    })
    .to_string();
    let answers = futures::future::join_all(
        (0..5).map(|_| post_to(&app, &token, &path, Some("race-1"), &one)),
    )
    .await;
    for (status, body) in &answers {
        assert_eq!(*status, 201, "{body}");
        assert_eq!(body["refund_id"], answers[0].1["refund_id"], "{body}");
    }
    assert_eq!(count(&app, "order_refunds").await, 1, "one refund");
    // the unit left has a code; once redeemed, the API does not refund it
    let codes: Vec<String> = sqlx::query_scalar("select code from order_items order by code")
        .fetch_all(&app.db.pool)
        .await
        .unwrap();
    for (i, code) in codes.iter().enumerate() {
        let scan = json!({ "code": code, "place": "Gate" }).to_string();
        post_to(
            &app,
            &token,
            "/redemptions",
            Some(&format!("gate-{i}")),
            &scan,
        )
        .await;
    }
    let rest = json!({ "reason": "the rest" }).to_string();
    let (status, body) = post_to(&app, &token, &path, Some("race-2"), &rest).await;
    assert_eq!(status, 409, "{body}");
    is_error(&body, "redeemed");
    assert_eq!(count(&app, "order_refunds").await, 1);
    // said outright, it is refunded anyway, and Activity says so
    let anyway = json!({ "reason": "the rest", "override_redeemed": true }).to_string();
    let (status, body) = post_to(&app, &token, &path, Some("race-3"), &anyway).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(
        (body["units"].as_i64(), body["whole"].as_bool()),
        (Some(1), Some(true))
    );
    assert_eq!(count(&app, "order_refunds").await, 2);
    let overridden: Vec<bool> = sqlx::query_scalar(
        "select (detail->>'override_redeemed')::boolean from staff_actions \
          where action = 'refund_order' and outcome = 'queued' order by id",
    )
    .fetch_all(&app.db.pool)
    .await
    .unwrap();
    // (a racing replay that reached the refund is recorded as an attempt of
    // its own, so the first refund has one record or several)
    assert_eq!(overridden.last(), Some(&true), "{overridden:?}");
    assert_eq!(
        overridden.iter().filter(|o| **o).count(),
        1,
        "{overridden:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_counter_collects_a_pickup_code_through_the_api() {
    let app = shop().await;
    let token = key_with(&app, &[Scope::Redeem]).await;
    let slot = app.db.first_slot().await;
    holdfast_testkit::engine::paid(&app.db, "api-counter", &[(slot.as_str(), 2)]).await;
    let code: String = sqlx::query_scalar("select code from order_items")
        .fetch_one(&app.db.pool)
        .await
        .unwrap();
    let scan = json!({ "code": code, "place": "Counter" }).to_string();
    let (status, first) = post_to(&app, &token, "/redemptions", Some("pick-1"), &scan).await;
    assert_eq!(status, 200, "{first}");
    assert_eq!(
        (&first["outcome"], &first["kind"], &first["lets_through"]),
        (&json!("collected"), &json!("pickup"), &json!(true)),
        "{first}"
    );
    let (_, second) = post_to(&app, &token, "/redemptions", Some("pick-2"), &scan).await;
    assert_eq!(second["outcome"], "already_used", "{second}");
    assert_eq!(second["place"], "Counter");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_back_office_archives_a_voucher_through_the_api() {
    let app = shop().await;
    let token = key_with(&app, &[Scope::ManageVouchers]).await;
    let autumn = json!({ "code": "autumn", "percent_off": 10, "uses": 5 }).to_string();
    let (status, _) = post_to(&app, &token, "/vouchers", Some("make"), &autumn).await;
    assert_eq!(status, 201);
    // an unlock must be a hidden product: one on sale to all is refused
    let open = json!({ "code": "opens", "percent_off": 10, "uses": 5, "unlocks": ["wild-honey"] })
        .to_string();
    let (status, body) = post_to(&app, &token, "/vouchers", Some("open"), &open).await;
    assert_eq!(status, 422, "{body}");
    is_error(&body, "not_hidden");
    // archived; the same key again gets the same answer
    let (status, first) = post_to(&app, &token, "/vouchers/autumn/archive", Some("a-1"), "").await;
    assert_eq!(status, 200, "{first}");
    assert_eq!(
        (&first["code"], &first["archived"]),
        (&json!("AUTUMN"), &json!(true))
    );
    let (status, again) = post_to(&app, &token, "/vouchers/AUTUMN/archive", Some("a-1"), "").await;
    assert_eq!((status, &again), (200, &first));
    // under another key: archived already; another voucher: not found
    let (status, body) = post_to(&app, &token, "/vouchers/autumn/archive", Some("a-2"), "{}").await;
    assert_eq!(status, 409, "{body}");
    is_error(&body, "archived");
    let (status, body) = post_to(&app, &token, "/vouchers/winter/archive", Some("a-3"), "").await;
    assert_eq!(status, 404, "{body}");
    is_error(&body, "not_found");
    // a key reused for another voucher is refused, not answered as the first
    let (status, body) = post_to(&app, &token, "/vouchers/winter/archive", Some("a-1"), "").await;
    assert_eq!(status, 422, "{body}");
    is_error(&body, "idempotency_key_reused");
    assert_eq!(
        key_activity(&app, "archive_voucher").await.len(),
        1,
        "the one archive is recorded, by the key"
    );
    // a shopper can no longer use it
    let refused = app
        .try_start(&browser(), &Purchase::of("wild-honey", 1).voucher("AUTUMN"))
        .await;
    assert!(matches!(refused, Attempt::Refused(_)), "{refused:?}");
}

/// A CSV's rows, the byte order mark and header aside.
fn csv_rows(body: &str) -> Vec<Vec<String>> {
    let body = body.strip_prefix('\u{feff}').expect("a byte order mark");
    crate::exports::parse_csv(body).split_off(1)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_back_office_exports_orders_and_attendees_through_the_api() {
    let app = shop().await;
    let token = key_with(&app, &[Scope::Export]).await;
    holdfast_testkit::engine::paid(&app.db, "api-export-1", &[("harbour-lights-general", 2)]).await;
    holdfast_testkit::engine::paid(&app.db, "api-export-2", &[("wild-honey", 1)]).await;
    let get = |path: &str| {
        let url = format!("{}/api/v1{path}", app.address);
        let token = token.clone();
        async move {
            let answer = client().get(url).bearer_auth(token).send().await.unwrap();
            let status = answer.status().as_u16();
            let kind = answer
                .headers()
                .get("content-type")
                .map(|v| v.to_str().unwrap().to_owned())
                .unwrap_or_default();
            (status, kind, answer.text().await.unwrap())
        }
    };
    let (status, kind, body) = get("/exports/orders.csv?state=paid").await;
    assert_eq!(status, 200, "{body}");
    assert!(kind.starts_with("text/csv"), "{kind}");
    assert_eq!(csv_rows(&body).len(), 2, "{body}");
    let (status, _, body) = get("/exports/attendees.csv?product=harbour-lights-general").await;
    assert_eq!(status, 200, "{body}");
    let rows = csv_rows(&body);
    assert_eq!(rows.len(), 2, "one line per ticket: {body}");
    assert!(rows.iter().all(|r| r[1] == "ticket"), "{body}");
    // bad filters: a clear error, and nothing exported
    for (path, want, code) in [
        ("/exports/orders.csv?stat=paid", 422, "invalid_input"),
        (
            "/exports/orders.csv?paid_from=yesterday",
            422,
            "invalid_input",
        ),
        (
            "/exports/attendees.csv?product=no-such-thing",
            404,
            "not_found",
        ),
    ] {
        let (status, kind, body) = get(path).await;
        assert_eq!(status, want, "{path}: {body}");
        assert!(kind.starts_with("application/json"), "{path}: {kind}");
        is_error(&serde_json::from_str(&body).unwrap(), code);
    }
    // each export recorded, by the key
    let recorded: Vec<String> = sqlx::query_scalar(
        "select action from staff_actions \
          where action like 'export_%' and operator like 'api key %' order by id",
    )
    .fetch_all(&app.db.pool)
    .await
    .unwrap();
    assert_eq!(recorded, ["export_orders", "export_attendees"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_the_api_cannot_read_is_answered_in_its_error_shape_and_changes_nothing() {
    let app = shop().await;
    let token = key_with(
        &app,
        &[
            Scope::ReadOrders,
            Scope::ReadCatalogue,
            Scope::StartCheckouts,
        ],
    )
    .await;
    let before = snapshot(&app.db.pool).await;
    let get = |path: &str| {
        let url = format!("{}/api/v1{path}", app.address);
        let token = token.clone();
        async move {
            let response = client().get(url).bearer_auth(token).send().await.unwrap();
            let status = response.status().as_u16();
            let kind = response
                .headers()
                .get("content-type")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_owned();
            (
                status,
                kind,
                response.json::<Value>().await.unwrap_or(Value::Null),
            )
        }
    };
    for (path, status, code) in [
        ("/orders?limit=abc", 400, "bad_query"),
        ("/orders?limit=0", 400, "bad_limit"),
        ("/orders?after=%ZZ", 400, "bad_cursor"),
        ("/orders?after=not-a-cursor", 400, "bad_cursor"),
        ("/availability?ids=a&ids=b", 400, "bad_query"),
        ("/orders?after=%00", 400, "bad_request"),
        ("/orders/by-token/%00", 400, "bad_request"),
    ] {
        let (got, kind, body) = get(path).await;
        assert_eq!(got, status, "{path}: {body}");
        assert!(kind.starts_with("application/json"), "{path}: {kind}");
        is_error(&body, code);
    }
    // a body far larger than any the API takes
    let huge = format!("{{\"name\": \"{}\"}}", "x".repeat(100 * 1024));
    let (status, body) = post_checkout(&app, &token, Some("huge"), &huge).await;
    assert_eq!(status, 413, "{body}");
    is_error(&body, "too_large");
    assert_eq!(snapshot(&app.db.pool).await, before, "nothing changed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_storefront_passes_each_shoppers_address_and_a_429_is_not_kept_under_its_key() {
    use holdfast::limits::client::Fairness;
    use holdfast::limits::{Limits, Rate, TrustedProxies};
    // two units per address at once; a bucket of two checkouts, one back a second
    let limits = Limits {
        address_rate: Some(Rate {
            capacity: 2.0,
            per_second: 1.0,
        }),
        address_units: Some(2),
        per_email: false,
    };
    let app = spawn_app_shaped(TestDb::new().await, |_, shop| {
        shop.fairness = Fairness::new(shop.pool.clone(), limits, TrustedProxies::default());
    })
    .await;
    app.load_demo().await;
    app.add_staff().await;
    let token = key_with(&app, &[Scope::StartCheckouts]).await;
    let buy = |n: usize, address: Option<&str>| {
        let mut body = checkout_body(&format!("s{n}@example.com"), 2);
        if let Some(address) = address {
            body["shopper_address"] = json!(address);
        }
        body.to_string()
    };
    // one storefront server, three shoppers it names: each has its own
    // address's room (two units), which one address alone would not have
    for (n, address) in ["203.0.113.1", "203.0.113.2", "2001:db8::1"]
        .iter()
        .enumerate()
    {
        let (status, body) = post_checkout(
            &app,
            &token,
            Some(&format!("s-{n}")),
            &buy(n, Some(address)),
        )
        .await;
        assert_eq!(status, 201, "{address}: {body}");
    }
    // the same shopper again: over their address's two units
    let (status, body) =
        post_checkout(&app, &token, Some("s-again"), &buy(9, Some("203.0.113.1"))).await;
    assert_eq!(status, 409, "{body}");
    is_error(&body, "over_limit");
    // an address that is not one: refused, nothing held
    let (status, body) = post_checkout(&app, &token, Some("s-bad"), &buy(8, Some("shop-42"))).await;
    assert_eq!(status, 422, "{body}");
    is_error(&body, "invalid_input");
    let orders = count(&app, "orders").await;
    assert_eq!(orders, 3);
    // one address's bucket runs dry: 429, and the same key a moment later
    // is tried again, not told "too fast" for ever
    let address = "198.51.100.77";
    let mut answers = Vec::new();
    for n in 0..3 {
        answers.push(
            post_checkout(&app, &token, Some(&format!("r-{n}")), &{
                let mut body = checkout_body(&format!("r{n}@example.com"), 1);
                body["shopper_address"] = json!(address);
                body.to_string()
            })
            .await,
        );
    }
    assert_eq!(
        answers.iter().map(|(s, _)| *s).collect::<Vec<_>>(),
        [201, 201, 429],
        "{answers:?}"
    );
    is_error(&answers[2].1, "too_fast");
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let mut body = checkout_body("r2@example.com", 1);
    body["shopper_address"] = json!(address);
    let (status, again) = post_checkout(&app, &token, Some("r-2"), &body.to_string()).await;
    // its address holds two units now: the limit answers, not the bucket
    assert_eq!(status, 409, "{again}");
    is_error(&again, "over_limit");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orders_page_by_cursor_each_once_and_the_last_page_says_so() {
    let app = shop().await;
    let token = key_with(&app, &[Scope::ReadOrders]).await;
    let mut made = Vec::new();
    for i in 0..7 {
        made.push(
            holdfast_testkit::engine::paid(&app.db, &format!("page-{i}"), &[("wild-honey", 1)])
                .await
                .token,
        );
    }
    let mut seen = Vec::new();
    let mut after: Option<String> = None;
    let mut pages = 0;
    loop {
        let mut url = format!("{}/api/v1/orders?limit=3", app.address);
        if let Some(cursor) = &after {
            url.push_str(&format!("&after={cursor}"));
        }
        let body: Value = client()
            .get(url)
            .bearer_auth(&token)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        pages += 1;
        let orders = body["orders"].as_array().unwrap();
        assert!(orders.len() <= 3, "{body}");
        seen.extend(
            orders
                .iter()
                .map(|o| o["token"].as_str().unwrap().to_owned()),
        );
        match body["next"].as_str() {
            Some(next) => after = Some(next.to_owned()),
            None => break,
        }
        assert!(pages < 10, "the cursor never ends");
    }
    assert_eq!(pages, 3, "3 + 3 + 1");
    let mut sorted = seen.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted.len(), seen.len(), "no order twice");
    made.sort();
    assert_eq!(sorted, made, "every order once");
}

/// A line carrying a field its kind does not take is refused as
/// `bad_lines`, naming the field, and nothing is made: seats or
/// `together` on a jar or a ticket, `together` or `seats` on a table, a
/// party on a jar or a section (issue 44: `seats` on a jar and `together`
/// on a table were answered 201, the field silently ignored).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_line_with_a_field_its_kind_does_not_take_is_refused_and_nothing_is_made() {
    let app = shop().await;
    let token = key_with(&app, &[Scope::StartCheckouts]).await;
    let (room, at): (String, chrono::DateTime<chrono::Utc>) = sqlx::query_as(
        "select room, starts_at from dining_times where starts_at > now() + interval '1 day' \
          order by starts_at limit 1",
    )
    .fetch_one(&app.db.pool)
    .await
    .unwrap();
    let at = at.to_rfc3339();
    let lines = [
        json!({ "product_id": "wild-honey", "qty": 1, "seats": ["C-12"] }),
        json!({ "product_id": "wild-honey", "qty": 2, "together": true }),
        json!({ "product_id": "harbour-lights-general", "qty": 1, "together": false }),
        json!({ "product_id": "harbour-lights-general", "seats": ["A-1"] }),
        json!({ "product_id": room, "party": 2, "at": at, "together": true }),
        json!({ "product_id": room, "party": 2, "at": at, "seats": ["T5"] }),
        json!({ "product_id": "wild-honey", "party": 2, "at": at }),
        json!({ "product_id": "winter-gala-stalls", "party": 2, "at": at }),
    ];
    let before = (count(&app, "orders").await, count(&app, "holds").await);
    for (n, line) in lines.iter().enumerate() {
        let body = json!({ "lines": [line], "name": "Ada", "email": "ada@example.com",
                           "phone": "+44 20 7946 0000" });
        let (status, answer) = post_to(
            &app,
            &token,
            "/checkouts",
            Some(&format!("kind-fields-{n}")),
            &body.to_string(),
        )
        .await;
        assert_eq!(status, 422, "{line}: {answer}");
        is_error(&answer, "bad_lines");
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(message.contains("nothing was done"), "{line}: {message}");
    }
    assert_eq!(
        (count(&app, "orders").await, count(&app, "holds").await),
        before
    );
    // the same lines without the stray field are taken
    let (status, answer) = post_to(
        &app,
        &token,
        "/checkouts",
        Some("kind-fields-ok"),
        &json!({ "lines": [{ "product_id": "wild-honey", "qty": 1 }],
                 "name": "Ada", "email": "ada@example.com" })
        .to_string(),
    )
    .await;
    assert_eq!(status, 201, "{answer}");
}
