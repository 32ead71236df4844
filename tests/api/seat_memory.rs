//! The seat map from memory (docs/design.md, "Reserved seating", "The seat
//! map"): a crowd at a section's map, and at the API's seats, reads no
//! seat from the database (the seats' tables are locked while it looks:
//! a view that read them would wait); a seat taken shows taken, and a seat
//! refunded shows free again, within memory's lag bound; and an open map's
//! stream says each seat taken and given back.

use std::time::{Duration, Instant};

use futures::future::join_all;
use holdfast::catalogue::seats::SeatState;
use holdfast::live::{LiveStock, TRUST_FOR};
use holdfast::staff::api_keys::Scope;
use holdfast::staff::refunds::{RefundOutcome, RefundRequest, refund_order};
use serde_json::Value;

use crate::seats::take;
use holdfast_testkit::*;

const SECTION: &str = "winter-gala-stalls";

async fn map(app: &TestApp, client: &reqwest::Client) -> String {
    let response = client
        .get(format!("{}/seats/{SECTION}", app.address))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    response.text().await.unwrap()
}

/// What the map says of a seat: "C-3, row C, Stalls, €45.00, taken".
fn says(label: &str, state: &str) -> String {
    format!(
        "aria-label=\"{label}, row {}, Stalls, €45.00, {state}\"",
        &label[..1]
    )
}

