//! The door admits only its own (issue 33): codes of three events and two
//! pickup days at three doors (one event, one tier of another, one day's
//! pickups), scanned by 24 door sessions at once. Each code is admitted
//! once, at its own door; every other door refuses it naming what it is
//! for; box office and owners may override, and the override is recorded;
//! the door counts what it admitted of what it expects.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use futures::future::join_all;
use reqwest::StatusCode;

use holdfast::catalogue::CatalogueFile;
use holdfast::staff::roles::Role;
use holdfast_testkit::engine::paid;
use holdfast_testkit::*;

/// Three events and a bakery's slots on two days.
fn catalogue() -> CatalogueFile {
    let event = |id: &str, title: &str, days: i64| {
        serde_json::json!({
            "id": id, "title": title, "days_ahead": days, "time": "19:30",
            "lasts_minutes": 180, "venue": "The Pier",
            "tiers": [
                { "id": format!("{id}-general"), "name": "General", "description": "",
                  "price_minor": 3500, "capacity": 100 },
                { "id": format!("{id}-vip"), "name": "VIP", "description": "",
                  "price_minor": 9000, "capacity": 20 }
            ]
        })
    };
    serde_json::from_value(serde_json::json!({
        "currency": "eur",
        "collections": [{ "id": "bakery", "kind": "schedule", "title": "Bakery pickup",
                          "lede": "", "position": 0 }],
        "events": [
            event("winter-jazz", "Winter Jazz", 17),
            event("harbour-lights", "Harbour Lights", 14),
            event("folk-night", "Folk Night", 20),
        ],
        "pickup_slots": {
            "collection": "bakery", "name": "Sourdough box", "description": "",
            "price_minor": 1800, "capacity": 50, "days_ahead": [1, 2], "times": ["12:00"]
        }
    }))
    .unwrap()
}

/// The outcome and words a door page shows.
pub(crate) fn verdict(page: &str) -> (String, String) {
    let marker = "data-outcome=\"";
    let start = page
        .find(marker)
        .unwrap_or_else(|| panic!("no verdict in {page}"))
        + marker.len();
    let outcome = page[start..start + page[start..].find('"').unwrap()].to_owned();
    let end = start + page[start..].find("</div>").unwrap();
    (outcome, page[start..end].to_owned())
}

/// The count a door page shows: (admitted, expected).
pub(crate) fn count(page: &str) -> (i64, i64) {
    let start = page.find("id=\"door-count\"").expect("a count");
    let numbers: Vec<i64> = page[start..]
        .split("<strong>")
        .skip(1)
        .take(2)
        .map(|part| part[..part.find('<').unwrap()].parse().unwrap())
        .collect();
    (numbers[0], numbers[1])
}

struct Setup {
    /// code → what it is for: (the door that admits it, if one does; the
    /// title and the time a refusal names, as "title|time")
    codes: Vec<(String, Option<usize>, String)>,
}

