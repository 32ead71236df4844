//! The owner's seat plan in the admin (docs/design.md, "Reserved seating",
//! "The seat plan in the admin"), through HTTP as staff use it: seats
//! blocked, unblocked, held back and released (`hf_seat_set_state`, all or
//! none), the shop's counts following; a shopper's seat refused by name
//! with nothing changed; a section moved to another category and a
//! category repriced, later checkouts paying it; a plan replaced from its
//! fields, or refused beside them; the splits setting; each
//! change one audit line. And staff blocking seats while 200 shoppers race
//! for the section: exact counts, no blocked seat sold, no seat twice, no
//! drift.

use futures::future::join_all;
use holdfast::staff::api_keys::Scope;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::seats::take;
use holdfast_testkit::*;

const STALLS: &str = "/admin/catalogue/events/winter-gala/sections/winter-gala-stalls";

/// The section's seats on sale, held and sold, its live pins, and whether
/// hf_check sees drift.
async fn books(pool: &sqlx::PgPool, section: &str) -> (i32, i32, i32, i64, bool) {
    sqlx::query_as(
        "select r.total, r.held, r.sold, \
                (select count(*) from seat_pins p join seats s on s.id = p.seat_id \
                  where s.section = $1 and p.live), \
                (select bool_or(drift) from hf_check(r.id)) \
           from resources r join seat_sections x on x.resource_id = r.id \
          where x.product_id = $1",
    )
    .bind(section)
    .fetch_one(pool)
    .await
    .unwrap()
}

/// A seat's state and note.
async fn seat(pool: &sqlx::PgPool, section: &str, label: &str) -> (String, String) {
    sqlx::query_as("select state, note from seats where section = $1 and label = $2")
        .bind(section)
        .bind(label)
        .fetch_one(pool)
        .await
        .unwrap()
}

/// The seat plan's rows and counters, as one fingerprint.
async fn plan_print(pool: &sqlx::PgPool) -> String {
    sqlx::query_scalar(
        "select md5(coalesce((select string_agg(s::text, '|' order by s.id) from seats s), '') \
                    || (select string_agg(r::text, '|' order by r.id) from resources r) \
                    || (select string_agg(x::text, '|' order by x.product_id) from seat_sections x) \
                    || (select string_agg(k::text, '|' order by k.id) from seat_categories k) \
                    || (select string_agg(p.price_minor::text, '|' order by p.id) from products p))",
    )
    .fetch_one(pool)
    .await
    .unwrap()
}

/// The audit lines of an action: (target, outcome).
async fn audited(pool: &sqlx::PgPool, action: &str) -> Vec<(String, String)> {
    sqlx::query_as("select target, outcome from staff_actions where action = $1 order by id")
        .bind(action)
        .fetch_all(pool)
        .await
        .unwrap()
}

/// A form to the section's page, as the browser sends it.
async fn post(
    app: &TestApp,
    staff: &reqwest::Client,
    path: &str,
    form: &[(&str, &str)],
) -> (StatusCode, String) {
    let answer = app.admin_post(staff, path, form).await;
    let status = answer.status();
    let body = if status == StatusCode::SEE_OTHER {
        location(&answer)
    } else {
        answer.text().await.unwrap()
    };
    (status, body)
}

/// The plan's fields as the page sends them: a row's six fields a line
/// (name, first seat, last seat, aisles after, wheelchair, companion).
fn plan_form<'a>(csrf: &'a str, rows: &'a [[&'a str; 6]]) -> Vec<(&'a str, &'a str)> {
    let mut form = vec![("csrf", csrf)];
    for row in rows {
        for (name, value) in ["row", "first", "last", "aisles", "wheelchair", "companion"]
            .into_iter()
            .zip(row)
        {
            form.push((name, *value));
        }
    }
    form
}

