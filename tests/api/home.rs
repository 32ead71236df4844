//! The admin's home page against the ledger: after a scripted sale with
//! refunds (whole and partial) and an order still being
//! paid, its figures equal the orders export and `holdfast check` to the
//! cent and to the unit.

use holdfast_testkit::*;

use crate::exports::{ORDER_COLUMNS, download, records};

/// The value of attribute `name` in the first tag at or after `anchor`.
fn attr_after(page: &str, anchor: &str, name: &str) -> i64 {
    let from = page
        .find(anchor)
        .unwrap_or_else(|| panic!("no {anchor} on the page"));
    let rest = &page[from..];
    let tag_end = rest.find('>').unwrap();
    let tag = &rest[..tag_end];
    let key = format!("{name}=\"");
    let at = tag
        .find(&key)
        .unwrap_or_else(|| panic!("no {name} in {tag}"))
        + key.len();
    let value = &tag[at..];
    value[..value.find('"').unwrap()]
        .parse()
        .unwrap_or_else(|e| panic!("{name} in {tag}: {e}"))
}

async fn refund(
    app: &TestApp,
    staff: &reqwest::Client,
    csrf: &str,
    order: uuid::Uuid,
    form: &[(&str, &str)],
) {
    let mut fields = vec![
        ("csrf", csrf),
        ("reason", "The owner's script"),
        ("step", "refund"),
    ];
    fields.extend_from_slice(form);
    let answer = app
        .admin_post(staff, &format!("/admin/orders/{order}/refund"), &fields)
        .await;
    assert_eq!(answer.status(), reqwest::StatusCode::SEE_OTHER);
    let back = location(&answer);
    assert!(back.contains("notice=staff_refund"), "{back}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_home_figures_equal_the_orders_export_and_the_check_to_the_cent() {
    let app = spawn_app().await;
    app.load_demo().await;
    app.add_staff().await;
    let (staff, csrf) = app.staff_browser().await;
    let empty = app.admin_page(&staff, "/admin").await;
    assert!(empty.contains("No sales yet"), "{empty}");

    let ada = app
        .buy(
            &browser(),
            &Purchase::of("harbour-lights-general", 3).by("Ada", "ada@example.com"),
        )
        .await;
    let bea = app
        .buy(
            &browser(),
            &Purchase::of("harbour-lights-vip", 2)
                .and("wild-honey", 1)
                .by("Bea", "bea@example.com"),
        )
        .await;
    let cai = app
        .buy(
            &browser(),
            &Purchase::of("wild-honey", 2).by("Cai", "cai@example.com"),
        )
        .await;
    // one still being paid: reserved, not taken
    app.start(&browser(), &Purchase::of("harbour-lights-general", 1))
        .await;
    // two partial refunds (one of a basket's lines) and a whole one
    refund(
        &app,
        &staff,
        &csrf,
        ada.started.order_id,
        &[("units:harbour-lights-general", "1"), ("restock", "on")],
    )
    .await;
    refund(
        &app,
        &staff,
        &csrf,
        bea.started.order_id,
        &[("units:harbour-lights-vip", "1")],
    )
    .await;
    refund(
        &app,
        &staff,
        &csrf,
        cai.started.order_id,
        &[("units:wild-honey", "2"), ("restock", "on")],
    )
    .await;
    wait_for_accepted(|| app.sandbox.stripe.ledger(), 3).await;

    let page = app.admin_page(&staff, "/admin").await;
    let csv = records(
        &download(&app, &staff, "/admin/exports/orders.csv")
            .await
            .text,
        ORDER_COLUMNS,
    );
    let paid: Vec<_> = csv.iter().filter(|r| !r["paid_at"].is_empty()).collect();
    let sum =
        |column: &str| -> i64 { paid.iter().map(|r| r[column].parse::<i64>().unwrap()).sum() };
    let paid_minor = sum("amount_minor");
    let refunded_minor = sum("refunded_minor");
    let units = sum("units") - sum("units_refunded");
    assert_eq!(paid.len(), 3);
    assert_eq!(
        csv.len(),
        4,
        "the order being paid is in the export, unpaid"
    );
    assert!(refunded_minor > 0 && refunded_minor < paid_minor);
    for window in ["today", "week", "so_far"] {
        let tile = format!("data-window=\"{window}\"");
        let figure = &page[page.find(&tile).unwrap()..];
        let figures = |name: &str| attr_after(figure, "class=\"big\"", name);
        assert_eq!(figures("data-orders"), 3, "{window}");
        assert_eq!(figures("data-paid"), paid_minor, "{window}");
        assert_eq!(figures("data-refunded"), refunded_minor, "{window}");
        assert_eq!(figures("data-net"), paid_minor - refunded_minor, "{window}");
        assert_eq!(figures("data-units"), units, "{window}");
    }
    // the same money by hand, from the prices: 3 general, 2 VIP and 3
    // honey taken; 1 general, 1 VIP and 2 honey given back
    let price = |id: &'static str| {
        let pool = app.db.pool.clone();
        async move {
            sqlx::query_scalar::<_, i64>("select price_minor from products where id = $1")
                .bind(id)
                .fetch_one(&pool)
                .await
                .unwrap()
        }
    };
    let (general, vip, honey) = (
        price("harbour-lights-general").await,
        price("harbour-lights-vip").await,
        price("wild-honey").await,
    );
    assert_eq!(paid_minor, 3 * general + 2 * vip + 3 * honey);
    assert_eq!(refunded_minor, general + vip + 2 * honey);
    // and the provider's own ledger, once the worker has asked it
    app.outbox().await;
    let ledger = app.sandbox.stripe.ledger();
    let taken: i64 = ledger.charges.iter().map(|c| c.amount).sum();
    let given: i64 = ledger.refunds_standing().map(|r| r.amount).sum();
    assert_eq!(
        (ledger.charges.len(), taken),
        (3, paid_minor),
        "what the provider took"
    );
    assert_eq!(
        (ledger.refunds.len(), given),
        (3, refunded_minor),
        "what it gave back"
    );
    // units per tier and product: the counters `holdfast check` reads
    let check = json_output(&run_command(
        env!("CARGO_BIN_EXE_holdfast"),
        &app.db,
        &["--json", "check"],
    ));
    assert_eq!(check["drift"], false);
    let mut compared = 0;
    for resource in check["resources"].as_array().unwrap() {
        let id = resource["resource_id"].as_str().unwrap();
        let anchor = format!("data-product=\"{id}\"");
        if !page.contains(&anchor) {
            continue;
        }
        assert_eq!(
            attr_after(&page, &anchor, "data-sold"),
            resource["sold"].as_i64().unwrap(),
            "{id}"
        );
        assert_eq!(
            attr_after(&page, &anchor, "data-capacity"),
            resource["total"].as_i64().unwrap(),
            "{id}"
        );
        compared += 1;
    }
    assert_eq!(
        compared, 6,
        "the tiers, the gala's standing and two sections, and the honey"
    );
    // what those counters say after the script, worked out by hand
    assert_eq!(
        attr_after(
            &page,
            "data-product=\"harbour-lights-general\"",
            "data-sold"
        ),
        2
    );
    assert_eq!(
        attr_after(&page, "data-product=\"harbour-lights-vip\"", "data-sold"),
        1
    );
    assert_eq!(
        attr_after(&page, "data-product=\"wild-honey\"", "data-sold"),
        1
    );
    // what needs attention: the refunds, until the worker is through
    assert!(page.contains("Needs attention"));
    // the door has no home page: its work starts at the door
    app.add_staff_as("door@holdfast.test", holdfast::staff::roles::Role::Door)
        .await;
    let (door, _) = app.signed_in("door@holdfast.test", PASSWORD).await;
    let answer = door
        .get(format!("{}/admin", app.address))
        .send()
        .await
        .unwrap();
    assert_eq!(location(&answer), "/admin/redeem");
}