/// Paid orders: tickets of each event's tiers, pickups on both days.
async fn orders(app: &TestApp) -> Setup {
    let zone = holdfast::configuration::time_zone().unwrap();
    let slots: Vec<(String, DateTime<Utc>)> = sqlx::query_as(
        "select id, starts_at from products where collection = 'bakery' order by starts_at",
    )
    .fetch_all(&app.db.pool)
    .await
    .unwrap();
    assert_eq!(slots.len(), 2, "two pickup days");
    let mut n = 0;
    let mut order = |lines: Vec<(String, i64)>| {
        n += 1;
        let key = format!("door-{n:02}");
        async move {
            let lines: Vec<(&str, i64)> = lines.iter().map(|(p, q)| (p.as_str(), *q)).collect();
            paid(&app.db, &key, &lines).await
        }
    };
    for _ in 0..2 {
        order(vec![
            ("winter-jazz-general".into(), 2),
            ("winter-jazz-vip".into(), 1),
        ])
        .await;
        order(vec![("harbour-lights-vip".into(), 2)]).await;
        order(vec![("harbour-lights-general".into(), 1)]).await;
        order(vec![("folk-night-general".into(), 1)]).await;
        order(vec![(slots[0].0.clone(), 1)]).await;
        order(vec![(slots[0].0.clone(), 2)]).await;
        order(vec![(slots[1].0.clone(), 1)]).await;
    }
    #[derive(sqlx::FromRow)]
    struct Code {
        code: String,
        product_id: String,
        title: String,
        starts_at: DateTime<Utc>,
    }
    let rows: Vec<Code> = sqlx::query_as(
        "select c.code, c.product_id, co.title, p.starts_at from order_items c \
           join products p on p.id = c.product_id join collections co on co.id = p.collection \
          order by 1",
    )
    .fetch_all(&app.db.pool)
    .await
    .unwrap();
    let codes = rows
        .into_iter()
        .map(|row| {
            let door = match row.product_id.as_str() {
                id if id.starts_with("winter-jazz-") => Some(0),
                "harbour-lights-vip" => Some(1),
                id if id == slots[0].0 => Some(2),
                _ => None,
            };
            // its event's or schedule's title, and when
            let named = format!("{}|{}", row.title, zone.short(row.starts_at));
            (row.code, door, named)
        })
        .collect();
    Setup { codes }
}

