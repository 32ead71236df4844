//! The catalogue and the vouchers in the admin, over HTTP against the real
//! app and PostgreSQL: an owner creates an event with two tiers, a pickup
//! schedule and a stock item, and the shop sells them; a price change
//! applies only to checkouts started after it; capacity below what is held
//! and sold is refused with the numbers and changes nothing; archiving
//! hides and keeps the orders, and what was archived is listed and comes
//! back as it was, its sold units untouched; a schedule's save never changes a slot with
//! orders; every bad input answers 4xx with a clear message and changes
//! nothing; a box-office account makes vouchers and cannot reach the
//! catalogue; Activity names who did each change.

use reqwest::StatusCode;

use holdfast::staff::roles::Role;
use holdfast_testkit::*;

const EVENT: &str = "harbour-nights";
const GENERAL: &str = "harbour-nights-general";
const VIP: &str = "harbour-nights-vip";

/// Everything a request could change: the kit's fingerprint and what is
/// sold (products, collections, schedules, vouchers, order lines).
async fn everything(pool: &sqlx::PgPool) -> Vec<String> {
    let mut prints = snapshot(pool).await;
    for table in [
        "products",
        "collections",
        "schedules",
        "vouchers",
        "order_lines",
    ] {
        let print: String = sqlx::query_scalar(&format!(
            "select '{table}:' || count(*) || ':' || coalesce(md5(string_agg(t::text, '|' order by t::text)), '') from {table} t"
        ))
        .fetch_one(pool)
        .await
        .unwrap();
        prints.push(print);
    }
    prints
}

/// A form posted to a path, the status it must get and what it must say.
type Case = (
    String,
    Vec<(&'static str, &'static str)>,
    StatusCode,
    &'static str,
);

/// What changed between two fingerprints, Activity left out.
fn changed_but_activity(before: &[String], after: &[String]) -> Vec<String> {
    before
        .iter()
        .zip(after)
        .filter(|(b, a)| b != a && !b.starts_with("staff_actions"))
        .map(|(b, _)| b.split(':').next().unwrap().to_owned())
        .collect()
}

async fn post(
    app: &TestApp,
    staff: &reqwest::Client,
    path: &str,
    csrf: &str,
    fields: &[(&str, &str)],
) -> reqwest::Response {
    let mut form = vec![("csrf", csrf)];
    form.extend_from_slice(fields);
    app.admin_post(staff, path, &form).await
}

/// A save that must be done: where it leads.
async fn saved(
    app: &TestApp,
    staff: &reqwest::Client,
    path: &str,
    csrf: &str,
    fields: &[(&str, &str)],
) -> String {
    let response = post(app, staff, path, csrf, fields).await;
    let status = response.status();
    if status != StatusCode::SEE_OTHER {
        panic!(
            "POST {path} answered {status}: {}",
            response.text().await.unwrap()
        );
    }
    location(&response)
}

fn event_fields<'a>(title: &'a str, starts_at: &'a str) -> Vec<(&'a str, &'a str)> {
    vec![
        ("title", title),
        ("lede", "Two tiers on the pier."),
        ("id", EVENT),
        ("starts_at", starts_at),
        ("doors_at", "19:00"),
        ("venue", "Pier 4"),
    ]
}

fn tier_fields<'a>(name: &'a str, price: &'a str, capacity: &'a str) -> Vec<(&'a str, &'a str)> {
    vec![
        ("name", name),
        ("description", "Standing."),
        ("price", price),
        ("capacity", capacity),
        ("max_per_order", "10"),
        ("sale_opens_at", ""),
        ("sale_closes_at", ""),
    ]
}

/// Publish a new event or schedule (`collections/…`) or stock item
/// (`products/…`): a new one starts as a draft (drafts::).
async fn publish(app: &TestApp, staff: &reqwest::Client, csrf: &str, thing: &str) {
    let to = saved(
        app,
        staff,
        &format!("/admin/catalogue/{thing}/publish"),
        csrf,
        &[],
    )
    .await;
    assert_eq!(to, "/admin/catalogue?notice=published");
}

/// The owner's browser, and an event with a General (35.00, 100 places)
/// and a VIP (80.00, 10 places) tier.
async fn owner_with_event(app: &TestApp) -> (reqwest::Client, String) {
    app.add_staff().await;
    let (staff, csrf) = app.staff_browser().await;
    let to = saved(
        app,
        &staff,
        "/admin/catalogue/events",
        &csrf,
        // wall-clock time in the shop's zone
        &event_fields("Harbour Nights", "2030-06-20 20:00"),
    )
    .await;
    assert_eq!(
        to,
        format!("/admin/catalogue/events/{EVENT}?notice=event_created")
    );
    for (name, price, capacity) in [("General", "35", "100"), ("VIP", "80.00", "10")] {
        let to = saved(
            app,
            &staff,
            &format!("/admin/catalogue/events/{EVENT}/tiers"),
            &csrf,
            &tier_fields(name, price, capacity),
        )
        .await;
        assert!(to.ends_with("?notice=tier_created"), "{to}");
    }
    publish(app, &staff, &csrf, &format!("collections/{EVENT}")).await;
    app.settled().await;
    (staff, csrf)
}

async fn price_of(app: &TestApp, product: &str) -> i64 {
    sqlx::query_scalar("select price_minor from products where id = $1")
        .bind(product)
        .fetch_one(&app.db.pool)
        .await
        .unwrap()
}

async fn order_amount(app: &TestApp, token: &str) -> (i64, i64) {
    sqlx::query_as(
        "select o.amount_minor, l.unit_price_minor from orders o \
           join order_lines l on l.order_id = o.id where o.token = $1",
    )
    .bind(token)
    .fetch_one(&app.db.pool)
    .await
    .unwrap()
}

