//! Codes redeemed exactly once: at the admin's redeem page from several
//! doors at once, and from the command line.

use futures::future::join_all;
use reqwest::StatusCode;

use holdfast_testkit::engine::paid;
use holdfast_testkit::*;

/// The outcome a redeem page shows.
fn outcome(page: &str) -> String {
    let marker = "data-outcome=\"";
    let start = page
        .find(marker)
        .unwrap_or_else(|| panic!("no verdict in {page}"))
        + marker.len();
    page[start..start + page[start..].find('"').unwrap()].to_owned()
}

async fn ticket_codes(app: &TestApp) -> Vec<String> {
    sqlx::query_scalar("select code from order_items where code like 'TKT-%' order by code")
        .fetch_all(&app.db.pool)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn four_doors_scanning_fifty_codes_four_times_admit_each_once() {
    let app = spawn_app().await;
    app.load_demo().await;
    app.add_staff().await;
    for i in 0..25 {
        paid(
            &app.db,
            &format!("storm-{i:02}"),
            &[("harbour-lights-general", 2)],
        )
        .await;
    }
    let codes = ticket_codes(&app).await;
    assert_eq!(codes.len(), 50);
    // four doors, each its own staff session
    let mut doors = Vec::new();
    for door in ["North door", "South door", "East door", "West door"] {
        let (staff, csrf) = app.staff_browser().await;
        doors.push((staff, csrf, door));
    }
    // every code scanned at every door, all at once
    let address = &app.address;
    let answers = join_all(codes.iter().flat_map(|code| {
        doors.iter().map(move |(staff, csrf, door)| {
            let url = format!("{address}/admin/redeem");
            async move {
                let response = staff
                    .post(url)
                    .form(&[("csrf", csrf.as_str()), ("code", code), ("place", door)])
                    .send()
                    .await
                    .unwrap();
                let status = response.status();
                (
                    code.clone(),
                    status,
                    outcome(&response.text().await.unwrap()),
                )
            }
        })
    }))
    .await;
    assert_eq!(answers.len(), 200);
    let admitted: Vec<_> = answers.iter().filter(|a| a.2 == "admitted").collect();
    let used = answers.iter().filter(|a| a.2 == "already_used").count();
    assert_eq!(admitted.len(), 50, "one admission per code");
    assert_eq!(used, 150, "every other scan is told");
    assert!(admitted.iter().all(|a| a.1 == StatusCode::OK));
    assert!(
        answers
            .iter()
            .filter(|a| a.2 == "already_used")
            .all(|a| a.1 == StatusCode::CONFLICT)
    );
    let mut once: Vec<&String> = admitted.iter().map(|a| &a.0).collect();
    once.sort();
    once.dedup();
    assert_eq!(once.len(), 50, "each code admitted exactly once");
    // the record: one redemption per code, with who and where; every scan
    // in the activity record
    let (redemptions, codes_redeemed, doors_used): (i64, i64, i64) = sqlx::query_as(
        "select count(*), count(distinct code), count(distinct place) from redemptions \
          where redeemed_by = $1",
    )
    .bind(STAFF_EMAIL)
    .fetch_one(&app.db.pool)
    .await
    .unwrap();
    assert_eq!((redemptions, codes_redeemed), (50, 50));
    assert!(doors_used >= 1);
    let scans: Vec<(String, i64)> = sqlx::query_as(
        "select outcome, count(*) from staff_actions where action = 'redeem' \
          group by outcome order by outcome",
    )
    .fetch_all(&app.db.pool)
    .await
    .unwrap();
    assert_eq!(
        scans,
        [
            ("admitted".to_owned(), 50),
            ("already_used".to_owned(), 150)
        ]
    );
    // append-only
    let edited = sqlx::query("update redemptions set place = 'nowhere'")
        .execute(&app.db.pool)
        .await;
    assert!(edited.is_err());
    let forgotten = sqlx::query("delete from redemptions")
        .execute(&app.db.pool)
        .await;
    assert!(forgotten.is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_door_is_told_what_a_code_is_and_the_order_page_shows_it_used() {
    let app = spawn_app().await;
    app.load_demo().await;
    app.add_staff().await;
    let slot = app.db.first_slot().await;
    let order = paid(
        &app.db,
        "door-1",
        &[(slot.as_str(), 1), ("harbour-lights-vip", 1)],
    )
    .await;
    let pickup = crate::item_code(&app.db.pool, order.id, "pickup_slot")
        .await
        .expect("a pickup code");
    let ticket = ticket_codes(&app).await.remove(0);
    let (staff, csrf) = app.staff_browser().await;
    let page = app.admin_page(&staff, "/admin/redeem").await;
    assert_eq!(hidden(&page, "csrf"), csrf);
    let redeem = |code: String, place: &'static str| {
        let staff = staff.clone();
        let csrf = csrf.clone();
        let url = format!("{}/admin/redeem", app.address);
        async move {
            let response = staff
                .post(url)
                .form(&[("csrf", csrf.as_str()), ("code", &code), ("place", place)])
                .send()
                .await
                .unwrap();
            let status = response.status();
            let headers = response.headers().clone();
            (status, headers, response.text().await.unwrap())
        }
    };

    // typed in lower case with spaces, as people do
    let typed = ticket.to_lowercase().replace('-', " ");
    let (status, headers, page) = redeem(typed, "North door").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(outcome(&page), "admitted");
    assert!(page.contains("Ada Shopper"), "{page}");
    assert_eq!(
        headers["permissions-policy"],
        "camera=(self), microphone=(), geolocation=()"
    );
    let (status, _, page) = redeem(ticket.clone(), "South door").await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(outcome(&page), "already_used");
    assert!(page.contains(STAFF_EMAIL), "{page}");
    assert!(page.contains("at North door"), "{page}");

    let (status, _, page) = redeem(pickup.clone(), "Counter").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(outcome(&page), "collected");
    let (status, _, page) = redeem(pickup.clone(), "Counter").await;
    assert_eq!(
        (status, outcome(&page).as_str()),
        (StatusCode::CONFLICT, "already_used")
    );

    for nonsense in ["TKT-0000-0000", "", "x", &"A".repeat(65), "<script>"] {
        let (status, _, page) = redeem(nonsense.to_owned(), "").await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{nonsense:?}");
        assert_eq!(outcome(&page), "not_valid");
        assert!(!page.contains("<script>"), "escaped: {page}");
    }
    // a door name past 100 characters is refused and redeems nothing
    let before: i64 = sqlx::query_scalar("select count(*) from redemptions")
        .fetch_one(&app.db.pool)
        .await
        .unwrap();
    let long = "d".repeat(101);
    let response = staff
        .post(format!("{}/admin/redeem", app.address))
        .form(&[
            ("csrf", csrf.as_str()),
            ("code", "anything"),
            ("place", &long),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    let after: i64 = sqlx::query_scalar("select count(*) from redemptions")
        .fetch_one(&app.db.pool)
        .await
        .unwrap();
    assert_eq!(after, before);

    // the shopper's page shows both codes as used
    let page = browser()
        .get(format!("{}/orders/{}", app.address, order.token))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        page.contains("class=\"code-card item-used used\""),
        "{page}"
    );
    assert_eq!(
        page.matches("<li class=\"item-used used\">").count(),
        1,
        "{page}"
    );
    assert!(page.contains("Collected "), "{page}");
    assert!(page.contains("Admitted "), "{page}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_command_line_redeems_once_and_exits_with_the_reason() {
    let app = spawn_app().await;
    app.load_demo().await;
    let order = paid(&app.db, "cli-1", &[("harbour-lights-vip", 1)]).await;
    let ticket = ticket_codes(&app).await.remove(0);
    let run = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_holdfast"))
            .arg("--db")
            .arg(&app.db.url)
            .args(args)
            .env_remove("DATABASE_URL")
            .output()
            .unwrap()
    };
    let first = run(&["redeem", &ticket, "--place", "Box office"]);
    assert_eq!(first.status.code(), Some(0), "{first:?}");
    let said = String::from_utf8_lossy(&first.stdout);
    assert!(said.contains("admitted"), "{said}");
    let again = run(&["--json", "redeem", &ticket.to_lowercase()]);
    assert_eq!(again.status.code(), Some(5), "{again:?}");
    let json: serde_json::Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!(json["outcome"], "already_used");
    assert_eq!(json["order_id"], order.id.to_string());
    let unknown = run(&["redeem", "TKT-AAAA-AAAA"]);
    assert_eq!(unknown.status.code(), Some(7));
    assert!(String::from_utf8_lossy(&unknown.stdout).contains("not valid"));
    let (by, place): (String, String) =
        sqlx::query_as("select redeemed_by, place from redemptions where code = $1")
            .bind(&ticket)
            .fetch_one(&app.db.pool)
            .await
            .unwrap();
    assert!(by.starts_with("command line"), "{by}");
    assert_eq!(place, "Box office");
    // a place too long is refused with the reason and redeems nothing
    let long = "p".repeat(101);
    let refused = run(&["redeem", "TKT-AAAA-AAAA", "--place", &long]);
    assert_eq!(refused.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("at most 100 characters"));
}
