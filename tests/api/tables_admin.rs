//! The host stand's day of a dining room (issue 36, part 4): the day's
//! bookings by time with party, guest and table; seated redeems the
//! booking code once (twenty taps at once seat the party once); a no-show
//! is recorded and cannot then be seated; a booking moves only to a free
//! table that seats its party; the room's set-up is shown and changed as a
//! whole, a set-up that does not hold together refused beside the field
//! with nothing stored.

use futures::future::join_all;
use holdfast_testkit::*;

use crate::tables::{ROOM, day, paid_booking, room, set_up, table, tables_of};

async fn hold_of(app: &TestApp, order: uuid::Uuid) -> String {
    sqlx::query_scalar::<_, uuid::Uuid>("select hold_id from bookings where order_id = $1")
        .bind(order)
        .fetch_one(&app.db.pool)
        .await
        .unwrap()
        .to_string()
}

async fn count(app: &TestApp, sql: &str) -> i64 {
    sqlx::query_scalar(sql)
        .fetch_one(&app.db.pool)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_host_stand_seats_marks_a_no_show_and_moves_a_booking_to_a_free_table_that_fits() {
    let app = spawn_app().await;
    app.add_staff().await;
    let mut spec = room(
        40,
        vec![
            table("T1", 1, 4, 100),
            table("T2", 1, 4, 110),
            table("T3", 1, 4, 120),
            table("T8", 5, 8, 100),
        ],
        vec![],
    );
    spec.periods[0].deposit_minor = 1000;
    set_up(&app.db, &spec).await;
    let four = paid_booking(&app.db, "four", 4, 19, 30).await;
    let two = paid_booking(&app.db, "two", 2, 19, 30).await;
    let six = paid_booking(&app.db, "six", 6, 20, 0).await;
    assert_eq!(tables_of(&app.db, two.id).await, ["T2"]);
    let (staff, csrf) = app.staff_browser().await;
    let date = day().format("%Y-%m-%d").to_string();
    let day_path = format!("/admin/dining/{ROOM}?date={date}");
    let page = app.admin_page(&staff, &day_path).await;
    assert!(page.contains("3 bookings, 12 guests"), "{page}");
    assert!(
        page.contains("19:30–21:30") && page.contains("20:00–22:30"),
        "{page}"
    );
    // the two may move to T3 (free, seats two), never to T1 or T8
    let row = page
        .split(&format!("data-booking=\"{}\"", two.number))
        .nth(1)
        .unwrap();
    let row = &row[..row.find("</tr>").unwrap()];
    assert!(row.contains("<option>T3</option>"), "{row}");
    assert!(!row.contains("<option>T1</option>") && !row.contains("<option>T8</option>"));
    let post = |path: &'static str, hold: String, to: &'static str| {
        let (staff, csrf, date) = (staff.clone(), csrf.clone(), date.clone());
        let app = &app;
        async move {
            app.admin_post(
                &staff,
                &format!("/admin/dining/{ROOM}/{path}"),
                &[
                    ("csrf", csrf.as_str()),
                    ("hold", hold.as_str()),
                    ("date", date.as_str()),
                    ("to", to),
                ],
            )
            .await
        }
    };
    let said = |response: &reqwest::Response| {
        location(response)
            .split("said=")
            .nth(1)
            .unwrap_or_default()
            .to_owned()
    };
    // twenty taps on "seated" at once: one redemption, the rest told
    let hold_four = hold_of(&app, four.id).await;
    let taps = join_all((0..20).map(|_| post("seat", hold_four.clone(), ""))).await;
    let seated: Vec<String> = taps.iter().map(said).collect();
    assert_eq!(seated.iter().filter(|s| *s == "seated").count(), 1);
    assert_eq!(seated.iter().filter(|s| *s == "seated_before").count(), 19);
    assert_eq!(count(&app, "select count(*) from redemptions").await, 1);
    // the six did not come: recorded once, and then cannot be seated
    let hold_six = hold_of(&app, six.id).await;
    assert_eq!(
        said(&post("no-show", hold_six.clone(), "").await),
        "no_show"
    );
    assert_eq!(
        said(&post("no-show", hold_six.clone(), "").await),
        "not_standing"
    );
    assert_eq!(said(&post("seat", hold_six, "").await), "not_standing");
    assert_eq!(count(&app, "select count(*) from redemptions").await, 1);
    let no_show_by: String =
        sqlx::query_scalar("select no_show_by from bookings where order_id = $1")
            .bind(six.id)
            .fetch_one(&app.db.pool)
            .await
            .unwrap();
    assert_eq!(no_show_by, STAFF_EMAIL);
    // a seated party cannot be a no-show
    assert_eq!(
        said(&post("no-show", hold_of(&app, four.id).await, "").await),
        "not_standing"
    );
    // moves: T1 is taken, T8 does not seat two, T3 does
    let hold_two = hold_of(&app, two.id).await;
    assert_eq!(
        said(&post("move", hold_two.clone(), "T1").await),
        "not_free"
    );
    assert_eq!(
        said(&post("move", hold_two.clone(), "T8").await),
        "does_not_fit"
    );
    assert_eq!(
        said(&post("move", hold_two.clone(), "T9").await),
        "does_not_fit"
    );
    assert_eq!(tables_of(&app.db, two.id).await, ["T2"]);
    assert_eq!(said(&post("move", hold_two, "T3").await), "moved");
    assert_eq!(tables_of(&app.db, two.id).await, ["T3"]);
    let page = app.admin_page(&staff, &day_path).await;
    for state in ["seated", "no-show", "booked"] {
        assert!(
            page.contains(&format!(
                "<td class=\"state\" data-label=\"State\">{state}</td>"
            )),
            "{page}"
        );
    }
    // without the session's token, nothing
    let forged = app
        .admin_post(
            &staff,
            &format!("/admin/dining/{ROOM}/move"),
            &[
                ("hold", &hold_of(&app, two.id).await),
                ("date", &date),
                ("to", "T2"),
            ],
        )
        .await;
    assert_eq!(forged.status(), 403);
    assert_eq!(tables_of(&app.db, two.id).await, ["T3"]);
    engine::assert_no_drift(&app.db.inventory()).await;
}

/// A room's set-up as its page's fields send it, in the page's order.
fn room_fields(spec: &holdfast::catalogue::tables::RoomSpec) -> Vec<(String, String)> {
    let mut fields: Vec<(String, String)> = Vec::new();
    let mut put = |name: &str, value: String| fields.push((name.to_owned(), value));
    put("name", spec.name.clone());
    put("description", spec.description.clone());
    put("interval", spec.interval_minutes.to_string());
    put("pacing", spec.pacing.to_string());
    put("largest_party", spec.largest_party.to_string());
    put("days_ahead", spec.days_ahead.to_string());
    put("book_until", spec.book_until_minutes.to_string());
    put("least_fill", spec.least_fill.to_string());
    put("opens_at", String::new());
    for t in &spec.tables {
        put("table_id", t.id.clone());
        put("table_min", t.min_party.to_string());
        put("table_max", t.max_party.to_string());
        put("table_area", t.area.clone());
        put("table_offered", t.priority.to_string());
    }
    for j in &spec.joins {
        put("join_tables", j.tables.join(" + "));
        put("join_min", j.min_party.to_string());
        put("join_max", j.max_party.to_string());
        put("join_offered", j.priority.to_string());
    }
    for p in &spec.periods {
        put("period_name", p.name.clone());
        for d in &p.weekdays {
            put("period_day", d.to_string());
        }
        put("period_opens", p.opens.format("%H:%M").to_string());
        put("period_last", p.last_seating.format("%H:%M").to_string());
        put(
            "period_deposit",
            format!("{}.{:02}", p.deposit_minor / 100, p.deposit_minor % 100),
        );
        put("period_deposit_from", p.deposit_from_party.to_string());
        put("period_cancel_hours", p.cancel_hours.to_string());
    }
    for t in &spec.turns {
        put("turn_up_to", t.up_to_party.to_string());
        put("turn_minutes", t.minutes.to_string());
    }
    for d in &spec.closed_days {
        put("closed_day", d.to_string());
    }
    // the page's spare lines, sent empty
    for name in ["table_id", "table_min", "table_max", "table_area"] {
        put(name, String::new());
    }
    put("table_offered", "100".into());
    put("closed_day", String::new());
    fields
}

/// The set-up's fields, and a change to them.
type SentFields = Vec<(String, String)>;
type Change = Box<dyn Fn(&mut SentFields)>;

#[tokio::test]
async fn the_set_ups_lines_are_taken_out_and_refused_by_the_line_the_page_shows() {
    let app = spawn_app().await;
    app.add_staff().await;
    set_up(
        &app.db,
        &room(
            10,
            vec![table("T1", 1, 4, 100), table("T2", 1, 4, 100)],
            vec![],
        ),
    )
    .await;
    let (staff, csrf) = app.staff_browser().await;
    let setup = format!("/admin/dining/{ROOM}/setup");
    let spec = holdfast::catalogue::tables::read_room(&app.db.pool, ROOM)
        .await
        .unwrap()
        .unwrap();
    let post = |fields: Vec<(String, String)>| {
        let (staff, csrf, setup) = (staff.clone(), csrf.clone(), setup.clone());
        let app = &app;
        async move {
            let mut sent = vec![("csrf".to_owned(), csrf)];
            sent.extend(fields);
            let sent: Vec<(&str, &str)> =
                sent.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
            app.admin_post(&staff, &setup, &sent).await
        }
    };
    let stored = || async {
        holdfast::catalogue::tables::read_room(&app.db.pool, ROOM)
            .await
            .unwrap()
            .unwrap()
    };
    let with = |change: &dyn Fn(&mut SentFields)| {
        let mut fields = room_fields(&spec);
        change(&mut fields);
        fields
    };
    // refused, each naming the line as the page numbers it, nothing stored
    for (change, words) in [
        (
            // T2's line renamed T1: the same table twice
            Box::new(|f: &mut SentFields| {
                let t2 = f
                    .iter()
                    .position(|(n, v)| n == "table_id" && v == "T2")
                    .unwrap();
                f[t2].1 = "T1".into();
            }) as Change,
            "Table line 2: table T1 is line 1 too",
        ),
        (
            Box::new(|f: &mut SentFields| {
                for (n, v) in f.iter_mut() {
                    if n == "turn_minutes" {
                        *v = "100".into();
                    }
                }
            }),
            "Party size line 1: the minutes are quarter hours",
        ),
        (
            // a line's first field missing: its fields would join T1's
            Box::new(|f: &mut SentFields| {
                let t2 = f
                    .iter()
                    .position(|(n, v)| n == "table_id" && v == "T2")
                    .unwrap();
                f.remove(t2);
            }),
            "did not arrive whole",
        ),
        (
            Box::new(|f: &mut SentFields| {
                for (n, v) in f.iter_mut() {
                    if n == "table_id" && v == "T2" {
                        *v = "T2 <b>".into();
                    }
                }
            }),
            "Table line 2: ",
        ),
    ] {
        let refused = post(with(&*change)).await;
        assert!(refused.status().is_client_error(), "{words}");
        let text = refused.text().await.unwrap();
        assert!(text.contains(words), "{words}: {text}");
        assert!(!text.contains("<b>"), "escaped");
        assert_eq!(stored().await, spec, "{words}");
    }
    // T1 ticked out, "Dinner" typed for dinner: T1 archived, the service kept
    let saved = post(with(&|f| {
        let t1 = f
            .iter()
            .position(|(n, v)| n == "table_id" && v == "T1")
            .unwrap();
        f.insert(t1 + 5, ("table_out".into(), "on".into()));
        for (n, v) in f.iter_mut() {
            if n == "period_name" {
                *v = "Dinner".into();
            }
        }
    }))
    .await;
    assert_eq!(saved.status(), 303);
    let after = stored().await;
    let tables: Vec<&str> = after.tables.iter().map(|t| t.id.as_str()).collect();
    assert_eq!(tables, ["T2"]);
    assert_eq!(after.periods, spec.periods);
    // the only service taken out while its times are published: refused
    let refused = post(with(&|f| {
        let p = f
            .iter()
            .position(|(n, _)| n == "period_cancel_hours")
            .unwrap();
        f.insert(p + 1, ("period_out".into(), "on".into()));
        f.push(("period_name".into(), "late".into()));
        f.push(("period_day".into(), "1".into()));
        f.push(("period_opens".into(), "22:00".into()));
        f.push(("period_last".into(), "22:30".into()));
    }))
    .await;
    assert_eq!(refused.status(), 409);
    let text = refused.text().await.unwrap();
    assert!(text.contains("dinner has times published"), "{text}");
    assert_eq!(stored().await.periods, spec.periods);
    // each save is an Activity line
    let saves: i64 =
        sqlx::query_scalar("select count(*) from staff_actions where action = 'save_dining_room'")
            .fetch_one(&app.db.pool)
            .await
            .unwrap();
    assert_eq!(saves, 1);
}

#[tokio::test]
async fn the_rooms_set_up_is_changed_whole_and_a_set_up_that_does_not_hold_is_refused() {
    let app = spawn_app().await;
    app.add_staff().await;
    set_up(&app.db, &room(10, vec![table("T1", 1, 4, 100)], vec![])).await;
    let (staff, csrf) = app.staff_browser().await;
    let setup = format!("/admin/dining/{ROOM}/setup");
    let page = app.admin_page(&staff, &setup).await;
    assert!(page.contains("name=\"pacing\" value=\"10\""), "{page}");
    assert!(page.contains("name=\"table_id\" value=\"T1\""), "{page}");
    assert!(!page.contains("<textarea id=\"f-room\""), "no JSON to type");
    let save = |spec: holdfast::catalogue::tables::RoomSpec,
                change: fn(&mut Vec<(String, String)>)| {
        let (staff, csrf, setup) = (staff.clone(), csrf.clone(), setup.clone());
        let app = &app;
        async move {
            let mut fields = vec![("csrf".to_owned(), csrf)];
            fields.extend(room_fields(&spec));
            change(&mut fields);
            let fields: Vec<(&str, &str)> = fields
                .iter()
                .map(|(n, v)| (n.as_str(), v.as_str()))
                .collect();
            app.admin_post(&staff, &setup, &fields).await
        }
    };
    let mut spec = holdfast::catalogue::tables::read_room(&app.db.pool, ROOM)
        .await
        .unwrap()
        .unwrap();
    // a join of a table the room lacks: said beside the field, kept, nothing stored
    let mut bad = spec.clone();
    bad.joins.push(holdfast::catalogue::tables::JoinSpec {
        id: "T1+T9".into(),
        tables: vec!["T1".into(), "T9".into()],
        min_party: 5,
        max_party: 8,
        priority: 100,
    });
    bad.pacing = 99;
    let refused = save(bad.clone(), |_| {}).await;
    assert_eq!(refused.status(), 400);
    let text = refused.text().await.unwrap();
    assert!(text.contains("Join T1+T9: no table T9"), "{text}");
    assert!(
        text.contains("name=\"join_tables\" value=\"T1 + T9\""),
        "kept: {text}"
    );
    // a service's time that is no time: beside the services, kept
    let refused = save(spec.clone(), |fields| {
        for (name, value) in fields.iter_mut() {
            if name == "period_opens" {
                *value = "noonish".into();
            }
        }
    })
    .await;
    assert_eq!(refused.status(), 400);
    let text = refused.text().await.unwrap();
    assert!(
        text.contains("id=\"f-periods-error\">Service line 1: "),
        "{text}"
    );
    assert!(text.contains("is a time like 18:00"), "{text}");
    // a pacing that is no number: beside its field, kept
    let refused = save(spec.clone(), |fields| {
        fields.push(("pacing".into(), "many".into()));
        fields.retain(|(n, v)| n != "pacing" || v == "many");
    })
    .await;
    assert_eq!(refused.status(), 400);
    assert!(
        refused
            .text()
            .await
            .unwrap()
            .contains("id=\"f-pacing-error\"")
    );
    let stored = holdfast::catalogue::tables::read_room(&app.db.pool, ROOM)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored, spec);
    // a second table, joinable with the first, and more covers a quarter hour
    spec.tables.push(table("T2", 1, 4, 100));
    spec.joins.push(holdfast::catalogue::tables::JoinSpec {
        id: "T1+T2".into(),
        tables: vec!["T1".into(), "T2".into()],
        min_party: 5,
        max_party: 8,
        priority: 100,
    });
    spec.pacing = 16;
    let saved = save(spec.clone(), |_| {}).await;
    assert_eq!(saved.status(), 303);
    assert!(location(&saved).ends_with("notice=room_saved"));
    let stored = holdfast::catalogue::tables::read_room(&app.db.pool, ROOM)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored, spec);
    // the day is closed: its 19 unbooked times leave the shop, one booked
    // time stays for staff to settle
    crate::tables::book(&app.db, "kept", 2, 19, 30)
        .await
        .unwrap();
    spec.closed_days = vec![day()];
    let saved = save(spec.clone(), |_| {}).await;
    assert_eq!(saved.status(), 303);
    let active: Vec<(String, bool)> = sqlx::query_as(
        "select t.product_id, p.active from dining_times t join products p on p.id = t.product_id \
          order by t.starts_at",
    )
    .fetch_all(&app.db.pool)
    .await
    .unwrap();
    assert_eq!(active.len(), 19);
    let left: Vec<&str> = active
        .iter()
        .filter(|(_, a)| *a)
        .map(|(p, _)| p.as_str())
        .collect();
    assert_eq!(left, [crate::tables::time_id(19, 30)]);
    assert_eq!(
        holdfast::catalogue::tables::read_room(&app.db.pool, ROOM)
            .await
            .unwrap()
            .unwrap()
            .closed_days,
        [day()]
    );
    // and nothing is published for it again
    let made = holdfast::catalogue::tables::times::publish_day(
        &app.db.pool,
        holdfast::clock::ShopZone::UTC,
        ROOM,
        day(),
    )
    .await
    .unwrap();
    assert_eq!(made, 0);
}