#[tokio::test]
async fn an_owner_sets_up_an_event_a_schedule_and_stock_and_the_shop_sells_them() {
    let app = spawn_app_shaped(TestDb::new().await, |_, shop| {
        shop.default_zone = holdfast_testkit::clock::berlin();
    })
    .await;
    let (staff, csrf) = owner_with_event(&app).await;

    // the event at 20:00 in Berlin (summer time), its doors at 19:00 on
    // the event's day
    let (starts, doors, venue): (
        chrono::DateTime<chrono::Utc>,
        chrono::DateTime<chrono::Utc>,
        String,
    ) = sqlx::query_as("select starts_at, doors_at, venue from collections where id = $1")
        .bind(EVENT)
        .fetch_one(&app.db.pool)
        .await
        .unwrap();
    assert_eq!(starts.to_rfc3339(), "2030-06-20T18:00:00+00:00");
    assert_eq!(doors.to_rfc3339(), "2030-06-20T17:00:00+00:00");
    assert_eq!(venue, "Pier 4");
    let page = app
        .admin_page(&staff, &format!("/admin/catalogue/events/{EVENT}"))
        .await;
    assert!(
        page.contains("value=\"2030-06-20T20:00\""),
        "shown in the shop's zone: {page}"
    );
    // moved, with an explicit offset: the tiers follow
    saved(
        &app,
        &staff,
        &format!("/admin/catalogue/events/{EVENT}"),
        &csrf,
        &event_fields("Harbour Nights", "2030-06-21T21:30:00+02:00"),
    )
    .await;
    let (starts, doors): (chrono::DateTime<chrono::Utc>, chrono::DateTime<chrono::Utc>) =
        sqlx::query_as("select starts_at, doors_at from collections where id = $1")
            .bind(EVENT)
            .fetch_one(&app.db.pool)
            .await
            .unwrap();
    assert_eq!(starts.to_rfc3339(), "2030-06-21T19:30:00+00:00");
    assert_eq!(doors.to_rfc3339(), "2030-06-21T17:00:00+00:00");
    let tiers: Vec<(String, i64, i32, Option<chrono::DateTime<chrono::Utc>>)> = sqlx::query_as(
        "select p.id, p.price_minor, r.total, p.starts_at from products p \
           join resources r on r.id = p.resource_id where p.collection = $1 order by p.id",
    )
    .bind(EVENT)
    .fetch_all(&app.db.pool)
    .await
    .unwrap();
    assert_eq!(
        tiers,
        [
            (GENERAL.to_owned(), 3500, 100, Some(starts)),
            (VIP.to_owned(), 8000, 10, Some(starts))
        ]
    );

    // a pickup schedule: every day, 08:00 to 09:00 in half hours, today
    // and two days ahead; saving publishes it
    let to = saved(
        &app,
        &staff,
        "/admin/catalogue/schedules",
        &csrf,
        &[
            ("title", "Bread pickup"),
            ("lede", "Fresh each morning."),
            ("id", "bread"),
            ("name", "Rye loaf"),
            ("description", ""),
            ("price", "6.50"),
            ("capacity", "4"),
            ("max_per_order", "2"),
            ("weekday", "1"),
            ("weekday", "2"),
            ("weekday", "3"),
            ("weekday", "4"),
            ("weekday", "5"),
            ("weekday", "6"),
            ("weekday", "7"),
            ("opens", "08:00"),
            ("closes", "09:00"),
            ("slot_minutes", "30"),
            ("days_ahead", "2"),
            ("closed_days", ""),
        ],
    )
    .await;
    assert!(
        to.starts_with("/admin/catalogue/schedules/bread?notice=schedule_saved"),
        "{to}"
    );
    let page = app.admin_page(&staff, &to).await;
    assert!(page.contains("Schedule saved: "), "{page}");
    publish(&app, &staff, &csrf, "collections/bread").await;
    let slots: Vec<(String, i64)> = sqlx::query_as(
        "select id, price_minor from products where collection = 'bread' and active order by id",
    )
    .fetch_all(&app.db.pool)
    .await
    .unwrap();
    // two days ahead in full, and what is left of today
    assert!((4..=6).contains(&slots.len()), "{slots:?}");
    assert!(slots.iter().all(|(_, price)| *price == 650));

    // a stock item on a new shelf
    let to = saved(
        &app,
        &staff,
        "/admin/catalogue/stock",
        &csrf,
        &[
            ("name", "Sea salt"),
            ("description", "Flaked."),
            ("shelf", "Larder"),
            ("id", ""),
            ("price", "4.20"),
            ("capacity", "30"),
            ("max_per_order", "5"),
        ],
    )
    .await;
    assert_eq!(to, "/admin/catalogue/stock/sea-salt?notice=stock_created");
    publish(&app, &staff, &csrf, "products/sea-salt").await;
    app.settled().await;

    // the shop shows them all, and the event's page its tiers
    let home = read_page(&app.client, &format!("{}/", app.address)).await;
    for shown in [
        "Harbour Nights",
        "General",
        "VIP",
        "Bread pickup",
        "Sea salt",
        "Larder",
    ] {
        assert!(home.contains(shown), "{shown} on the shop's page: {home}");
    }
    // a schedule's times are on its days' pages (the first day's here)
    let bread = read_page(&app.client, &format!("{}/c/bread", app.address)).await;
    assert!(bread.contains("Rye loaf"), "{bread}");
    let event_page = read_page(&app.client, &format!("{}/c/{EVENT}", app.address)).await;
    assert!(
        event_page.contains("General") && event_page.contains("VIP"),
        "{event_page}"
    );
    assert!(
        event_page.contains("€35.00") && event_page.contains("€80.00"),
        "{event_page}"
    );

    // and sells them
    let paid = app
        .buy(&browser(), &Purchase::of(VIP, 2).and("sea-salt", 1))
        .await;
    assert_eq!(app.order_state(&paid.started.token).await, "paid");
    let slot = &slots.last().unwrap().0;
    let paid_slot = app.buy(&browser(), &Purchase::of(slot, 1)).await;
    assert_eq!(app.order_state(&paid_slot.started.token).await, "paid");

    // the catalogue page lists it all, with its counters
    let catalogue = app.admin_page(&staff, "/admin/catalogue").await;
    for shown in [
        "Harbour Nights",
        "Bread pickup",
        "Larder",
        "Sea salt",
        "€80.00",
    ] {
        assert!(catalogue.contains(shown), "{shown}: {catalogue}");
    }
    assert!(catalogue.contains(&format!("/admin/catalogue/events/{EVENT}/tiers/{VIP}")));

    // Activity names each change and who made it
    let activity = app.admin_page(&staff, "/admin/activity").await;
    for (action, target) in [
        ("save_event", EVENT),
        ("save_tier", GENERAL),
        ("save_tier", VIP),
        ("save_schedule", "bread"),
        ("save_stock", "sea-salt"),
    ] {
        let recorded: Vec<(String, String)> = sqlx::query_as(
            "select s.email, a.outcome from staff_actions a join staff s on s.id = a.staff_id \
              where a.action = $1 and a.target = $2 order by a.id limit 1",
        )
        .bind(action)
        .bind(target)
        .fetch_all(&app.db.pool)
        .await
        .unwrap();
        assert_eq!(
            recorded,
            [(STAFF_EMAIL.to_owned(), "created".to_owned())],
            "{action} {target}"
        );
        assert!(
            activity.contains(action) && activity.contains(target),
            "{activity}"
        );
    }
    assert!(activity.contains(STAFF_EMAIL));
}

