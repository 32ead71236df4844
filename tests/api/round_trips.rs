//! The crowd's answers never wait on the database (issue 45's guard): each
//! refusal the shop's memory can give — a sold-out or not-yet-on-sale line
//! in the shop's form, fresh or replayed, with or without a way to pay
//! chosen, a table at a time whose covers are gone or with no table left;
//! and in the API, counted units, a seated section's seats, a table at a
//! time with no covers or no table left — is answered with no connection
//! taken from the shop's pool; nor do the catalogue, a seat map and a
//! restaurant's booking page. The count is the pool's own
//! (`TestDb::round_trips`: every idle connection handed out and every new
//! one opened); memory reads on a pool of its own. A feature that puts a
//! read in front of the memory check fails here.

use holdfast::catalogue::seats::SeatState;
use holdfast::inventory::Capacity;
use holdfast::staff::api_keys::Scope;
use serde_json::{Value, json};

use holdfast_testkit::*;

const VIP: &str = "harbour-lights-vip";
const SECTION: &str = "winter-gala-stalls";
/// Answers asked for in each case: a crowd, not one lucky request.
const TIMES: usize = 25;

/// The form as a shopper's page sends it, a way to pay chosen or not.
async fn submit(
    app: &TestApp,
    shopper: &reqwest::Client,
    page: &str,
    method: Option<&str>,
) -> (u16, String) {
    let (key, lines) = (checkout_key(page), form_lines(page));
    let mut form = vec![
        ("checkout_key", key.as_str()),
        ("lines", lines.as_str()),
        ("name", "Ada Shopper"),
        ("email", "ada@example.com"),
        ("phone", "+44 20 7946 0000"),
    ];
    if let Some(method) = method {
        form.push(("method", method));
    }
    let response = shopper
        .post(format!("{}/checkout", app.address))
        .form(&form)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.text().await.unwrap())
}

async fn basket_page(app: &TestApp, shopper: &reqwest::Client) -> String {
    read_page(shopper, &format!("{}/basket", app.address)).await
}