#[tokio::test]
async fn the_host_stand_is_in_the_menu_and_its_day_counts_what_still_stands() {
    let app = spawn_app().await;
    app.add_staff().await;
    let (staff, _) = app.staff_browser().await;
    // a shop without a dining room has no host stand in its menu
    let home = app.admin_page(&staff, "/admin").await;
    assert!(!home.contains("href=\"/admin/dining\""), "{home}");
    set_up(&app.db, &room(10, vec![table("T1", 1, 4, 100)], vec![])).await;
    app.settled().await;
    let home = app.admin_page(&staff, "/admin").await;
    assert!(
        home.contains("<a href=\"/admin/dining\">Host stand</a>"),
        "{home}"
    );
    // the menu's entry opens the shop's one room; the catalogue's card links
    // to it too (a room from the catalogue file has no schedule)
    let opened = staff
        .get(format!("{}/admin/dining", app.address))
        .send()
        .await
        .unwrap();
    assert_eq!(opened.status(), 303);
    assert_eq!(
        opened.headers()["location"],
        format!("/admin/dining/{ROOM}")
    );
    let catalogue = app.admin_page(&staff, "/admin/catalogue").await;
    assert!(
        catalogue.contains(&format!("<a href=\"/admin/dining/{ROOM}\">")),
        "{catalogue}"
    );
    assert!(
        !catalogue.contains("no schedule publishes them"),
        "{catalogue}"
    );
    // a guest books two and cancels: the day says no booking stands
    let guest = browser();
    app.add(&guest, &crate::tables::time_id(19, 30), 2).await;
    let answer = app.checkout(&guest).await;
    assert_eq!(answer.status(), 303);
    let token = answer.headers()["location"]
        .to_str()
        .unwrap()
        .trim_start_matches("/orders/")
        .to_owned();
    let date = day().format("%Y-%m-%d").to_string();
    let day_path = format!("/admin/dining/{ROOM}?date={date}");
    let page = app.admin_page(&staff, &day_path).await;
    assert!(
        page.contains(": 1 booking, 2 guests: 1 expected</h2>"),
        "{page}"
    );
    let cancelled = browser()
        .post(format!("{}/orders/{token}/cancel", app.address))
        .send()
        .await
        .unwrap();
    assert_eq!(cancelled.status(), 303);
    let page = app.admin_page(&staff, &day_path).await;
    assert!(page.contains(": no bookings; 1 cancelled</h2>"), "{page}");
    // the days either side, and back to today
    let before = (day() - chrono::Duration::days(1)).format("%Y-%m-%d");
    let after = (day() + chrono::Duration::days(1)).format("%Y-%m-%d");
    assert!(
        page.contains(&format!("?date={before}\" rel=\"prev\""))
            && page.contains(&format!("?date={after}\" rel=\"next\""))
            && page.contains(&format!("<a href=\"/admin/dining/{ROOM}\">Today</a>")),
        "{page}"
    );
    let today = app
        .admin_page(&staff, &format!("/admin/dining/{ROOM}"))
        .await;
    assert!(today.contains("Today, "), "{today}");
}