#[tokio::test]
async fn a_price_change_applies_only_to_checkouts_started_after_it() {
    let app = spawn_app().await;
    let (staff, csrf) = owner_with_event(&app).await;
    let shopper = browser();
    let started = app.start(&shopper, &Purchase::of(GENERAL, 2)).await;
    assert_eq!(order_amount(&app, &started.token).await, (7000, 3500));

    let to = saved(
        &app,
        &staff,
        &format!("/admin/catalogue/events/{EVENT}/tiers/{GENERAL}"),
        &csrf,
        &tier_fields("General", "40", "100"),
    )
    .await;
    assert!(to.ends_with("notice=tier_saved"), "{to}");
    let page = app.admin_page(&staff, &to).await;
    assert!(
        page.contains("orders already started keep theirs"),
        "{page}"
    );
    assert_eq!(price_of(&app, GENERAL).await, 4000);
    app.settled().await;

    // the order started before keeps its price, and is paid for it
    let paid = app.pay(&shopper, &started, &Payment::default()).await;
    assert_eq!(app.order_state(&paid.started.token).await, "paid");
    assert_eq!(order_amount(&app, &started.token).await, (7000, 3500));
    // one started after pays the new one
    let after = app.start(&browser(), &Purchase::of(GENERAL, 2)).await;
    assert_eq!(order_amount(&app, &after.token).await, (8000, 4000));

    let change: serde_json::Value = sqlx::query_scalar(
        "select detail from staff_actions where action = 'save_tier' and outcome = 'updated'",
    )
    .fetch_one(&app.db.pool)
    .await
    .unwrap();
    assert_eq!(
        change,
        serde_json::json!({ "price_minor": { "from": 3500, "to": 4000 } })
    );
}

#[tokio::test]
async fn capacity_below_what_is_held_and_sold_is_refused_with_the_numbers_and_changes_nothing() {
    let app = spawn_app().await;
    let (staff, csrf) = owner_with_event(&app).await;
    // 3 held by a shopper paying, 2 sold
    app.start(&browser(), &Purchase::of(VIP, 3)).await;
    app.buy(&browser(), &Purchase::of(VIP, 2)).await;

    let before = everything(&app.db.pool).await;
    let tier = format!("/admin/catalogue/events/{EVENT}/tiers/{VIP}");
    let answer = post(
        &app,
        &staff,
        &tier,
        &csrf,
        // a new name and price too: nothing of the save is written
        &tier_fields("VIP lounge", "99", "4"),
    )
    .await;
    assert_eq!(answer.status(), StatusCode::CONFLICT);
    let page = answer.text().await.unwrap();
    assert!(
        page.contains("3 are held and 2 sold, so the capacity cannot go below 5 (you asked for 4)"),
        "{page}"
    );
    assert!(page.contains("Nothing was saved"), "{page}");
    assert!(
        page.contains("aria-describedby=\"f-capacity-hint f-capacity-error\""),
        "{page}"
    );
    assert!(
        page.contains("value=\"VIP lounge\""),
        "what was typed is kept: {page}"
    );
    let after = everything(&app.db.pool).await;
    assert_eq!(changed_but_activity(&before, &after), Vec::<String>::new());
    assert_eq!(price_of(&app, VIP).await, 8000);
    let refused: serde_json::Value = sqlx::query_scalar(
        "select detail from staff_actions \
          where action = 'save_tier' and outcome = 'refused_below_committed'",
    )
    .fetch_one(&app.db.pool)
    .await
    .unwrap();
    assert_eq!(
        refused,
        serde_json::json!({ "requested": 4, "held": 3, "sold": 2 })
    );

    // exactly what is held and sold is allowed
    saved(&app, &staff, &tier, &csrf, &tier_fields("VIP", "80", "5")).await;
    assert_no_drift(&app.db.inventory()).await;
}

#[tokio::test]
async fn archiving_hides_from_the_shop_and_keeps_the_orders() {
    let app = spawn_app().await;
    let (staff, csrf) = owner_with_event(&app).await;
    let paid = app.buy(&browser(), &Purchase::of(VIP, 1)).await;

    let to = saved(
        &app,
        &staff,
        &format!("/admin/catalogue/products/{VIP}/archive"),
        &csrf,
        &[],
    )
    .await;
    assert_eq!(to, "/admin/catalogue?notice=product_archived");
    app.settled().await;
    let home = read_page(&app.client, &format!("{}/", app.address)).await;
    assert!(home.contains("General") && !home.contains("VIP"), "{home}");
    let catalogue = app.admin_page(&staff, "/admin/catalogue").await;
    assert!(
        !catalogue.contains(&format!("data-product=\"{VIP}\"")),
        "{catalogue}"
    );
    // a shopper can no longer buy it
    let refused = app.try_start(&browser(), &Purchase::of(VIP, 1)).await;
    assert!(!matches!(refused, Attempt::Started(_)), "{refused:?}");

    // the whole event, then: off the shop, its order and product rows kept
    saved(
        &app,
        &staff,
        &format!("/admin/catalogue/collections/{EVENT}/archive"),
        &csrf,
        &[],
    )
    .await;
    app.settled().await;
    let home = read_page(&app.client, &format!("{}/", app.address)).await;
    assert!(!home.contains("Harbour Nights"), "{home}");
    assert_eq!(app.order_state(&paid.started.token).await, "paid");
    let order_page = read_page(&app.client, &format!("{}{}", app.address, paid.order_url())).await;
    assert!(order_page.contains("VIP"), "{order_page}");
    let kept: i64 = sqlx::query_scalar(
        "select count(*) from products where collection = $1 and not active \
            and archived_at is not null",
    )
    .bind(EVENT)
    .fetch_one(&app.db.pool)
    .await
    .unwrap();
    assert_eq!(kept, 2, "archived, not deleted");
    // archiving again finds nothing on sale
    let again = post(
        &app,
        &staff,
        &format!("/admin/catalogue/products/{VIP}/archive"),
        &csrf,
        &[],
    )
    .await;
    assert_eq!(again.status(), StatusCode::NOT_FOUND);
    for action in ["archive_product", "archive_collection"] {
        let who: String = sqlx::query_scalar(
            "select s.email from staff_actions a join staff s on s.id = a.staff_id \
              where a.action = $1",
        )
        .bind(action)
        .fetch_one(&app.db.pool)
        .await
        .unwrap();
        assert_eq!(who, STAFF_EMAIL);
    }
}

/// Each resource of the event: its capacity, reserved and sold units.
async fn counters_of_event(app: &TestApp) -> Vec<(String, i32, i32, i32)> {
    sqlx::query_as(
        "select r.id, r.total, r.held, r.sold from resources r \
           join products p on p.resource_id = r.id where p.collection = $1 order by r.id",
    )
    .bind(EVENT)
    .fetch_all(&app.db.pool)
    .await
    .unwrap()
}

/// Which of the event's products are on sale (active, not archived).
async fn on_sale(app: &TestApp) -> Vec<String> {
    sqlx::query_scalar(
        "select id from products where collection = $1 and active and archived_at is null \
          order by id",
    )
    .bind(EVENT)
    .fetch_all(&app.db.pool)
    .await
    .unwrap()
}

