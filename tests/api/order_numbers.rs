//! A short order number a person can read out (issue 33): two hundred
//! orders paid at once get two hundred distinct numbers of the one shape,
//! none telling another (no shared run of digits from order to order); the
//! order page and the confirmation mail say it, and the order page shows
//! each code's QR image.

use std::collections::HashSet;

use futures::future::join_all;

use holdfast_testkit::engine::paid;
use holdfast_testkit::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_hundred_orders_at_once_get_distinct_readable_numbers() {
    let app = spawn_app().await;
    app.load_demo().await;
    let orders = join_all((0..200).map(|i| {
        let db = &app.db;
        async move {
            paid(
                db,
                &format!("number-{i:03}"),
                &[("harbour-lights-general", 1)],
            )
            .await
        }
    }))
    .await;
    let numbers: Vec<&str> = orders.iter().map(|o| o.number.as_str()).collect();
    let shape = regex_free_shape;
    assert!(numbers.iter().all(|n| shape(n)), "{numbers:?}");
    assert_eq!(numbers.iter().collect::<HashSet<_>>().len(), 200, "unique");
    // not a counter: orders made one after another share no leading group
    let mut by_time: Vec<(chrono::DateTime<chrono::Utc>, &str)> = orders
        .iter()
        .map(|o| (o.created_at, o.number.as_str()))
        .collect();
    by_time.sort();
    let neighbours_alike = by_time
        .windows(2)
        .filter(|pair| pair[0].1[..4] == pair[1].1[..4])
        .count();
    assert!(
        neighbours_alike < 5,
        "{neighbours_alike} neighbours share a group"
    );
    // the order page says it
    let order = &orders[0];
    let page = read_page(
        &browser(),
        &format!("{}/orders/{}", app.address, order.token),
    )
    .await;
    assert!(
        page.contains(&format!("id=\"order-number\">{}<", order.number)),
        "{page}"
    );
    // with each code's QR image, which decodes back to the code
    let codes: Vec<String> =
        sqlx::query_scalar("select code from order_items where order_id = $1 order by code")
            .bind(order.id)
            .fetch_all(&app.db.pool)
            .await
            .unwrap();
    let mut drawn: Vec<String> = page
        .split("src=\"data:image/png;base64,")
        .skip(1)
        .map(|rest| {
            use base64::Engine;
            let png = base64::engine::general_purpose::STANDARD
                .decode(&rest[..rest.find('"').unwrap()])
                .unwrap();
            crate::mail::decode_qr(&png)
        })
        .collect();
    drawn.sort();
    assert_eq!(drawn, codes);
    // and the database refuses a number of another shape
    let bad = sqlx::query("update orders set number = 'ORDER-1' where id = $1")
        .bind(order.id)
        .execute(&app.db.pool)
        .await;
    assert!(bad.is_err());
}

/// "7F3A-91C2-E4B0": three groups of four upper-case hex digits.
fn regex_free_shape(number: &str) -> bool {
    let groups: Vec<&str> = number.split('-').collect();
    groups.len() == 3
        && groups.iter().all(|g| {
            g.len() == 4
                && g.bytes()
                    .all(|b| b.is_ascii_digit() || (b'A'..=b'F').contains(&b))
        })
}
