//! The catalogue file and the commands for automation, run as the real
//! binary: `catalogue load` with events, tiers, schedules, sale windows and
//! vouchers in absolute times; `catalogue export` writes a file that loads
//! into the same catalogue; `voucher add` and `voucher list` make and show
//! the vouchers the admin makes, and refuse bad input changing nothing.

use std::process::Output;

use serde_json::Value;

use holdfast_testkit::*;

fn holdfast(db: &TestDb, args: &[&str]) -> Output {
    run_command(env!("CARGO_BIN_EXE_holdfast"), db, args)
}

/// A directory of the test's own.
fn scratch() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("holdfast-catalogue-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// A concert with two tiers (one hidden, sold only with an access code),
/// a bakery's weekly schedule with a holiday, a shelf, and two vouchers:
/// what an organiser would write for next spring.
const SPRING: &str = r#"{
  "currency": "eur",
  "collections": [
    { "id": "pantry", "kind": "shelf", "title": "Pantry", "lede": "Small batches." }
  ],
  "events": [
    {
      "id": "spring-concert",
      "title": "Spring concert",
      "lede": "Strings at the old harbour.",
      "starts_at": "2027-03-20T19:30:00+01:00",
      "doors_at": "2027-03-20T18:45:00+01:00",
      "venue": "Harbour hall",
      "tiers": [
        { "id": "spring-stalls", "name": "Stalls", "price_minor": 4500, "capacity": 300,
          "max_per_order": 6,
          "sale_opens_at": "2027-02-01T10:00:00+01:00",
          "sale_closes_at": "2027-03-20T18:00:00+01:00" },
        { "id": "spring-fans", "name": "Fans' presale", "price_minor": 4000, "capacity": 50,
          "hidden": true }
      ]
    }
  ],
  "schedules": [
    { "collection": "bread", "title": "Bread pickup", "lede": "Pick a slot.",
      "name": "Sourdough box", "price_minor": 1800, "currency": "eur", "capacity": 8,
      "weekdays": [2, 4, 6], "opens": "08:00:00", "closes": "12:00:00",
      "slot_minutes": 60, "days_ahead": 14, "closed_days": ["2027-04-06"] }
  ],
  "products": [
    { "id": "spring-honey", "collection": "pantry", "kind": "stock",
      "name": "Spring honey", "price_minor": 1200, "capacity": 40 }
  ],
  "vouchers": [
    { "code": "FANS-2027", "uses": 50, "unlocks": ["spring-fans"], "per_buyer": true },
    { "code": "EARLY", "percent_off": 15, "uses": 100, "products": ["spring-stalls"],
      "valid_until": "2027-02-15T00:00:00+01:00" }
  ]
}"#;