#[tokio::test]
async fn what_was_archived_is_listed_and_restored_as_it_was_with_its_sold_units() {
    let app = spawn_app().await;
    let (staff, csrf) = owner_with_event(&app).await;
    app.buy(&browser(), &Purchase::of(VIP, 1)).await;
    app.buy(&browser(), &Purchase::of(GENERAL, 3)).await;
    let counters = counters_of_event(&app).await;
    assert_eq!(
        counters,
        vec![(GENERAL.to_owned(), 100, 0, 3), (VIP.to_owned(), 10, 0, 1)]
    );
    // the VIP tier alone first, then the whole event (the General tier
    // with it)
    saved(
        &app,
        &staff,
        &format!("/admin/catalogue/products/{VIP}/archive"),
        &csrf,
        &[],
    )
    .await;
    let list = app.admin_page(&staff, "/admin/catalogue/archived").await;
    assert!(
        list.contains(&format!("data-archived-product=\"{VIP}\"")),
        "{list}"
    );
    assert!(
        list.contains("No event, schedule or shelf is archived."),
        "{list}"
    );
    let catalogue = app.admin_page(&staff, "/admin/catalogue").await;
    assert!(catalogue.contains("Archived (1)"), "{catalogue}");
    saved(
        &app,
        &staff,
        &format!("/admin/catalogue/collections/{EVENT}/archive"),
        &csrf,
        &[],
    )
    .await;
    assert!(on_sale(&app).await.is_empty());
    let list = app.admin_page(&staff, "/admin/catalogue/archived").await;
    assert!(
        list.contains(&format!("data-archived-collection=\"{EVENT}\"")),
        "{list}"
    );
    assert!(list.contains("with 1 product (3 sold)"), "{list}");
    assert!(list.contains("Yes, restore Harbour Nights"), "{list}");
    assert!(
        list.contains("No product is archived on its own."),
        "{list}"
    );

    // the VIP tier cannot come back while its event is archived
    let before = everything(&app.db.pool).await;
    let to = saved(
        &app,
        &staff,
        &format!("/admin/catalogue/products/{VIP}/restore"),
        &csrf,
        &[],
    )
    .await;
    assert_eq!(
        to,
        "/admin/catalogue/archived?notice=restore_collection_first"
    );
    assert!(app.admin_page(&staff, &to).await.contains("Restore that"));
    assert_eq!(
        everything(&app.db.pool).await,
        before,
        "a refused restore changed something"
    );

    // the event comes back with what was archived with it, not the VIP tier
    let to = saved(
        &app,
        &staff,
        &format!("/admin/catalogue/collections/{EVENT}/restore"),
        &csrf,
        &[],
    )
    .await;
    assert_eq!(to, "/admin/catalogue?notice=restored&lines=1");
    assert_eq!(on_sale(&app).await, vec![GENERAL.to_owned()]);
    assert_eq!(
        counters_of_event(&app).await,
        counters,
        "the counters moved"
    );
    app.settled().await;
    let home = read_page(&app.client, &format!("{}/", app.address)).await;
    assert!(
        home.contains("Harbour Nights") && !home.contains("VIP"),
        "{home}"
    );
    app.buy(&browser(), &Purchase::of(GENERAL, 2)).await;
    let refused = app.try_start(&browser(), &Purchase::of(VIP, 1)).await;
    assert!(!matches!(refused, Attempt::Started(_)), "{refused:?}");

    // then the VIP tier, on its own: its one sold unit still sold
    let to = saved(
        &app,
        &staff,
        &format!("/admin/catalogue/products/{VIP}/restore"),
        &csrf,
        &[],
    )
    .await;
    assert_eq!(to, "/admin/catalogue?notice=restored&lines=1");
    assert_eq!(
        on_sale(&app).await,
        vec![GENERAL.to_owned(), VIP.to_owned()]
    );
    assert_eq!(
        counters_of_event(&app).await,
        vec![(GENERAL.to_owned(), 100, 0, 5), (VIP.to_owned(), 10, 0, 1)]
    );
    app.buy(&browser(), &Purchase::of(VIP, 1)).await;
    let list = app.admin_page(&staff, "/admin/catalogue/archived").await;
    assert!(!list.contains("data-archived"), "{list}");
    // restoring what is not archived finds nothing, and changes nothing
    let before = everything(&app.db.pool).await;
    for path in [
        format!("/admin/catalogue/products/{VIP}/restore"),
        format!("/admin/catalogue/collections/{EVENT}/restore"),
        "/admin/catalogue/collections/no-such-event/restore".to_owned(),
    ] {
        let again = post(&app, &staff, &path, &csrf, &[]).await;
        assert_eq!(again.status(), StatusCode::NOT_FOUND, "{path}");
    }
    assert_eq!(
        changed_but_activity(&before, &everything(&app.db.pool).await),
        Vec::<String>::new()
    );
    // Activity names who restored what
    let restored: Vec<(String, String, String)> = sqlx::query_as(
        "select s.email, a.action, a.target from staff_actions a \
           join staff s on s.id = a.staff_id where a.outcome = 'restored' order by a.id",
    )
    .fetch_all(&app.db.pool)
    .await
    .unwrap();
    assert_eq!(
        restored,
        vec![
            (
                STAFF_EMAIL.to_owned(),
                "restore_collection".to_owned(),
                EVENT.to_owned()
            ),
            (
                STAFF_EMAIL.to_owned(),
                "restore_product".to_owned(),
                VIP.to_owned()
            ),
        ]
    );
}