/// How long until memory shows `label` in `state`; fails past the lag
/// bound.
async fn shows(memory: &LiveStock, label: &str, state: SeatState, since: Instant) -> Duration {
    loop {
        let seen = memory.now().and_then(|s| {
            let section = s.section(SECTION)?;
            section
                .seats
                .iter()
                .find(|s| s.label == label)
                .map(|s| s.state)
        });
        if seen == Some(state) {
            return since.elapsed();
        }
        assert!(
            since.elapsed() < TRUST_FOR,
            "{label}: memory still shows {seen:?} instead of {state:?} after {:?}",
            since.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// A section's stream of seat changes: the next event's JSON.
struct SeatEvents {
    body: reqwest::Response,
    buffer: String,
}

impl SeatEvents {
    async fn open(app: &TestApp) -> SeatEvents {
        let response = browser()
            .get(format!("{}/seats/{SECTION}/stream", app.address))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        assert_eq!(response.headers()["content-type"], "text/event-stream");
        SeatEvents {
            body: response,
            buffer: String::new(),
        }
    }

    async fn next(&mut self) -> Value {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let event: String = self.buffer.drain(..end + 2).collect();
                let Some(data) = event.lines().find_map(|l| l.strip_prefix("data: ")) else {
                    continue; // a comment
                };
                return serde_json::from_str(data).unwrap();
            }
            let chunk = tokio::time::timeout(Duration::from_secs(5), self.body.chunk())
                .await
                .expect("no event within 5 s")
                .unwrap()
                .expect("the stream ended");
            self.buffer.push_str(std::str::from_utf8(&chunk).unwrap());
        }
    }

    /// Events until one lists `label` under `list`; the events read.
    async fn until(&mut self, list: &str, label: &str) -> Vec<Value> {
        let mut seen = Vec::new();
        loop {
            let event = self.next().await;
            let found = event[list].as_array().unwrap().iter().any(|l| l == label);
            seen.push(event);
            if found {
                return seen;
            }
        }
    }
}

fn labels(event: &Value, list: &str) -> Vec<String> {
    let mut out: Vec<String> = event[list]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap().to_owned())
        .collect();
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crowd_at_the_seat_map_reads_no_seat_and_seats_taken_or_refunded_show_within_the_lag() {
    let app = spawn_app().await;
    app.load_demo().await;
    app.add_staff().await;
    let token = crate::api_v1::key_with(&app, &[Scope::ReadCatalogue]).await;
    take(&app.db.pool, "held", SECTION, &["C-1", "C-2"]).await;
    app.settled().await;
    shows(&app.live, "C-1", SeatState::Taken, Instant::now()).await;
    let mut events = SeatEvents::open(&app).await;
    let first = events.next().await;
    assert_eq!(first["full"], true);
    // C-1 and C-2 held; D-7 and D-8 blocked in the demo's plan
    assert_eq!(labels(&first, "taken"), ["C-1", "C-2", "D-7", "D-8"]);
    assert_eq!(
        (first["seats"].as_u64(), first["free_count"].as_u64()),
        (Some(70), Some(66))
    );

    // every table of the seats is locked: a view that read one would wait
    let mut lock = app.db.pool.begin().await.unwrap();
    sqlx::query("lock table seats, seat_pins in access exclusive mode")
        .execute(&mut *lock)
        .await
        .unwrap();
    let shoppers: Vec<reqwest::Client> = (0..200).map(|_| browser()).collect();
    let api = holdfast::payments::http::client(Duration::from_secs(30));
    let crowd = async {
        let maps = join_all(shoppers.iter().map(|c| map(&app, c)));
        let listed = join_all((0..50).map(|_| {
            api.get(format!("{}/api/v1/products/{SECTION}/seats", app.address))
                .bearer_auth(&token)
                .send()
        }));
        futures::join!(maps, listed)
    };
    let (pages, listed) = tokio::time::timeout(Duration::from_secs(30), crowd)
        .await
        .expect("a view waited for the seats' tables: it read the database");
    lock.rollback().await.unwrap();
    assert_eq!(pages.len(), 200);
    for page in &pages {
        assert!(page.contains(&says("C-1", "taken")), "{page}");
        assert!(page.contains(&says("C-3", "free")), "{page}");
        assert!(
            page.contains("<span id=\"seats-free\">66</span> seats free"),
            "{page}"
        );
    }
    for response in listed {
        let response = response.unwrap();
        assert_eq!(response.status(), 200);
        let body: Value = response.json().await.unwrap();
        let state = |label: &str| {
            body["seats"]
                .as_array()
                .unwrap()
                .iter()
                .find(|s| s["label"] == label)
                .map(|s| s["state"].clone())
        };
        assert_eq!(
            (state("C-1"), state("C-3"), state("D-7")),
            (
                Some("taken".into()),
                Some("free".into()),
                Some("blocked".into())
            )
        );
    }

    // a seat taken shows taken within the lag bound, on the map and on
    // the open map's stream (only what changed)
    let since = Instant::now();
    take(&app.db.pool, "late", SECTION, &["C-3"]).await;
    let lag = shows(&app.live, "C-3", SeatState::Taken, since).await;
    println!("a seat taken showed taken after {lag:?}");
    assert!(map(&app, &browser()).await.contains(&says("C-3", "taken")));
    let seen = events.until("taken", "C-3").await;
    let last = seen.last().unwrap();
    assert_eq!(last["full"], false);
    assert_eq!(labels(last, "taken"), ["C-3"]);
    assert_eq!(last["free_count"], 65);

    // a seat bought, then refunded, shows free again
    let paid = app.buy(&browser(), &Purchase::of(SECTION, 1)).await;
    let order = paid.started.order_id;
    let mut seat: Option<String> = None;
    for _ in 0..200 {
        seat = sqlx::query_scalar(
            "select s.label from order_items c join seats s on s.id = c.seat_id \
              where c.order_id = $1",
        )
        .bind(order)
        .fetch_optional(&app.db.pool)
        .await
        .unwrap();
        if seat.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let seat = seat.expect("the ticket has its seat");
    shows(&app.live, &seat, SeatState::Taken, Instant::now()).await;
    events.until("taken", &seat).await;
    let since = Instant::now();
    let refunded = refund_order(
        &app.db.pool,
        &RefundRequest {
            order_id: order,
            units: Vec::new(),
            reason: "The shopper cannot come".into(),
            restock: true,
            override_redeemed: false,
            by: "box-office@example.com".into(),
            staff: None,
            key: None,
        },
    )
    .await
    .unwrap();
    assert!(
        matches!(refunded, RefundOutcome::Queued { .. }),
        "{refunded:?}"
    );
    let lag = shows(&app.live, &seat, SeatState::Free, since).await;
    println!("a seat refunded showed free after {lag:?}");
    assert!(map(&app, &browser()).await.contains(&says(&seat, "free")));
    let seen = events.until("free", &seat).await;
    assert_eq!(
        labels(seen.last().unwrap(), "free"),
        std::slice::from_ref(&seat)
    );
}

#[tokio::test]
async fn a_map_of_no_section_is_not_found_and_its_stream_too() {
    let app = spawn_app().await;
    app.load_demo().await;
    app.settled().await;
    for path in [
        "/seats/winter-gala-standing",
        "/seats/no-such-section",
        "/seats/winter-gala-standing/stream",
        "/seats/no-such-section/stream",
    ] {
        let response = browser()
            .get(format!("{}{path}", app.address))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 404, "{path}");
    }
}