/// What the shop sells, as rows: everything but the times rows were
/// written at.
async fn catalogue_rows(db: &TestDb) -> Vec<String> {
    let mut rows = Vec::new();
    for query in [
        "select id || kind || title || lede || coalesce(starts_at::text, '') || \
                coalesce(doors_at::text, '') || venue from collections order by id",
        "select p.id || p.kind || p.name || p.description || p.price_minor || p.currency || \
                coalesce(p.starts_at::text, '') || p.max_per_order || \
                coalesce(p.sale_opens_at::text, '') || coalesce(p.sale_closes_at::text, '') || \
                p.hidden || p.active || r.total \
           from products p join resources r on r.id = p.resource_id order by p.id",
        "select v.code || coalesce(v.percent_off::text, '') || \
                coalesce(v.amount_off_minor::text, '') || v.per_unit || \
                coalesce(v.products::text, '') || v.unlocks::text || \
                coalesce(v.valid_from::text, '') || coalesce(v.valid_until::text, '') || \
                v.per_buyer || r.total \
           from vouchers v join resources r on r.id = v.resource_id order by v.code",
    ] {
        let found: Vec<String> = sqlx::query_scalar(query).fetch_all(&db.pool).await.unwrap();
        rows.extend(found);
    }
    rows
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exported_catalogue_loads_into_the_same_catalogue() {
    let dir = scratch();
    let spring = dir.join("spring.json");
    std::fs::write(&spring, SPRING).unwrap();
    let first = TestDb::new().await;
    let loaded = json_output(&holdfast(
        &first,
        &[
            "--json",
            "catalogue",
            "load",
            "--file",
            spring.to_str().unwrap(),
        ],
    ));
    assert_eq!(loaded["schedules"], 1);
    assert_eq!(loaded["vouchers_created"], 2);
    // the demo's catalogue too: fixed slots, days ahead
    first.load_demo().await;
    let rows = catalogue_rows(&first).await;
    assert!(rows.iter().any(|r| r.starts_with("spring-concert")));
    assert!(rows.iter().any(|r| r.starts_with("FANS-2027")));

    let exported = dir.join("exported.json");
    let said = json_output(&holdfast(
        &first,
        &[
            "--json",
            "catalogue",
            "export",
            "--file",
            exported.to_str().unwrap(),
        ],
    ));
    assert_eq!(
        (said["events"].as_i64(), said["vouchers"].as_i64()),
        (Some(3), Some(2))
    );
    let file: Value = serde_json::from_str(&std::fs::read_to_string(&exported).unwrap()).unwrap();
    // absolute times with the shop's offset, never "days ahead"
    for moment in file["events"]
        .as_array()
        .unwrap()
        .iter()
        .chain(file["products"].as_array().unwrap())
    {
        assert!(moment.get("days_ahead").is_none(), "{moment}");
    }
    assert!(
        file.to_string()
            .contains("\"starts_at\":\"2027-03-20T18:30:00+00:00\"")
    );

    let second = TestDb::new().await;
    json_output(&holdfast(
        &second,
        &[
            "--json",
            "catalogue",
            "load",
            "--file",
            exported.to_str().unwrap(),
        ],
    ));
    assert_eq!(
        catalogue_rows(&second).await,
        rows,
        "load(export) is the same catalogue"
    );
    // and exporting that gives the same file
    let again = holdfast(&second, &["catalogue", "export"]);
    assert!(again.status.success(), "{}", stderr(&again));
    let again: Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!(again, file);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_catalogue_file_names_its_line_and_writes_nothing() {
    let dir = scratch();
    let db = TestDb::new().await;
    let before = catalogue_rows(&db).await;
    for (broken, named) in [
        (
            SPRING.replace("2027-03-20T19:30:00+01:00", "20 March, half seven"),
            "event \"spring-concert\"",
        ),
        (
            SPRING.replace("\"price_minor\": 1200", "\"price_minor\": -5"),
            "product \"spring-honey\"",
        ),
        (
            SPRING.replace("\"percent_off\": 15", "\"percent_off\": 150"),
            "voucher \"EARLY\"",
        ),
        (
            SPRING.replace("\"slot_minutes\": 60", "\"slot_minutes\": 1"),
            "schedule \"bread\"",
        ),
        (
            SPRING.replace(
                "\"sale_closes_at\": \"2027-03-20T18:00:00+01:00\"",
                "\"sale_closes_at\": \"2027-01-20T18:00:00+01:00\"",
            ),
            "spring-stalls",
        ),
        (
            SPRING.replace("\"tiers\": [", "\"tiers\": [[],"),
            "is not a catalogue",
        ),
    ] {
        let path = dir.join("broken.json");
        std::fs::write(&path, &broken).unwrap();
        let output = holdfast(
            &db,
            &["catalogue", "load", "--file", path.to_str().unwrap()],
        );
        assert_eq!(output.status.code(), Some(1), "{named}");
        assert!(
            stderr(&output).contains(named),
            "{named}: {}",
            stderr(&output)
        );
        assert_eq!(
            catalogue_rows(&db).await,
            before,
            "{named}: nothing written"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn voucher_add_and_list_make_and_show_the_admins_vouchers() {
    let db = TestDb::new().await;
    db.load_demo().await;
    let created = json_output(&holdfast(
        &db,
        &[
            "--json",
            "voucher",
            "add",
            "spring-10",
            "--amount-off",
            "500",
            "--per-unit",
            "--uses",
            "25",
            "--products",
            "harbour-lights-general,harbour-lights-vip",
            "--per-buyer",
            "--from",
            "2027-03-01T09:00:00+01:00",
            "--until",
            "2027-03-20T18:00:00+01:00",
        ],
    ));
    assert_eq!(created["outcome"], "created");
    assert_eq!(created["code"], "SPRING-10");
    // the same code again changes nothing
    let again = json_output(&holdfast(
        &db,
        &[
            "--json",
            "voucher",
            "add",
            "SPRING-10",
            "--percent",
            "90",
            "--uses",
            "1",
        ],
    ));
    assert_eq!(again["outcome"], "exists");
    let listed = json_output(&holdfast(&db, &["--json", "voucher", "list"]));
    let one = &listed[0];
    assert_eq!(one["code"], "SPRING-10");
    assert_eq!(one["discount"]["discount"], "per_unit");
    assert_eq!(one["discount"]["minor"], 500);
    assert_eq!(one["currency"], "eur", "the shop's currency");
    assert_eq!(
        (one["uses"].as_i64(), one["used"].as_i64()),
        (Some(25), Some(0))
    );
    assert_eq!(one["valid_from"], "2027-03-01T08:00:00Z");
    assert_eq!(one["per_buyer"], true);
    let text = holdfast(&db, &["voucher", "list"]);
    assert_eq!(
        String::from_utf8_lossy(&text.stdout).trim(),
        "SPRING-10: €5.00 off each unit; 0 of 25 used, 0 held, 25 left"
    );

    let before = snapshot(&db.pool).await;
    for (args, says) in [
        (
            vec![
                "NEW-ONE",
                "--percent",
                "10",
                "--amount-off",
                "100",
                "--uses",
                "5",
            ],
            "cannot be used with",
        ),
        (
            vec!["NEW-ONE", "--percent", "0", "--uses", "5"],
            "a percentage off is 1 to 100",
        ),
        (
            vec!["NEW-ONE", "--percent", "10", "--uses", "0"],
            "1 to 1,000,000 uses",
        ),
        (
            vec!["NEW-ONE", "--uses", "5"],
            "takes something off, unlocks a hidden product",
        ),
        (
            vec![
                "NEW-ONE",
                "--percent",
                "10",
                "--uses",
                "5",
                "--products",
                "no-such-thing",
            ],
            "no such products: no-such-thing",
        ),
        (
            vec![
                "NEW-ONE",
                "--percent",
                "10",
                "--uses",
                "5",
                "--from",
                "tomorrow",
            ],
            "--from: \"tomorrow\" is not a moment",
        ),
        (
            vec![
                "NEW-ONE",
                "--percent",
                "10",
                "--uses",
                "5",
                "--from",
                "2027-03-02T00:00:00Z",
                "--until",
                "2027-03-01T00:00:00Z",
            ],
            "valid from a moment before it is valid until",
        ),
        (
            vec!["no", "--percent", "10", "--uses", "5"],
            "\"no\" is not a voucher code",
        ),
        (
            vec!["NEW-ONE", "--percent", "10", "--uses", "5", "--per-unit"],
            "only an amount can be taken off each unit",
        ),
    ] {
        let mut all = vec!["voucher", "add"];
        all.extend(&args);
        let output = holdfast(&db, &all);
        let said = format!(
            "{}{}",
            stderr(&output),
            String::from_utf8_lossy(&output.stdout)
        );
        assert!(!output.status.success(), "{args:?}");
        assert!(said.contains(says), "{args:?}: {said}");
    }
    let listed = json_output(&holdfast(&db, &["--json", "voucher", "list"]));
    assert_eq!(
        listed.as_array().unwrap().len(),
        1,
        "nothing else was created"
    );
    assert_eq!(snapshot(&db.pool).await, before);
}

/// Slots of a schedule on sale more than a day ahead (so no slot starts,
/// and no day ends, between two counts).
async fn slots_on_sale(db: &TestDb, collection: &str) -> i64 {
    sqlx::query_scalar(
        "select count(*) from products where collection = $1 and kind = 'pickup_slot' \
            and active and archived_at is null and starts_at > now() + interval '1 day'",
    )
    .bind(collection)
    .fetch_one(&db.pool)
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_worker_moves_a_schedules_window_forward_one_worker_at_a_time() {
    let dir = scratch();
    let spring = dir.join("spring.json");
    std::fs::write(&spring, SPRING).unwrap();
    let db = TestDb::new().await;
    json_output(&holdfast(
        &db,
        &[
            "--json",
            "catalogue",
            "load",
            "--file",
            spring.to_str().unwrap(),
        ],
    ));
    let before = slots_on_sale(&db, "bread").await;
    assert!(before > 0);
    // the window grows from 14 days to 42 (as time moving on would bring
    // new days into it); what the slots should be, by the schedule itself
    sqlx::query("update schedules set days_ahead = 42 where collection = 'bread'")
        .execute(&db.pool)
        .await
        .unwrap();
    let schedule = holdfast::catalogue::schedules::schedules(&db.pool)
        .await
        .unwrap()
        .into_iter()
        .find(|s| s.collection == "bread")
        .unwrap();
    let zone = holdfast::clock::ShopZone::UTC;
    let now = chrono::Utc::now();
    let wanted = schedule
        .slots(zone, zone.today(now))
        .into_iter()
        .filter(|at| *at > now + chrono::Duration::days(1))
        .count() as i64;
    assert!(wanted > before, "{wanted} > {before}");
    // four workers at once: each slot is made once
    let passes = futures::future::join_all(
        (0..4).map(|_| holdfast::worker::schedules::publish_once(&db.pool, zone)),
    )
    .await;
    let created: usize = passes
        .into_iter()
        .map(|pass| pass.unwrap().map_or(0, |done| done.created))
        .sum();
    assert_eq!(created as i64, wanted - before);
    assert_eq!(slots_on_sale(&db, "bread").await, wanted);
    // and a pass with nothing new does nothing
    let again = holdfast::worker::schedules::publish_once(&db.pool, zone)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((again.created, again.withdrawn), (0, 0));
}