/// A stock item's form as it is saved again, with units to add or remove.
fn stock_fields(add_units: &str) -> Vec<(&str, &str)> {
    vec![
        ("name", "Sea salt"),
        ("description", "Flaked."),
        ("shelf", "Larder"),
        ("price", "4.20"),
        ("max_per_order", "5"),
        ("add_units", add_units),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn stock_is_added_and_removed_by_units_while_checkouts_run_and_every_unit_counts() {
    let app = spawn_app().await;
    app.add_staff().await;
    let (staff, csrf) = app.staff_browser().await;
    let mut fields = stock_fields("");
    fields.retain(|(name, _)| *name != "add_units");
    fields.push(("capacity", "60"));
    saved(&app, &staff, "/admin/catalogue/stock", &csrf, &fields).await;
    publish(&app, &staff, &csrf, "products/sea-salt").await;
    app.settled().await;
    let page = app
        .admin_page(&staff, "/admin/catalogue/stock/sea-salt")
        .await;
    assert!(
        page.contains("In stock: <strong>60</strong> units in all — 0 sold, 0 reserved"),
        "{page}"
    );
    assert!(
        !page.contains("name=\"capacity\""),
        "one place for the count: {page}"
    );

    // 160 shoppers start checkouts of one unit (more than there are) while
    // staff add ten units twenty times and remove three twenty times, all
    // at once
    let shoppers = (0..160).map(|_| {
        let app = &app;
        async move {
            matches!(
                app.try_start(&browser(), &Purchase::of("sea-salt", 1))
                    .await,
                Attempt::Started(_)
            )
        }
    });
    let saves = (0..40).map(|i| {
        let (app, staff, csrf) = (&app, &staff, &csrf);
        let units = if i % 2 == 0 { "+10" } else { "-3" };
        async move {
            let answer = post(
                app,
                staff,
                "/admin/catalogue/stock/sea-salt",
                csrf,
                &stock_fields(units),
            )
            .await;
            (units, answer.status())
        }
    });
    let (started, saved_units) = futures::join!(
        futures::future::join_all(shoppers),
        futures::future::join_all(saves)
    );
    let started = started.iter().filter(|s| **s).count() as i32;
    let mut expected = 60;
    for (units, status) in &saved_units {
        match *status {
            StatusCode::SEE_OTHER => expected += units.parse::<i32>().unwrap(),
            StatusCode::CONFLICT => assert_eq!(*units, "-3", "only a removal is refused"),
            other => panic!("{units}: {other}"),
        }
    }
    let (total, held, sold): (i32, i32, i32) =
        sqlx::query_as("select total, held, sold from resources where id = 'sea-salt'")
            .fetch_one(&app.db.pool)
            .await
            .unwrap();
    let refused = saved_units
        .iter()
        .filter(|(_, s)| *s == StatusCode::CONFLICT)
        .count();
    println!(
        "stock by units: {started} of 160 checkouts started, {refused} removals refused, \
         total {total} (held {held}, sold {sold})"
    );
    assert_eq!(total, expected, "every save counted once: {saved_units:?}");
    assert_eq!(
        held + sold,
        started,
        "every started checkout holds its unit"
    );
    assert!(total >= held + sold);
    assert_no_drift(&app.db.inventory()).await;

    // more than is available: refused, said beside the field, nothing changed
    let before = everything(&app.db.pool).await;
    let too_many = format!("-{}", total - held - sold + 1);
    let refused = post(
        &app,
        &staff,
        "/admin/catalogue/stock/sea-salt",
        &csrf,
        &stock_fields(&too_many),
    )
    .await;
    assert_eq!(refused.status(), StatusCode::CONFLICT);
    let page = refused.text().await.unwrap();
    assert!(
        page.contains(&format!(
            "so at most {} units can be removed now (you asked to remove {})",
            total - held - sold,
            total - held - sold + 1
        )),
        "{page}"
    );
    assert!(page.contains("id=\"f-add_units-error\""), "{page}");
    assert_eq!(
        changed_but_activity(&before, &everything(&app.db.pool).await),
        Vec::<String>::new()
    );
    // not a number of units
    let bad = post(
        &app,
        &staff,
        "/admin/catalogue/stock/sea-salt",
        &csrf,
        &stock_fields("a dozen"),
    )
    .await;
    assert_eq!(bad.status(), StatusCode::BAD_REQUEST);
    assert!(bad.text().await.unwrap().contains("value=\"a dozen\""));
    assert_eq!(
        changed_but_activity(&before, &everything(&app.db.pool).await),
        Vec::<String>::new()
    );
}

/// The shop's sections (collections in the shop) in page order, with
/// their places.
async fn sections(app: &TestApp) -> Vec<(String, i32)> {
    sqlx::query_as(
        "select id, position from collections where archived_at is null order by position, id",
    )
    .fetch_all(&app.db.pool)
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_owner_orders_the_shops_sections_and_moves_at_once_never_share_a_place() {
    let app = spawn_app().await;
    app.load_demo().await;
    app.add_staff().await;
    let (staff, csrf) = app.staff_browser().await;
    let before: Vec<String> = sections(&app).await.into_iter().map(|(id, _)| id).collect();
    assert!(before.len() >= 3, "{before:?}");
    let last = before.last().unwrap().clone();
    let to = saved(
        &app,
        &staff,
        &format!("/admin/catalogue/collections/{last}/move"),
        &csrf,
        &[("to", "up")],
    )
    .await;
    assert_eq!(
        to,
        format!("/admin/catalogue?notice=section_moved#c-{last}")
    );
    let after: Vec<String> = sections(&app).await.into_iter().map(|(id, _)| id).collect();
    let mut expected = before.clone();
    let n = expected.len();
    expected.swap(n - 1, n - 2);
    assert_eq!(after, expected);
    // the shop shows them in that order
    app.settled().await;
    let home = read_page(&app.client, &format!("{}/", app.address)).await;
    let titles: Vec<String> = sqlx::query_scalar(
        "select title from collections where archived_at is null order by position, id",
    )
    .fetch_all(&app.db.pool)
    .await
    .unwrap();
    let places: Vec<usize> = titles
        .iter()
        .filter_map(|t| home.find(t.as_str()))
        .collect();
    assert_eq!(places.len(), titles.len(), "{home}");
    assert!(
        places.windows(2).all(|w| w[0] < w[1]),
        "{titles:?} {places:?}"
    );
    // the first one up stays first; a word not a way, or no such section
    let first = after[0].clone();
    saved(
        &app,
        &staff,
        &format!("/admin/catalogue/collections/{first}/move"),
        &csrf,
        &[("to", "up")],
    )
    .await;
    assert_eq!(
        sections(&app)
            .await
            .into_iter()
            .map(|(id, _)| id)
            .collect::<Vec<_>>(),
        after
    );
    let sideways = post(
        &app,
        &staff,
        &format!("/admin/catalogue/collections/{first}/move"),
        &csrf,
        &[("to", "sideways")],
    )
    .await;
    // back to the catalogue, saying so
    assert_eq!(sideways.status(), StatusCode::SEE_OTHER);
    assert!(
        location(&sideways).starts_with("/admin/catalogue?notice=section_not_moved"),
        "{}",
        location(&sideways)
    );
    let nowhere = post(
        &app,
        &staff,
        "/admin/catalogue/collections/no-such/move",
        &csrf,
        &[("to", "up")],
    )
    .await;
    assert_eq!(nowhere.status(), StatusCode::NOT_FOUND);
    // forty moves at once: every section keeps a place of its own
    let moves = (0..40).map(|i| {
        let (app, staff, csrf) = (&app, &staff, &csrf);
        let id = after[i % after.len()].clone();
        let way = if i % 3 == 0 { "down" } else { "up" };
        async move {
            post(
                app,
                staff,
                &format!("/admin/catalogue/collections/{id}/move"),
                csrf,
                &[("to", way)],
            )
            .await
            .status()
        }
    });
    // each is done, or (waiting too long for the others) answered busy
    // with nothing changed
    let statuses = futures::future::join_all(moves).await;
    let done = statuses
        .iter()
        .filter(|s| **s == StatusCode::SEE_OTHER)
        .count();
    assert!(
        statuses
            .iter()
            .all(|s| *s == StatusCode::SEE_OTHER || *s == StatusCode::SERVICE_UNAVAILABLE),
        "{statuses:?}"
    );
    assert!(done > 0, "{statuses:?}");
    let places: Vec<i32> = sections(&app).await.into_iter().map(|(_, p)| p).collect();
    assert_eq!(places, (0..places.len() as i32).collect::<Vec<_>>());
    let recorded: i64 =
        sqlx::query_scalar("select count(*) from staff_actions where action = 'move_collection'")
            .fetch_one(&app.db.pool)
            .await
            .unwrap();
    assert!(
        recorded >= 1 && recorded <= 1 + done as i64,
        "{recorded} {done}"
    );
}

#[tokio::test]
async fn saving_a_schedule_never_changes_a_slot_that_has_orders() {
    let app = spawn_app().await;
    app.add_staff().await;
    let (staff, csrf) = app.staff_browser().await;
    let schedule = |price: &'static str| {
        vec![
            ("title", "Bread pickup"),
            ("id", "bread"),
            ("name", "Rye loaf"),
            ("price", price),
            ("capacity", "4"),
            ("max_per_order", "2"),
            ("weekday", "1"),
            ("weekday", "2"),
            ("weekday", "3"),
            ("weekday", "4"),
            ("weekday", "5"),
            ("weekday", "6"),
            ("weekday", "7"),
            ("opens", "08:00"),
            ("closes", "10:00"),
            ("slot_minutes", "60"),
            ("days_ahead", "3"),
        ]
    };
    saved(
        &app,
        &staff,
        "/admin/catalogue/schedules",
        &csrf,
        &schedule("6"),
    )
    .await;
    publish(&app, &staff, &csrf, "collections/bread").await;
    app.settled().await;
    let slots: Vec<String> = sqlx::query_scalar(
        "select id from products where collection = 'bread' and active order by id",
    )
    .fetch_all(&app.db.pool)
    .await
    .unwrap();
    let (ordered, untouched) = (&slots[slots.len() - 1], &slots[slots.len() - 2]);
    app.buy(&browser(), &Purchase::of(ordered, 1)).await;

    let to = saved(
        &app,
        &staff,
        "/admin/catalogue/schedules/bread",
        &csrf,
        &schedule("7"),
    )
    .await;
    assert!(to.contains("kept=1"), "{to}");
    assert_eq!(price_of(&app, ordered).await, 600, "the slot with an order");
    assert_eq!(price_of(&app, untouched).await, 700, "a slot without one");

    // a schedule that no longer has the ordered slot (a closed day) keeps it
    // on sale, and withdraws the others of that day
    let day = &ordered[ordered.len() - 15..ordered.len() - 5];
    let mut closed = schedule("7");
    closed.push(("closed_days", day));
    let to = saved(
        &app,
        &staff,
        "/admin/catalogue/schedules/bread",
        &csrf,
        &closed,
    )
    .await;
    assert!(to.contains("kept=1"), "{to}");
    let active: bool = sqlx::query_scalar("select active from products where id = $1")
        .bind(ordered)
        .fetch_one(&app.db.pool)
        .await
        .unwrap();
    assert!(active, "the slot with an order stays on sale");
    let recorded: i64 = sqlx::query_scalar(
        "select count(*) from staff_actions where action = 'save_schedule' \
            and detail ? 'published'",
    )
    .fetch_one(&app.db.pool)
    .await
    .unwrap();
    assert_eq!(recorded, 3);
}

#[tokio::test]
async fn bad_input_answers_4xx_with_a_clear_message_and_changes_nothing() {
    let app = spawn_app().await;
    let (staff, csrf) = owner_with_event(&app).await;
    let long = "x".repeat(201);
    let event = "/admin/catalogue/events";
    let tiers = format!("/admin/catalogue/events/{EVENT}/tiers");
    let general = format!("/admin/catalogue/events/{EVENT}/tiers/{GENERAL}");
    let with = |base: Vec<(&'static str, &'static str)>,
                name: &'static str,
                value: &'static str| {
        let mut fields: Vec<(&str, &str)> = base.into_iter().filter(|(n, _)| *n != name).collect();
        fields.push((name, value));
        fields
    };
    let event_base = || {
        vec![
            ("title", "Another night"),
            ("id", "another-night"),
            ("starts_at", "2030-07-01 20:00"),
            ("doors_at", ""),
            ("venue", ""),
        ]
    };
    let tier_base = || {
        vec![
            ("name", "Balcony"),
            ("price", "20"),
            ("capacity", "50"),
            ("max_per_order", "4"),
        ]
    };
    let long_title: &'static str = Box::leak(long.clone().into_boxed_str());
    let cases: Vec<Case> = vec![
        (
            event.into(),
            with(event_base(), "title", " "),
            StatusCode::BAD_REQUEST,
            "The title is needed",
        ),
        (
            event.into(),
            with(event_base(), "title", long_title),
            StatusCode::BAD_REQUEST,
            "The title is at most 200 characters",
        ),
        (
            event.into(),
            with(event_base(), "starts_at", "next friday"),
            StatusCode::BAD_REQUEST,
            "is not a date and time like 2027-03-20 19:30",
        ),
        (
            event.into(),
            with(event_base(), "starts_at", "2030-02-30 20:00"),
            StatusCode::BAD_REQUEST,
            "is not a date and time",
        ),
        (
            event.into(),
            with(event_base(), "doors_at", "21:00"),
            StatusCode::BAD_REQUEST,
            "The doors open before the event starts",
        ),
        (
            event.into(),
            with(event_base(), "id", "Not A Slug!"),
            StatusCode::BAD_REQUEST,
            "lower-case letters, digits and hyphens",
        ),
        (
            event.into(),
            with(event_base(), "id", EVENT),
            StatusCode::CONFLICT,
            "belongs to something the shop has",
        ),
        (
            tiers.clone(),
            with(tier_base(), "price", "-5"),
            StatusCode::BAD_REQUEST,
            "an amount is zero or more",
        ),
        (
            tiers.clone(),
            with(tier_base(), "price", "12.345"),
            StatusCode::BAD_REQUEST,
            "is not an amount like 35 or 35.50",
        ),
        (
            tiers.clone(),
            with(tier_base(), "capacity", "lots"),
            StatusCode::BAD_REQUEST,
            "The capacity must be a whole number",
        ),
        (
            tiers.clone(),
            with(tier_base(), "capacity", "-1"),
            StatusCode::BAD_REQUEST,
            "The capacity is 0 to 1000000",
        ),
        (
            tiers.clone(),
            with(tier_base(), "max_per_order", "0"),
            StatusCode::BAD_REQUEST,
            "The most per order is 1 to 100",
        ),
        (
            tiers.clone(),
            with(tier_base(), "name", long_title),
            StatusCode::BAD_REQUEST,
            "The name is at most 200 characters",
        ),
        (
            tiers.clone(),
            with(
                with(tier_base(), "sale_opens_at", "2030-01-02 10:00"),
                "sale_closes_at",
                "2030-01-01 10:00",
            ),
            StatusCode::BAD_REQUEST,
            "The sale closes after it opens",
        ),
        (
            tiers.clone(),
            with(tier_base(), "name", "General"),
            StatusCode::CONFLICT,
            "belongs to something the shop has",
        ),
        (
            general.clone(),
            with(tier_base(), "capacity", "1e3"),
            StatusCode::BAD_REQUEST,
            "whole number",
        ),
        (
            "/admin/catalogue/stock".into(),
            vec![
                ("name", "Jam"),
                ("shelf", ""),
                ("price", "3"),
                ("capacity", "3"),
                ("max_per_order", "3"),
            ],
            StatusCode::BAD_REQUEST,
            "The shelf is needed",
        ),
        (
            "/admin/catalogue/schedules".into(),
            vec![
                ("title", "Pickup"),
                ("name", "Box"),
                ("price", "3"),
                ("capacity", "3"),
                ("max_per_order", "3"),
                ("opens", "10:00"),
                ("closes", "09:00"),
                ("slot_minutes", "30"),
                ("days_ahead", "3"),
            ],
            StatusCode::BAD_REQUEST,
            "Tick at least one weekday",
        ),
        (
            "/admin/catalogue/schedules".into(),
            vec![
                ("title", "Pickup"),
                ("name", "Box"),
                ("price", "3"),
                ("capacity", "3"),
                ("max_per_order", "3"),
                ("weekday", "1"),
                ("opens", "8 o'clock"),
                ("closes", "09:00"),
                ("slot_minutes", "30"),
                ("days_ahead", "3"),
            ],
            StatusCode::BAD_REQUEST,
            "The opening time is a time like 08:00",
        ),
        (
            "/admin/catalogue/schedules".into(),
            vec![
                ("title", "Pickup"),
                ("name", "Box"),
                ("price", "3"),
                ("capacity", "3"),
                ("max_per_order", "3"),
                ("weekday", "1"),
                ("opens", "08:00"),
                ("closes", "09:00"),
                ("slot_minutes", "30"),
                ("days_ahead", "3"),
                ("closed_days", "Christmas"),
            ],
            StatusCode::BAD_REQUEST,
            "is not a date like 2026-12-25",
        ),
    ];
    let before = everything(&app.db.pool).await;
    for (path, fields, status, message) in &cases {
        let answer = post(&app, &staff, path, &csrf, fields).await;
        assert_eq!(answer.status(), *status, "POST {path} {fields:?}");
        let page = answer.text().await.unwrap();
        assert!(
            page.contains(message),
            "POST {path} {fields:?} says {message:?}: {page}"
        );
        assert!(page.contains("Nothing was saved"), "{page}");
        assert!(
            page.contains("aria-invalid=\"true\"")
                || page.contains("aria-describedby=\"f-weekdays-error\""),
            "{page}"
        );
    }
    // unknown ids in a path
    for path in [
        "/admin/catalogue/events/no-such-event",
        "/admin/catalogue/events/no-such-event/tiers/new",
        &format!("/admin/catalogue/events/{EVENT}/tiers/no-such-tier"),
        "/admin/catalogue/schedules/no-such-schedule",
        "/admin/catalogue/stock/no-such-item",
        &format!("/admin/catalogue/stock/{GENERAL}"),
    ] {
        let answer = staff
            .get(format!("{}{path}", app.address))
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), StatusCode::NOT_FOUND, "GET {path}");
    }
    for path in [
        "/admin/catalogue/events/no-such-event".to_owned(),
        "/admin/catalogue/events/no-such-event/tiers".to_owned(),
        format!("/admin/catalogue/events/{EVENT}/tiers/no-such-tier"),
        "/admin/catalogue/stock/no-such-item".to_owned(),
        "/admin/catalogue/schedules/no-such-schedule".to_owned(),
        "/admin/catalogue/products/no-such-product/archive".to_owned(),
        "/admin/catalogue/collections/no-such-collection/archive".to_owned(),
        "/admin/vouchers/NO-SUCH-CODE/archive".to_owned(),
    ] {
        let answer = post(&app, &staff, &path, &csrf, &tier_base()).await;
        assert_eq!(answer.status(), StatusCode::NOT_FOUND, "POST {path}");
        let page = answer.text().await.unwrap();
        assert!(page.contains("No such"), "{page}");
    }
    // a form without the session's CSRF token, or with a forged one
    let good = event_base();
    let missing = app.admin_post(&staff, event, &good).await;
    assert_eq!(missing.status(), StatusCode::FORBIDDEN);
    assert!(
        missing
            .text()
            .await
            .unwrap()
            .contains("This form has expired")
    );
    let forged = post(&app, &staff, event, &"0".repeat(64), &good).await;
    assert_eq!(forged.status(), StatusCode::FORBIDDEN);
    // a field far larger than any form of ours
    let huge = "y".repeat(20_000);
    let oversized = post(&app, &staff, &general, &csrf, &[("name", &huge)]).await;
    assert!(
        oversized.status().is_client_error(),
        "{}",
        oversized.status()
    );
    assert_eq!(
        everything(&app.db.pool).await,
        before,
        "bad input changed something"
    );
}