async fn api_checkout(app: &TestApp, token: &str, idem: &str, line: Value) -> (u16, Value) {
    let response = browser()
        .post(format!("{}/api/v1/checkouts", app.address))
        .bearer_auth(token)
        .header("idempotency-key", idem)
        .json(&json!({
            "lines": [line],
            "name": "Ada",
            "email": "ada@example.com",
            "phone": "+44 20 7946 0000",
        }))
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// The API's checkout of `line` under `idem`, refused with `code`: its
/// answer's body.
async fn api_refused(app: &TestApp, token: &str, idem: String, line: Value, code: &str) -> Value {
    let (status, body) = api_checkout(app, token, &idem, line).await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"]["code"], code, "{body}");
    body
}

/// Runs `case` [`TIMES`] times and asserts the shop's pool handed out no
/// connection meanwhile, naming the case that did.
async fn without_the_database<F, Fut, T>(app: &TestApp, what: &str, mut case: F)
where
    F: FnMut(usize) -> Fut,
    Fut: std::future::Future<Output = T>,
{
    // memory freshly read (on its own pool): believed for the whole case,
    // however slow the machine
    app.settled().await;
    let before = app.db.round_trips();
    for i in 0..TIMES {
        let _answer = case(i).await;
    }
    let trips = app.db.round_trips() - before;
    assert_eq!(
        trips, 0,
        "{what}: {trips} database round trips for {TIMES} answers memory could give"
    );
}

/// Every free seat of the section taken by other shoppers.
async fn sell_out_the_section(app: &TestApp) {
    app.settled().await;
    let snapshot = app.live.now().expect("memory is believed");
    let free: Vec<String> = snapshot
        .section(SECTION)
        .expect("the demo's stalls are on sale")
        .seats
        .iter()
        .filter(|seat| seat.state == SeatState::Free)
        .map(|seat| seat.label.clone())
        .collect();
    for (i, seats) in free.chunks(6).enumerate() {
        let seats: Vec<&str> = seats.iter().map(String::as_str).collect();
        crate::seats::take(&app.db.pool, &format!("1-stalls-{i:03}"), SECTION, &seats).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_refusal_memory_can_give_is_given_without_a_database_round_trip() {
    let app = spawn_app().await;
    app.load_demo().await;
    app.add_staff().await;
    let token = crate::api_v1::key_with(&app, &[Scope::StartCheckouts]).await;

    // shoppers with the VIP tier in their baskets, one page made before
    // the sell-out (stale) and one after it (fresh)
    app.db
        .inventory()
        .upsert_resource(&rid(VIP), Capacity::parse(1).unwrap())
        .await
        .unwrap();
    let (stale, fresh) = (browser(), browser());
    app.add(&stale, VIP, 1).await;
    app.add(&fresh, VIP, 1).await;
    // two dinner times of the restaurant a day ahead: the first's covers
    // go, the second keeps its covers and loses its tables
    let times: Vec<(String, chrono::DateTime<chrono::Utc>)> = sqlx::query_as(
        "select t.product_id, t.starts_at from dining_times t \
           join products p on p.id = t.product_id \
          where t.room = 'harbour-bistro' and p.active \
            and t.starts_at > now() + interval '1 day' \
          order by t.starts_at limit 2",
    )
    .fetch_all(&app.db.pool)
    .await
    .unwrap();
    let [(covers_gone, covers_gone_at), (no_table, no_table_at)] = &times[..] else {
        panic!("the demo restaurant publishes its times: {times:?}");
    };
    let diner = browser();
    app.add(&diner, covers_gone, 2).await;
    let table_diner = browser();
    app.add(&table_diner, no_table, 2).await;
    app.settled().await;
    let stale_page = basket_page(&app, &stale).await;
    app.start(&browser(), &Purchase::of(VIP, 1)).await;
    sell_out_the_section(&app).await;
    // a tier whose sale opens in two days, in a basket from before
    let early = browser();
    app.add(&early, "harbour-lights-general", 1).await;
    sqlx::query(
        "update resources r set total = r.held + r.sold \
           from dining_times t where t.resource_id = r.id and t.product_id = $1",
    )
    .bind(covers_gone)
    .execute(&app.db.pool)
    .await
    .unwrap();
    sqlx::query(
        "update products set sale_opens_at = now() + interval '2 days' \
          where id = 'harbour-lights-general'",
    )
    .execute(&app.db.pool)
    .await
    .unwrap();
    app.settled().await;
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    let fresh_page = basket_page(&app, &fresh).await;
    let early_page = basket_page(&app, &early).await;
    let diner_page = basket_page(&app, &diner).await;

    // the stale form's first submit is the database's to answer (had it
    // taken the last unit, a double submit must reach its order); the
    // key's first use marks it used; both before counting
    let (status, _) = submit(&app, &stale, &stale_page, None).await;
    assert_eq!(status, 409);
    let (status, _) = api_checkout(
        &app,
        &token,
        "warm-up",
        json!({ "product_id": VIP, "qty": 1 }),
    )
    .await;
    assert_eq!(status, 409);
    let party_at = |time: &chrono::DateTime<chrono::Utc>| json!({ "product_id": "harbour-bistro", "party": 2, "at": time.to_rfc3339() });
    // the key's use is marked after its answer, once a minute
    while !sqlx::query_scalar::<_, bool>(
        "select bool_and(last_used_at is not null) from api_keys where revoked_at is null",
    )
    .fetch_one(&app.db.pool)
    .await
    .unwrap()
    {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    app.settled().await;

    let anonymous = browser();
    without_the_database(&app, "the catalogue page", |_| async {
        let page = read_page(&anonymous, &format!("{}/", app.address)).await;
        assert!(page.contains("VIP"), "{page}");
    })
    .await;
    without_the_database(&app, "a section's seat map", |_| async {
        let page = read_page(&anonymous, &format!("{}/seats/{SECTION}", app.address)).await;
        assert!(page.contains("taken"), "{page}");
    })
    .await;
    without_the_database(&app, "a restaurant's booking page", |_| async {
        let page = read_page(
            &anonymous,
            &format!("{}/dining/harbour-bistro?party=2", app.address),
        )
        .await;
        assert!(page.contains("tables left for 2"), "{page}");
    })
    .await;
    without_the_database(&app, "a fresh form for a sold-out tier", |_| async {
        let (status, page) = submit(&app, &fresh, &fresh_page, None).await;
        assert_eq!(status, 409, "{page}");
        assert!(page.contains("sold out (you asked for 1)"), "{page}");
    })
    .await;
    without_the_database(&app, "the same, paying by card", |_| async {
        let (status, page) = submit(&app, &fresh, &fresh_page, Some("card")).await;
        assert_eq!(status, 409, "{page}");
    })
    .await;
    without_the_database(&app, "a stale form replayed", |_| async {
        let (status, page) = submit(&app, &stale, &stale_page, None).await;
        assert_eq!(status, 409, "{page}");
        assert!(page.contains("sold out (you asked for 1)"), "{page}");
    })
    .await;
    without_the_database(&app, "a form for a tier not on sale yet", |_| async {
        let (status, page) = submit(&app, &early, &early_page, None).await;
        assert_eq!(status, 409, "{page}");
        assert!(page.contains("on sale from"), "{page}");
    })
    .await;
    without_the_database(&app, "the API: units of a sold-out tier", |i| {
        let line = json!({ "product_id": VIP, "qty": 1 });
        api_refused(&app, &token, format!("vip-{i}"), line, "sold_out")
    })
    .await;
    without_the_database(&app, "the API: 2 seats together in a full section", |i| {
        let line = json!({ "product_id": SECTION, "qty": 2, "together": true });
        api_refused(&app, &token, format!("seats-{i}"), line, "sold_out")
    })
    .await;
    without_the_database(&app, "the API: a tier not on sale yet", |i| {
        let line = json!({ "product_id": "harbour-lights-general", "qty": 1 });
        api_refused(&app, &token, format!("early-{i}"), line, "not_on_sale")
    })
    .await;
    // a refused party is offered the nearest times that seat it: the
    // database's answer, kept in memory until one of them changes (5 s
    // at most, so asked for just before)
    let (status, body) =
        api_checkout(&app, &token, "warm-up-covers", party_at(covers_gone_at)).await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (409, &json!("sold_out")),
        "{body}"
    );
    without_the_database(
        &app,
        "a form for a table whose time's covers are gone",
        |_| async {
            let (status, page) = submit(&app, &diner, &diner_page, None).await;
            assert_eq!(status, 409, "{page}");
            assert!(page.contains("Times that can seat 2 that day:"), "{page}");
        },
    )
    .await;
    without_the_database(
        &app,
        "the API: a table at a time whose covers are gone",
        |i| {
            let line = party_at(covers_gone_at);
            let refused = api_refused(&app, &token, format!("covers-{i}"), line, "sold_out");
            async move {
                let body = refused.await;
                let message = body["error"]["message"].as_str().unwrap();
                assert!(message.contains("times that seat 2 near"), "{body}");
            }
        },
    )
    .await;

    // no table left at the second time: every one of the room's tables is
    // put away (its covers stay)
    sqlx::query("update dining_tables set archived_at = now() where room = 'harbour-bistro'")
        .execute(&app.db.pool)
        .await
        .unwrap();
    let (status, body) = api_checkout(&app, &token, "warm-up-tables", party_at(no_table_at)).await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (409, &json!("no_table")),
        "{body}"
    );
    without_the_database(&app, "the API: a table at a time with no table left", |i| {
        let line = party_at(no_table_at);
        api_refused(&app, &token, format!("tables-{i}"), line, "no_table")
    })
    .await;
    let table_page = basket_page(&app, &table_diner).await;
    without_the_database(
        &app,
        "a form for a table at a time with no table left",
        |_| async {
            let (status, page) = submit(&app, &table_diner, &table_page, None).await;
            assert_eq!(status, 409, "{page}");
        },
    )
    .await;
    assert_eq!(
        no_table,
        &sqlx::query_scalar::<_, String>(
            "select product_id from dining_times where starts_at = $1 and room = 'harbour-bistro'"
        )
        .bind(no_table_at)
        .fetch_one(&app.db.pool)
        .await
        .unwrap()
    );
}

/// Keys sign from memory, yet a key made a moment ago signs at once (memory
/// that does not know a key asks the database) and a key revoked signs
/// nothing within a second of its revocation, in every process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_signs_as_soon_as_it_is_made_and_stops_within_a_second_of_its_revocation() {
    let app = spawn_app().await;
    app.load_demo().await;
    app.add_staff().await;
    let token = crate::api_v1::key_with(&app, &[Scope::StartCheckouts]).await;
    let line = || json!({ "product_id": "harbour-lights-general", "qty": 200 });
    // made this moment: signed (the answer is the body's: too many units)
    let (status, body) = api_checkout(&app, &token, "made", line()).await;
    assert_eq!(status, 422, "{body}");
    app.settled().await;
    assert!(app.live.now().is_some(), "memory is believed");
    let (status, _) = api_checkout(&app, &token, "remembered", line()).await;
    assert_eq!(status, 422);

    let id = &token[3..15];
    let (staff, csrf) = app.signed_in(STAFF_EMAIL, STAFF_PASSWORD).await;
    let revoked = app
        .admin_post(
            &staff,
            &format!("/admin/api-keys/{id}/revoke"),
            &[("csrf", &csrf)],
        )
        .await;
    assert_eq!(revoked.status(), 303);
    let since = std::time::Instant::now();
    loop {
        let (status, body) = api_checkout(&app, &token, "after", line()).await;
        if status == 401 {
            break;
        }
        assert_eq!(status, 422, "{body}");
        assert!(
            since.elapsed() < std::time::Duration::from_secs(1),
            "the revoked key still signs after {:?}",
            since.elapsed()
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    for i in 0..20 {
        let (status, _) = api_checkout(&app, &token, &format!("later-{i}"), line()).await;
        assert_eq!(status, 401);
    }
}