/// What the shop's event page says is left of a section, once its memory
/// has caught up with `want` (the page as last read otherwise).
async fn shop_left(app: &TestApp, section: &str, want: i64) -> i64 {
    let mut left = -1;
    for _ in 0..100 {
        let page = browser()
            .get(format!("{}/c/winter-gala", app.address))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let card = page
            .split(&format!("id=\"p-{section}\""))
            .nth(1)
            .expect("the section's card");
        left = card
            .split("data-available=\"")
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .and_then(|n| n.parse().ok())
            .expect("its count");
        if left == want {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    left
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn staff_block_hold_back_unblock_and_release_seats_and_the_shop_counts_follow() {
    let app = spawn_app().await;
    app.load_demo().await;
    app.add_staff().await;
    app.settled().await;
    let (staff, csrf) = app.staff_browser().await;
    let pool = &app.db.pool;
    // the event lists its sections, each a link to its plan; the catalogue's
    // link of a section leads there too
    let event = app
        .admin_page(&staff, "/admin/catalogue/events/winter-gala")
        .await;
    assert!(event.contains(&format!("href=\"{STALLS}\"")), "{event}");
    let tier_link = staff
        .get(format!(
            "{}/admin/catalogue/events/winter-gala/tiers/winter-gala-stalls",
            app.address
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(location(&tier_link), STALLS);
    let page = app.admin_page(&staff, STALLS).await;
    assert!(page.contains("value=\"C-5\""), "a box per seat");
    assert!(
        page.contains("D-8, blocked (blocked in the catalogue file)"),
        "{page}"
    );
    assert!(page.contains("A-1, wheelchair place, free"), "{page}");
    assert_eq!(
        books(pool, "winter-gala-stalls").await,
        (68, 0, 0, 0, false)
    );
    assert_eq!(shop_left(&app, "winter-gala-stalls", 68).await, 68);

    let seats = format!("{STALLS}/seats");
    let (status, to) = post(
        &app,
        &staff,
        &seats,
        &[
            ("csrf", &csrf),
            ("seat", "C-5"),
            ("seat", "C-6"),
            ("action", "block"),
            ("note", "camera"),
        ],
    )
    .await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert_eq!(
        to,
        format!("{STALLS}?notice=seats_block&updated=2&left=66#seats")
    );
    assert_eq!(
        seat(pool, "winter-gala-stalls", "C-5").await,
        ("blocked".into(), "camera".into())
    );
    assert_eq!(
        books(pool, "winter-gala-stalls").await,
        (66, 0, 0, 0, false)
    );
    assert_eq!(shop_left(&app, "winter-gala-stalls", 66).await, 66);
    let page = app.admin_page(&staff, &to).await;
    assert!(
        page.contains("Blocked 2 seats. The section has 66 seats on sale now"),
        "{page}"
    );
    assert!(page.contains("C-5, blocked (camera)"));

    // held back for a sponsor, then unblocking it is refused by name: it is
    // not blocked; nothing changes
    let (status, _) = post(
        &app,
        &staff,
        &seats,
        &[
            ("csrf", &csrf),
            ("seat", "C-7"),
            ("action", "hold_back"),
            ("note", "sponsor"),
        ],
    )
    .await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert_eq!(
        seat(pool, "winter-gala-stalls", "C-7").await,
        ("held_back".into(), "sponsor".into())
    );
    assert_eq!(shop_left(&app, "winter-gala-stalls", 65).await, 65);
    let before = plan_print(pool).await;
    let (status, page) = post(
        &app,
        &staff,
        &seats,
        &[
            ("csrf", &csrf),
            ("seat", "C-5"),
            ("seat", "C-7"),
            ("action", "unblock"),
        ],
    )
    .await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert!(
        page.contains("id=\"f-seats-error\">Refused: C-7 is not blocked"),
        "{page}"
    );
    assert!(page.contains("value=\"C-7\" checked"), "the ticks are kept");
    assert_eq!(plan_print(pool).await, before);

    // released and unblocked: back on sale; the same form again changes
    // nothing more
    for (label, action, left) in [
        ("C-7", "release", 66),
        ("C-5", "unblock", 67),
        ("C-6", "unblock", 68),
    ] {
        let (status, to) = post(
            &app,
            &staff,
            &seats,
            &[("csrf", &csrf), ("seat", label), ("action", action)],
        )
        .await;
        assert_eq!(status, StatusCode::SEE_OTHER, "{label} {action}");
        assert!(to.contains(&format!("updated=1&left={left}")), "{to}");
    }
    let (status, to) = post(
        &app,
        &staff,
        &seats,
        &[("csrf", &csrf), ("seat", "C-6"), ("action", "unblock")],
    )
    .await;
    assert_eq!(
        (status, to.contains("updated=0&left=68")),
        (StatusCode::SEE_OTHER, true),
        "{to}"
    );
    assert_eq!(
        seat(pool, "winter-gala-stalls", "C-5").await,
        ("open".into(), String::new())
    );
    assert_eq!(
        books(pool, "winter-gala-stalls").await,
        (68, 0, 0, 0, false)
    );
    assert_eq!(shop_left(&app, "winter-gala-stalls", 68).await, 68);
    assert_eq!(
        audited(pool, "seat_block").await,
        [("winter-gala-stalls".to_owned(), "changed".to_owned())]
    );
    assert_eq!(
        audited(pool, "seat_unblock").await.len(),
        4,
        "three and the refusal"
    );
    let activity = app.admin_page(&staff, "/admin/activity").await;
    assert!(activity.contains("blocked C-5, C-6 of "), "{activity}");
    assert!(activity.contains("(camera)"), "{activity}");
    assert!(
        activity.contains("was refused: unblocked C-7 of "),
        "{activity}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_seat_a_shopper_has_is_refused_by_name_and_nothing_changes() {
    let app = spawn_app().await;
    app.load_demo().await;
    app.add_staff().await;
    app.settled().await;
    let pool = &app.db.pool;
    // one shopper paid for two seats, another is checking out with C-3
    let paid = app
        .buy(&browser(), &Purchase::of("winter-gala-stalls", 2))
        .await;
    let sold: Vec<String> = sqlx::query_scalar(
        "select s.label from seat_pins p join seats s on s.id = p.seat_id \
           join holds h on h.id = p.hold_id join orders o on o.hold_id = h.purchase_id \
          where o.id = $1 and p.live order by s.row_rank, s.pos",
    )
    .bind(paid.started.order_id)
    .fetch_all(pool)
    .await
    .unwrap();
    assert_eq!(sold.len(), 2);
    take(pool, "held-c3", "winter-gala-stalls", &["C-3"]).await;
    let (staff, csrf) = app.staff_browser().await;
    let before = plan_print(pool).await;
    let counts = books(pool, "winter-gala-stalls").await;
    assert_eq!(counts, (68, 1, 2, 3, false));
    let shop_before = shop_left(&app, "winter-gala-stalls", 65).await;
    assert_eq!(shop_before, 65);

    // blocking them with free seats beside them: all refused, each named
    for action in ["block", "hold_back"] {
        let (status, page) = post(
            &app,
            &staff,
            &format!("{STALLS}/seats"),
            &[
                ("csrf", &csrf),
                ("seat", "C-2"),
                ("seat", "C-3"),
                ("seat", &sold[0]),
                ("seat", &sold[1]),
                ("action", action),
                ("note", "camera"),
            ],
        )
        .await;
        assert_eq!(status, StatusCode::CONFLICT, "{action}");
        let mut named = [sold[0].clone(), sold[1].clone(), "C-3".to_owned()];
        named.sort_by_key(|l| (l.as_bytes()[0], l[2..].parse::<i32>().unwrap()));
        assert!(
            page.contains(&format!("Refused: {} are a shopper", named.join(", "))),
            "{action}: {page}"
        );
        assert!(page.contains("Nothing was changed."));
    }
    // a plan that leaves them out: refused beside its field, by name
    let (status, page) = post(
        &app,
        &staff,
        &format!("{STALLS}/plan"),
        &plan_form(&csrf, &[["E", "1", "14", "", "", ""]]),
    )
    .await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert!(
        page.contains("id=\"f-rows-error\">Refused: the plan leaves out"),
        "{page}"
    );
    assert!(page.contains("C-3"), "{page}");
    // nothing changed: seats, counters, the shop's count, the books
    assert_eq!(plan_print(pool).await, before);
    assert_eq!(books(pool, "winter-gala-stalls").await, counts);
    assert_eq!(shop_left(&app, "winter-gala-stalls", 65).await, 65);
    let drift: i64 = sqlx::query_scalar("select count(*) from hf_check() where drift")
        .fetch_one(pool)
        .await
        .unwrap();
    assert_eq!(drift, 0);
    let refused: Vec<String> = sqlx::query_scalar(
        "select outcome from staff_actions where action like 'seat_%' order by id",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    assert_eq!(refused, ["refused_taken"; 3]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_section_changes_category_a_category_its_price_and_later_checkouts_pay_it() {
    let app = spawn_app().await;
    app.load_demo().await;
    app.add_staff().await;
    app.settled().await;
    let pool = &app.db.pool;
    let (staff, csrf) = app.staff_browser().await;
    let price = || async {
        sqlx::query_scalar::<_, i64>(
            "select price_minor from products where id = 'winter-gala-stalls'",
        )
        .fetch_one(pool)
        .await
        .unwrap()
    };
    assert_eq!(price().await, 4500);
    let (status, to) = post(
        &app,
        &staff,
        &format!("{STALLS}/category"),
        &[("csrf", &csrf), ("category", "balcony")],
    )
    .await;
    assert_eq!(
        (status, to.as_str()),
        (
            StatusCode::SEE_OTHER,
            &*format!("{STALLS}?notice=section_category_changed#category")
        )
    );
    assert_eq!(price().await, 3000);
    // a category's colour too light for the map: refused beside it
    let category = format!("{STALLS}/categories/balcony");
    let before = plan_print(pool).await;
    let (status, page) = post(
        &app,
        &staff,
        &category,
        &[
            ("csrf", &csrf),
            ("name", "Balcony"),
            ("colour", "#ffd700"),
            ("price", "32.00"),
        ],
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        page.contains("id=\"f-cat-balcony-colour-error\">The colour is too light"),
        "{page}"
    );
    assert!(page.contains("value=\"#ffd700\""), "kept: {page}");
    assert_eq!(plan_print(pool).await, before);
    let (status, _) = post(
        &app,
        &staff,
        &category,
        &[
            ("csrf", &csrf),
            ("name", "Upper circle"),
            ("colour", "#5A2D82"),
            ("price", "32.00"),
        ],
    )
    .await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    let saved: (String, String, i64) = sqlx::query_as(
        "select name, colour, price_minor from seat_categories \
          where collection = 'winter-gala' and id = 'balcony'",
    )
    .fetch_one(pool)
    .await
    .unwrap();
    assert_eq!(saved, ("Upper circle".into(), "#5a2d82".into(), 3200));
    app.settled().await;
    // both sections of the category sell at its new price from now on
    let started = app
        .start(&browser(), &Purchase::of("winter-gala-stalls", 2))
        .await;
    let amount: i64 = sqlx::query_scalar("select amount_minor from orders where id = $1")
        .bind(started.order_id)
        .fetch_one(pool)
        .await
        .unwrap();
    assert_eq!(amount, 2 * 3200);
    let balcony: i64 =
        sqlx::query_scalar("select price_minor from products where id = 'winter-gala-balcony'")
            .fetch_one(pool)
            .await
            .unwrap();
    assert_eq!(balcony, 3200);
    // the splits setting: saved, and a value not offered changes nothing
    for (word, to, splits) in [
        ("no", "splits_saved", false),
        ("sometimes", "splits_not_saved", false),
        ("yes", "splits_saved", true),
    ] {
        let (status, at) = post(
            &app,
            &staff,
            &format!("{STALLS}/splits"),
            &[("csrf", &csrf), ("splits", word)],
        )
        .await;
        assert_eq!(status, StatusCode::SEE_OTHER);
        assert!(at.contains(to), "{word}: {at}");
        let now: bool = sqlx::query_scalar("select splits from seating_settings")
            .fetch_one(pool)
            .await
            .unwrap();
        assert_eq!(now, splits, "{word}");
    }
    assert_eq!(audited(pool, "seat_section_category").await.len(), 1);
    assert_eq!(audited(pool, "seat_category").await.len(), 1);
    assert_eq!(audited(pool, "seat_splits").await.len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_replaced_from_its_fields_keeps_its_seats_and_a_bad_one_writes_nothing() {
    let app = spawn_app().await;
    app.load_demo().await;
    app.add_staff().await;
    app.settled().await;
    let pool = &app.db.pool;
    let (staff, csrf) = app.staff_browser().await;
    // the page shows the plan as it stands, a line of fields a row
    let page = app.admin_page(&staff, STALLS).await;
    for field in [
        "name=\"row\" value=\"A\"",
        "name=\"aisles\" value=\"7\"",
        "name=\"wheelchair\" value=\"1, 14\"",
        "name=\"companion\" value=\"2, 13\"",
        "name=\"row\" value=\"E\"",
    ] {
        assert!(page.contains(field), "{field}: {page}");
    }
    assert!(!page.contains("&quot;row&quot;"), "no JSON on the page");
    let plan = format!("{STALLS}/plan");
    let before = plan_print(pool).await;
    for (typed, words) in [
        (
            vec![["A", "1", "four", "", "", ""]],
            "Line 1: row A: the last seat is a number",
        ),
        (
            vec![["A", "1", "4", "", "", ""], ["A", "1", "4", "", "", ""]],
            "Line 2: row A is given twice",
        ),
        (
            vec![["A", "1", "4", "9", "", ""]],
            "Line 1: row A: an aisle after seat 9, but the row",
        ),
        (vec![["", "", "", "", "", ""]], "fill in at least one"),
    ] {
        let (status, page) = post(&app, &staff, &plan, &plan_form(&csrf, &typed)).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{typed:?}");
        assert!(page.contains("id=\"f-rows-error\">"), "{page}");
        assert!(page.contains(words), "{words}: {page}");
        // what was typed is kept
        assert!(page.contains(&format!("name=\"last\" value=\"{}\"", typed[0][2])));
        assert_eq!(plan_print(pool).await, before, "{typed:?}");
    }
    // fields that do not line up: refused, nothing written
    let (status, page) = post(
        &app,
        &staff,
        &plan,
        &[("csrf", &csrf), ("row", "A"), ("first", "1")],
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(page.contains("did not arrive whole"), "{page}");
    assert_eq!(plan_print(pool).await, before);
    // a shopper holds C-3; a plan keeping row C, taking row E out (its box
    // ticked: line 4 counting from 0), adding row F on a spare line
    take(pool, "held-c3", "winter-gala-stalls", &["C-3"]).await;
    let rows = [
        ["A", "1", "14", "7", "1, 14", "2, 13"],
        ["B", "1", "14", "7", "", ""],
        ["C", "1", "14", "7", "", ""],
        ["D", "1", "14", "7", "", ""],
        ["E", "1", "14", "7", "", ""],
        ["F", "1", "10", "", "", ""],
        ["", "", "", "", "", ""],
    ];
    let mut form = plan_form(&csrf, &rows);
    form.push(("out", "4"));
    let (status, to) = post(&app, &staff, &plan, &form).await;
    assert_eq!(status, StatusCode::SEE_OTHER, "{to}");
    // 14 of row E gone, 10 of row F added; D-7, D-8 stay blocked
    assert!(
        to.contains("created=10&updated=0&withdrawn=14&left=64#plan"),
        "{to}"
    );
    assert_eq!(
        books(pool, "winter-gala-stalls").await,
        (64, 1, 0, 1, false)
    );
    assert_eq!(shop_left(&app, "winter-gala-stalls", 63).await, 63);
    assert_eq!(
        audited(pool, "seat_plan").await,
        [("winter-gala-stalls".to_owned(), "changed".to_owned())]
    );
}

/// A hall of one section (`hall-stalls`, 5 rows of 20, an aisle after 10)
/// at an event staff can open.
async fn hall(pool: &sqlx::PgPool) {
    sqlx::raw_sql(
        "insert into collections (id, kind, title) values ('hall', 'event', 'The Hall'); \
         insert into seat_categories (collection, id, name, price_minor) \
              values ('hall', 'stalls', 'Stalls', 4000); \
         select hf_upsert_resource('hall-stalls', 0); \
         insert into products (id, resource_id, kind, name, price_minor, currency, collection) \
              values ('hall-stalls', 'hall-stalls', 'seat', 'Stalls', 4000, 'eur', 'hall'); \
         insert into seat_sections (product_id, resource_id, collection, category, name) \
              values ('hall-stalls', 'hall-stalls', 'hall', 'stalls', 'Stalls'); \
         select hf_seat_plan('hall-stalls', (select jsonb_agg(jsonb_build_object( \
                 'row', chr(64 + r), 'rank', r, 'seats', jsonb_build_array(1, 20), \
                 'aisles_after', jsonb_build_array(10))) from generate_series(1, 5) r));",
    )
    .execute(pool)
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn staff_block_seats_while_two_hundred_shoppers_race_for_the_section() {
    let app = spawn_app().await;
    app.add_staff().await;
    hall(&app.db.pool).await;
    app.settled().await;
    let pool = &app.db.pool;
    let token = crate::api_v1::key_with(&app, &[Scope::StartCheckouts]).await;
    let (staff, csrf) = app.staff_browser().await;
    let section = "/admin/catalogue/events/hall/sections/hall-stalls/seats";
    // 25 staff forms of two seats each, front to back, among 200 shoppers
    // each asking for the best seat
    let shoppers = join_all((0..200).map(|i| {
        let (app, token) = (&app, &token);
        async move {
            let response = holdfast::payments::http::client(std::time::Duration::from_secs(120))
                .post(format!("{}/api/v1/checkouts", app.address))
                .bearer_auth(token)
                .header("idempotency-key", format!("race-{i}"))
                .json(&json!({
                    "lines": [{ "product_id": "hall-stalls", "qty": 1, "together": true }],
                    "name": "Ada Shopper",
                    "email": format!("race{i}@example.com"),
                    "shopper_address": format!("10.1.{}.{}", i / 250, i % 250 + 1),
                }))
                .send()
                .await
                .unwrap();
            let status = response.status().as_u16();
            (
                status,
                response.json::<Value>().await.unwrap_or(Value::Null),
            )
        }
    }));
    let blocks = join_all((0..25).map(|k| {
        let (app, staff, csrf) = (&app, &staff, &csrf);
        let row = (b'A' + (k % 5) as u8) as char;
        let labels = [
            format!("{row}-{}", k / 5 * 2 + 1),
            format!("{row}-{}", k / 5 * 2 + 2),
        ];
        async move {
            let answer = app
                .admin_post(
                    staff,
                    section,
                    &[
                        ("csrf", csrf.as_str()),
                        ("seat", &labels[0]),
                        ("seat", &labels[1]),
                        ("action", "block"),
                        ("note", "camera"),
                    ],
                )
                .await;
            let status = answer.status();
            let said = if status == StatusCode::SEE_OTHER {
                location(&answer)
            } else {
                answer.text().await.unwrap()
            };
            (labels, status, said)
        }
    }));
    let (shoppers, blocks) = futures::join!(shoppers, blocks);
    let won = shoppers.iter().filter(|(s, _)| *s == 201).count();
    let refused = shoppers.iter().filter(|(s, _)| *s == 409).count();
    assert_eq!(
        won + refused,
        200,
        "every shopper answered 201 or 409: {shoppers:?}"
    );
    let mut blocked = 0;
    for (labels, status, said) in &blocks {
        match *status {
            StatusCode::SEE_OTHER => {
                assert!(said.contains("notice=seats_block&updated=2"), "{said}");
                blocked += 2;
            }
            StatusCode::CONFLICT => {
                // refused naming the seats a shopper got first, and only those
                let pinned: Vec<String> = sqlx::query_scalar(
                    "select s.label from seats s where s.section = 'hall-stalls' \
                        and s.label = any ($1) and s.state = 'open' \
                        and exists (select 1 from seat_pins p where p.seat_id = s.id and p.live) \
                      order by s.pos",
                )
                .bind(&labels[..])
                .fetch_all(pool)
                .await
                .unwrap();
                // those named had a shopper's pin then, and keep it (the
                // other of the pair may have been taken since)
                let named: Vec<&str> = said
                    .split("Refused: ")
                    .nth(1)
                    .and_then(|rest| rest.split(" a shopper").next())
                    .map(|words| {
                        words
                            .trim_end_matches(" is")
                            .trim_end_matches(" are")
                            .split(", ")
                            .collect()
                    })
                    .unwrap_or_default();
                assert!(!named.is_empty(), "{labels:?}: {said}");
                assert!(
                    named.iter().all(|n| pinned.iter().any(|p| p == n)),
                    "{labels:?} {pinned:?}: {said}"
                );
            }
            other => panic!("{other}: {said}"),
        }
    }
    // exact: every seat is a winner's or blocked; the counters are the pins
    assert_eq!(won + blocked, 100, "won {won}, blocked {blocked}");
    assert_eq!(
        books(pool, "hall-stalls").await,
        (100 - blocked as i32, won as i32, 0, won as i64, false)
    );
    let states: (i64, i64, i64, i64) = sqlx::query_as(
        "select count(*) filter (where state = 'blocked'), \
                count(*) filter (where state = 'blocked' and exists \
                    (select 1 from seat_pins p where p.seat_id = s.id and p.live)), \
                (select count(*) from (select seat_id from seat_pins where live \
                                        group by seat_id having count(*) > 1) x), \
                count(*) filter (where state = 'open' and not exists \
                    (select 1 from seat_pins p where p.seat_id = s.id and p.live)) \
           from seats s where s.section = 'hall-stalls'",
    )
    .fetch_one(pool)
    .await
    .unwrap();
    assert_eq!(
        states,
        (blocked as i64, 0, 0, 0),
        "blocked, blocked and sold, twice, free"
    );
    assert_eq!(
        audited(pool, "seat_block").await.len(),
        25,
        "each form one line, changed or refused"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_section_added_from_its_fields_sells_its_seats_and_a_taken_or_reserved_id_is_refused() {
    let app = spawn_app().await;
    app.load_demo().await;
    app.add_staff().await;
    app.settled().await;
    let pool = &app.db.pool;
    let (staff, csrf) = app.staff_browser().await;
    let add = "/admin/catalogue/events/winter-gala/sections";
    let section = |id: &'static str| {
        let mut form = plan_form(&csrf, &[["A", "1", "6", "3", "", ""]]);
        form.extend([
            ("name", "Boxes"),
            ("id", id),
            ("category", "balcony"),
            ("max_per_order", "4"),
        ]);
        form
    };
    let before = plan_print(pool).await;
    for (id, status, words) in [
        ("new", StatusCode::BAD_REQUEST, "the address of this page"),
        (
            "winter-gala-stalls",
            StatusCode::CONFLICT,
            "belongs to something the shop has",
        ),
    ] {
        let (got, page) = post(&app, &staff, add, &section(id)).await;
        assert_eq!(got, status, "{id}");
        assert!(page.contains(words), "{id}: {page}");
        assert_eq!(plan_print(pool).await, before, "{id}");
    }
    let (got, to) = post(&app, &staff, add, &section("")).await;
    assert_eq!(got, StatusCode::SEE_OTHER, "{to}");
    assert!(
        to.contains("/sections/winter-gala-boxes?notice=section_added"),
        "{to}"
    );
    // six seats on sale at the balcony's price, the activity says so
    assert_eq!(
        books(pool, "winter-gala-boxes").await,
        (6, 0, 0, 0, false),
        "6 on sale, none held or sold, no drift"
    );
    let price: i64 =
        sqlx::query_scalar("select price_minor from products where id = 'winter-gala-boxes'")
            .fetch_one(pool)
            .await
            .unwrap();
    assert_eq!(price, 3000);
    assert_eq!(
        audited(pool, "seat_section").await,
        [("winter-gala-boxes".to_owned(), "created".to_owned())]
    );
}