#[tokio::test]
async fn a_box_office_account_makes_vouchers_and_cannot_reach_the_catalogue() {
    let app = spawn_app().await;
    let (owner, owner_csrf) = owner_with_event(&app).await;
    // a hidden tier for a presale code to unlock
    let mut presale = tier_fields("Presale", "30", "20");
    presale.push(("hidden", "on"));
    saved(
        &app,
        &owner,
        &format!("/admin/catalogue/events/{EVENT}/tiers"),
        &owner_csrf,
        &presale,
    )
    .await;
    let box_office = "bo@holdfast.test";
    app.add_staff_as(box_office, Role::BoxOffice).await;
    let (staff, csrf) = app.signed_in(box_office, PASSWORD).await;

    // the catalogue is not for the box office
    let before = everything(&app.db.pool).await;
    for path in [
        "/admin/catalogue",
        "/admin/catalogue/events/new",
        &format!("/admin/catalogue/events/{EVENT}"),
    ] {
        let answer = staff
            .get(format!("{}{path}", app.address))
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), StatusCode::FORBIDDEN, "GET {path}");
    }
    let answer = post(
        &app,
        &staff,
        &format!("/admin/catalogue/events/{EVENT}/tiers/{GENERAL}"),
        &csrf,
        &tier_fields("General", "1", "100"),
    )
    .await;
    assert_eq!(answer.status(), StatusCode::FORBIDDEN);
    assert!(answer.text().await.unwrap().contains("Not for your role"));
    assert_eq!(
        changed_but_activity(&before, &everything(&app.db.pool).await),
        Vec::<String>::new()
    );
    assert_eq!(price_of(&app, GENERAL).await, 3500);

    // its pages show the Vouchers link, not the Catalogue's
    let list = app.admin_page(&staff, "/admin/vouchers").await;
    assert!(list.contains("href=\"/admin/vouchers\""), "{list}");
    assert!(!list.contains("href=\"/admin/catalogue\""), "{list}");
    let form = app.admin_page(&staff, "/admin/vouchers/new").await;
    assert!(
        form.contains("Presale"),
        "the hidden tier can be unlocked: {form}"
    );

    // bad vouchers are refused, naming the field
    let base = || {
        vec![
            ("code", "fans-10"),
            ("discount", "percent"),
            ("percent", "10"),
            ("amount", ""),
            ("uses", "10"),
            ("valid_from", ""),
            ("valid_until", ""),
        ]
    };
    let with = |name: &'static str, value: &'static str| {
        let mut fields: Vec<(&str, &str)> =
            base().into_iter().filter(|(n, _)| *n != name).collect();
        fields.push((name, value));
        fields
    };
    let before = everything(&app.db.pool).await;
    let mut unlock_open = base();
    unlock_open.push(("unlocks", GENERAL));
    let mut unknown = base();
    unknown.push(("products", "no-such-product"));
    for (fields, status, message) in [
        (
            with("code", "x"),
            StatusCode::BAD_REQUEST,
            "The code is 3 to 40 letters",
        ),
        (
            with("code", "has space"),
            StatusCode::BAD_REQUEST,
            "The code is 3 to 40 letters",
        ),
        (
            with("percent", "150"),
            StatusCode::BAD_REQUEST,
            "The percentage off is 1 to 100",
        ),
        (
            with("uses", "0"),
            StatusCode::BAD_REQUEST,
            "The number of uses is 1 to 1000000",
        ),
        (
            with("uses", "many"),
            StatusCode::BAD_REQUEST,
            "must be a whole number",
        ),
        (
            with("discount", "per_unit"),
            StatusCode::BAD_REQUEST,
            "The amount off",
        ),
        (
            with("discount", "none"),
            StatusCode::BAD_REQUEST,
            "an access code: choose the hidden product",
        ),
        (
            with("discount", "free"),
            StatusCode::BAD_REQUEST,
            "Choose what the voucher takes off",
        ),
        (
            with("valid_from", "someday"),
            StatusCode::BAD_REQUEST,
            "Valid from",
        ),
        (unlock_open, StatusCode::BAD_REQUEST, "is not hidden"),
        (
            unknown,
            StatusCode::BAD_REQUEST,
            "The shop does not sell no-such-product",
        ),
    ] {
        let answer = post(&app, &staff, "/admin/vouchers", &csrf, &fields).await;
        assert_eq!(answer.status(), status, "{fields:?}");
        let page = answer.text().await.unwrap();
        assert!(
            page.contains(message),
            "{fields:?} says {message:?}: {page}"
        );
    }
    assert_eq!(
        everything(&app.db.pool).await,
        before,
        "bad vouchers changed something"
    );

    // a percentage for the General tier, and an access code for the presale
    let mut fans = base();
    fans.push(("products", GENERAL));
    fans.push(("per_buyer", "on"));
    assert_eq!(
        saved(&app, &staff, "/admin/vouchers", &csrf, &fans).await,
        "/admin/vouchers?notice=voucher_created"
    );
    let presale_code = vec![
        ("code", "PRESALE"),
        ("discount", "none"),
        ("uses", "5"),
        ("unlocks", "harbour-nights-presale"),
        ("valid_until", "2030-06-01 00:00"),
    ];
    saved(&app, &staff, "/admin/vouchers", &csrf, &presale_code).await;
    let again = post(&app, &staff, "/admin/vouchers", &csrf, &fans).await;
    assert_eq!(again.status(), StatusCode::CONFLICT);
    assert!(
        again
            .text()
            .await
            .unwrap()
            .contains("A voucher FANS-10 exists already")
    );
    let voucher = holdfast::vouchers::find(
        &app.db.pool,
        &holdfast::vouchers::VoucherCode::parse("FANS-10").unwrap(),
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(
        voucher.discount,
        holdfast::vouchers::Discount::Percent { percent: 10 }
    );
    assert_eq!(voucher.products, Some(vec![GENERAL.to_owned()]));
    assert!(voucher.per_buyer);
    assert_eq!((voucher.uses, voucher.held, voucher.used), (10, 0, 0));
    assert_eq!(voucher.created_by, box_office);

    // the list shows its uses: used, held, left
    let list = app.admin_page(&staff, "/admin/vouchers").await;
    assert!(list.contains("data-voucher=\"FANS-10\""), "{list}");
    assert!(list.contains("<td class=\"num left\">10</td>"), "{list}");
    assert!(list.contains("unlocks harbour-nights-presale"), "{list}");

    // archived: no longer in use
    let to = saved(&app, &staff, "/admin/vouchers/FANS-10/archive", &csrf, &[]).await;
    assert_eq!(to, "/admin/vouchers?notice=voucher_archived");
    let list = app.admin_page(&staff, &to).await;
    assert!(list.contains("archived"), "{list}");
    assert!(list.contains("Yes, restore FANS-10"), "{list}");
    let code = holdfast::vouchers::VoucherCode::parse("FANS-10").unwrap();
    let archived = holdfast::vouchers::find(&app.db.pool, &code)
        .await
        .unwrap()
        .unwrap();
    assert!(archived.archived);
    // and back: in use again, its uses as they were
    let to = saved(&app, &staff, "/admin/vouchers/FANS-10/restore", &csrf, &[]).await;
    assert_eq!(to, "/admin/vouchers?notice=voucher_restored");
    let restored = holdfast::vouchers::find(&app.db.pool, &code)
        .await
        .unwrap()
        .unwrap();
    assert!(!restored.archived);
    assert_eq!((restored.uses, restored.held, restored.used), (10, 0, 0));
    let again = post(&app, &staff, "/admin/vouchers/FANS-10/restore", &csrf, &[]).await;
    assert_eq!(again.status(), StatusCode::NOT_FOUND);

    // Activity (the owner's page) names the box office for each
    let activity = app.admin_page(&owner, "/admin/activity").await;
    for action in ["create_voucher", "archive_voucher", "restore_voucher"] {
        let who: Vec<String> = sqlx::query_scalar(
            "select s.email from staff_actions a join staff s on s.id = a.staff_id \
              where a.action = $1",
        )
        .bind(action)
        .fetch_all(&app.db.pool)
        .await
        .unwrap();
        assert!(
            who.iter().all(|w| w == box_office) && !who.is_empty(),
            "{action}: {who:?}"
        );
        assert!(activity.contains(action), "{activity}");
    }
    assert!(activity.contains(box_office), "{activity}");
}