/// One scan at a door: the status and the page.
pub(crate) async fn scan(
    app: &TestApp,
    staff: &reqwest::Client,
    csrf: &str,
    door: &[(&str, &str)],
    place: &str,
    code: &str,
    overrule: bool,
) -> (StatusCode, String) {
    let mut form: Vec<(&str, &str)> = vec![("csrf", csrf), ("code", code), ("place", place)];
    form.extend_from_slice(door);
    if overrule {
        form.push(("override", "1"));
    }
    let response = app.admin_post(staff, "/admin/redeem", &form).await;
    let status = response.status();
    (status, response.text().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn each_code_is_admitted_once_at_its_own_door_of_twenty_four() {
    let app = spawn_app().await;
    CatalogueFile::load(&catalogue(), &app.db.pool)
        .await
        .unwrap();
    app.add_staff().await;
    let Setup { codes } = orders(&app).await;
    let slot_day: String = sqlx::query_scalar(
        "select to_char(min(starts_at) at time zone $1, 'YYYY-MM-DD') from products \
          where collection = 'bakery'",
    )
    .bind(holdfast::configuration::time_zone().unwrap().name())
    .fetch_one(&app.db.pool)
    .await
    .unwrap();
    // three doors: an event, one tier of another, a day's pickups
    let doors: [Vec<(&str, &str)>; 3] = [
        vec![("event", "winter-jazz")],
        vec![("tier", "harbour-lights-vip")],
        vec![("day", slot_day.as_str())],
    ];
    let expected_at = |door: usize| codes.iter().filter(|c| c.1 == Some(door)).count() as i64;
    assert_eq!(
        (expected_at(0), expected_at(1), expected_at(2)),
        (6, 4, 4),
        "{codes:?}"
    );
    assert_eq!(codes.len(), 6 + 4 + 2 + 2 + 4 + 2);

    // choosing: the page offers the events and days, and each door counts
    let (owner, csrf) = app.staff_browser().await;
    let choose = app.admin_page(&owner, "/admin/redeem").await;
    for offered in [
        "event=winter-jazz",
        "event=folk-night",
        &format!("day={slot_day}"),
    ] {
        assert!(choose.contains(offered), "{offered}: {choose}");
    }
    for door in &doors {
        let query: String = door.iter().map(|(n, v)| format!("{n}={v}")).collect();
        let page = app
            .admin_page(&owner, &format!("/admin/redeem?{query}"))
            .await;
        assert_eq!(count(&page).0, 0, "{page}");
    }

    // 24 door sessions at once, eight at each door, each scanning every code
    let mut sessions = Vec::new();
    for _ in 0..6 {
        sessions.push(app.staff_browser().await);
    }
    let scans = (0..24).flat_map(|d| {
        let door = d % 3;
        let (staff, csrf) = &sessions[d % 6];
        let (app, doors) = (&app, &doors);
        codes.iter().map(move |(code, own, _)| async move {
            let place = format!("Door {d}");
            let (status, page) = scan(app, staff, csrf, &doors[door], &place, code, false).await;
            let (outcome, words) = verdict(&page);
            (code.clone(), door, *own, status, outcome, words)
        })
    });
    let answers = join_all(scans).await;
    assert_eq!(answers.len(), 24 * codes.len());
    let mut admitted: HashMap<&str, usize> = HashMap::new();
    let mut tally: HashMap<&str, usize> = HashMap::new();
    for (code, door, own, status, outcome, words) in &answers {
        *tally.entry(outcome.as_str()).or_default() += 1;
        let named = &codes.iter().find(|c| &c.0 == code).unwrap().2;
        if Some(*door) == *own {
            match outcome.as_str() {
                "admitted" | "collected" => {
                    assert_eq!(*status, StatusCode::OK);
                    *admitted.entry(code.as_str()).or_default() += 1;
                }
                "already_used" => assert_eq!(*status, StatusCode::CONFLICT),
                other => panic!("{code} at its own door: {other} {words}"),
            }
        } else {
            assert_eq!(outcome, "not_this_door", "{code} at door {door}: {words}");
            assert_eq!(*status, StatusCode::CONFLICT);
            let (title, when) = named.split_once('|').unwrap();
            assert!(
                words.contains(&format!("For {title}")) && words.contains(when),
                "names {named}: {words}"
            );
        }
    }
    let own: usize = codes.iter().filter(|c| c.1.is_some()).count();
    assert_eq!(own, 14);
    assert_eq!(admitted.len(), own, "every code with a door is admitted");
    assert!(
        admitted.values().all(|n| *n == 1),
        "exactly once: {admitted:?}"
    );
    assert_eq!(tally["already_used"], own * 7, "{tally:?}");
    assert_eq!(tally["not_this_door"], 24 * codes.len() - own * 8);
    let redeemed: i64 = sqlx::query_scalar("select count(*) from redemptions")
        .fetch_one(&app.db.pool)
        .await
        .unwrap();
    assert_eq!(redeemed, own as i64);
    let recorded: i64 =
        sqlx::query_scalar("select count(*) from staff_actions where action = 'redeem'")
            .fetch_one(&app.db.pool)
            .await
            .unwrap();
    assert_eq!(recorded, answers.len() as i64, "every scan in Activity");
    for (i, door) in doors.iter().enumerate() {
        let query: String = door.iter().map(|(n, v)| format!("{n}={v}")).collect();
        let page = app
            .admin_page(&owner, &format!("/admin/redeem?{query}"))
            .await;
        assert_eq!(count(&page), (expected_at(i), expected_at(i)), "door {i}");
    }

    // a code of no open door: the door role is refused an override, the
    // box office may, and it is recorded
    let folk = codes
        .iter()
        .find(|c| c.2.starts_with("Folk Night"))
        .unwrap()
        .0
        .clone();
    app.add_staff_as("door@holdfast.test", Role::Door).await;
    let (door_staff, door_csrf) = app.signed_in("door@holdfast.test", PASSWORD).await;
    let (status, page) = scan(
        &app,
        &door_staff,
        &door_csrf,
        &doors[0],
        "North",
        &folk,
        false,
    )
    .await;
    assert_eq!(
        (status, verdict(&page).0.as_str()),
        (StatusCode::CONFLICT, "not_this_door")
    );
    assert!(
        !page.contains("id=\"override\""),
        "the door role is not offered it"
    );
    let (status, _) = scan(
        &app,
        &door_staff,
        &door_csrf,
        &doors[0],
        "North",
        &folk,
        true,
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    app.add_staff_as("box@holdfast.test", Role::BoxOffice).await;
    let (box_office, box_csrf) = app.signed_in("box@holdfast.test", PASSWORD).await;
    let (_, page) = scan(
        &app,
        &box_office,
        &box_csrf,
        &doors[0],
        "North",
        &folk,
        false,
    )
    .await;
    assert!(page.contains("id=\"override\""), "{page}");
    let (status, page) = scan(
        &app,
        &box_office,
        &box_csrf,
        &doors[0],
        "North",
        &folk,
        true,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{page}");
    let (outcome, words) = verdict(&page);
    assert_eq!(outcome, "admitted");
    assert!(words.contains("override is recorded"), "{words}");
    let overridden: bool = sqlx::query_scalar("select overridden from redemptions where code = $1")
        .bind(&folk)
        .fetch_one(&app.db.pool)
        .await
        .unwrap();
    assert!(overridden);
    let (outcome, detail): (String, serde_json::Value) = sqlx::query_as(
        "select outcome, detail from staff_actions where action = 'redeem' and target = $1 \
          order by id desc limit 1",
    )
    .bind(&folk)
    .fetch_one(&app.db.pool)
    .await
    .unwrap();
    assert_eq!(outcome, "admitted");
    assert_eq!(detail["override"], true);
    assert!(
        detail["for"].as_str().unwrap().starts_with("Folk Night"),
        "{detail}"
    );
    assert!(
        detail["door"].as_str().unwrap().starts_with("Winter Jazz"),
        "{detail}"
    );
    let (status, page) = scan(
        &app,
        &box_office,
        &box_csrf,
        &doors[0],
        "North",
        &folk,
        true,
    )
    .await;
    assert_eq!(
        (status, verdict(&page).0.as_str()),
        (StatusCode::CONFLICT, "already_used"),
        "an override admits once too"
    );

    // refunded and unpaid codes are refused at their own door, naming what
    // they were for, and leave the count
    let (refunded, unpaid) = {
        let fresh = paid(&app.db, "door-late", &[("winter-jazz-vip", 2)]).await;
        let late: Vec<String> =
            sqlx::query_scalar("select code from order_items where order_id = $1 order by code")
                .bind(fresh.id)
                .fetch_all(&app.db.pool)
                .await
                .unwrap();
        (late[0].clone(), (late[1].clone(), fresh.id))
    };
    sqlx::query("update order_items set state = 'refunded', state_at = now() where code = $1")
        .bind(&refunded)
        .execute(&app.db.pool)
        .await
        .unwrap();
    let (status, page) = scan(&app, &owner, &csrf, &doors[0], "North", &refunded, false).await;
    let (outcome, words) = verdict(&page);
    assert_eq!(
        (status, outcome.as_str()),
        (StatusCode::CONFLICT, "refunded")
    );
    assert!(words.contains("Winter Jazz"), "{words}");
    // an order the shop no longer counts as paid (its state set by hand,
    // as a dispute lost would)
    sqlx::query("update orders set state = 'expired' where id = $1")
        .bind(unpaid.1)
        .execute(&app.db.pool)
        .await
        .unwrap();
    let (status, page) = scan(&app, &owner, &csrf, &doors[0], "North", &unpaid.0, false).await;
    let (outcome, words) = verdict(&page);
    assert_eq!(
        (status, outcome.as_str()),
        (StatusCode::CONFLICT, "not_paid")
    );
    assert!(
        words.contains("Winter Jazz") && words.contains("VIP"),
        "{words}"
    );
    assert_eq!(count(&page), (6, 6), "neither is expected any more");

    // a choice that names nothing is refused with words, and redeems nothing
    let response = app
        .admin_post(
            &owner,
            "/admin/redeem",
            &[("csrf", &csrf), ("code", &folk), ("day", "20 Dec")],
        )
        .await;
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    assert!(response.text().await.unwrap().contains("a date like"));
}