/// Coming up, in time order across kinds (issue 46): each concert, the
/// bakery's next pickup day and the bistro's next service, once each and
/// none of them begun; the bistro said in tables and covers, not as "0 of
/// 208" of its kitchen's pacing.
#[tokio::test]
async fn coming_up_names_each_event_and_the_next_day_of_each_kind_in_time_order() {
    let app = spawn_app().await;
    app.load_demo().await;
    app.add_staff().await;
    let (staff, _) = app.staff_browser().await;
    let home = app.admin_page(&staff, "/admin").await;
    let list = &home[home.find("id=\"upcoming\"").expect("coming up")..];
    let list = &list[..list.find("</ul>").unwrap()];
    let items: Vec<&str> = list.split("<li data-at=\"").skip(1).collect();
    let titles: Vec<(String, chrono::DateTime<chrono::Utc>)> = items
        .iter()
        .map(|item| {
            let at = chrono::DateTime::parse_from_rfc3339(&item[..item.find('"').unwrap()])
                .unwrap()
                .to_utc();
            let title = item.split("</strong> · ").nth(1).unwrap();
            (
                title[..title.find(['(', '<']).unwrap()].trim().to_owned(),
                at,
            )
        })
        .collect();
    let names: Vec<&str> = titles.iter().map(|(t, _)| t.as_str()).collect();
    for expected in [
        "Harbour Lights — live at the pier",
        "Winter Gala — the Chamber Orchestra",
        "Bakery pickup",
        "A table at the Harbour Bistro",
    ] {
        assert_eq!(
            names.iter().filter(|n| **n == expected).count(),
            1,
            "{expected} once in {names:?}"
        );
    }
    let now = chrono::Utc::now();
    assert!(
        titles
            .iter()
            .all(|(_, at)| *at >= now - chrono::Duration::seconds(5))
    );
    assert!(titles.windows(2).all(|w| w[0].1 <= w[1].1), "{titles:?}");
    let bistro = items
        .iter()
        .find(|i| i.contains("A table at the Harbour Bistro"))
        .unwrap();
    assert!(bistro.contains("No tables booked yet"), "{bistro}");
    assert!(!bistro.contains(" of "), "{bistro}");
    // the chart has its amount scale once a day sold something
    app.buy(&browser(), &Purchase::of("harbour-lights-vip", 2))
        .await;
    let home = app.admin_page(&staff, "/admin").await;
    assert!(home.contains("class=\"scale-label\""), "{home}");
    // How full: a room's time has no places left to count, only covers
    let bistro_row = home
        .split("aria-label=\"A table at the Harbour Bistro")
        .nth(1)
        .and_then(|table| table.split("</table>").next())
        .expect("the bistro's How full");
    assert!(bistro_row.contains("not a count of places"), "{bistro_row}");
    assert!(!bistro_row.contains(">208<"), "{bistro_row}");
}
