//! Finding orders in the admin: by name, e-mail, a ticket code or the
//! order's number (the start of its id), by stage, product and day, a page
//! of 50 at a time by cursor with the count of all that match; what is
//! typed is matched as text, and a cursor the list did not give is refused.

use std::collections::HashSet;

use holdfast_testkit::engine::started;
use holdfast_testkit::*;

/// The orders a page lists, in order.
fn listed(page: &str) -> Vec<String> {
    page.split("<tr data-order=\"")
        .skip(1)
        .map(|rest| rest[..36].to_owned())
        .collect()
}

fn found(page: &str) -> String {
    let from = page.find("id=\"found\"").unwrap();
    let rest = &page[from..];
    rest[rest.find('>').unwrap() + 1..rest.find("</p>").unwrap()].to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn staff_find_orders_by_name_email_code_number_stage_product_and_day_a_page_at_a_time() {
    let app = spawn_app().await;
    app.load_demo().await;
    app.add_staff().await;
    let (staff, csrf) = app.staff_browser().await;
    let bea = app
        .buy(
            &browser(),
            &Purchase::of("harbour-lights-vip", 2).by("Bea O'Hara", "bea@example.org"),
        )
        .await
        .started
        .order_id;
    let cai = app
        .buy(
            &browser(),
            &Purchase::of("wild-honey", 1).by("Cai 50%_off", "cai@example.net"),
        )
        .await
        .started
        .order_id;
    for n in 0..58 {
        started(
            &app.db,
            &format!("many-{n}"),
            &[("harbour-lights-general", 1)],
        )
        .await;
    }
    let code: String =
        sqlx::query_scalar("select code from order_items where order_id = $1 limit 1")
            .bind(bea)
            .fetch_one(&app.db.pool)
            .await
            .unwrap();
    let search = |query: &str| {
        let staff = staff.clone();
        let url = format!("{}/admin/orders?{query}", app.address);
        async move {
            let answer = staff.get(url).send().await.unwrap();
            (answer.status(), answer.text().await.unwrap())
        }
    };
    let only = |page: &str, order: uuid::Uuid| {
        assert_eq!(listed(page), [order.to_string()], "{}", found(page));
        assert!(
            found(page).starts_with("1 order matches"),
            "{}",
            found(page)
        );
    };
    // by part of a name, of an e-mail, a ticket code typed loosely, the number
    only(&search("q=o%27hara").await.1, bea);
    only(&search("q=EXAMPLE.NET").await.1, cai);
    only(&search(&format!("q={}", code.to_lowercase())).await.1, bea);
    only(
        &search(&format!("q={}", &cai.to_string()[..8])).await.1,
        cai,
    );
    // the number the shopper reads out, typed loosely
    let number: String = sqlx::query_scalar("select number from orders where id = $1")
        .bind(cai)
        .fetch_one(&app.db.pool)
        .await
        .unwrap();
    let typed = number.to_lowercase().replacen('-', " ", 1);
    let by_number = search(&format!("q={}", typed.replace(' ', "+"))).await.1;
    only(&by_number, cai);
    assert!(by_number.contains(&number), "{by_number}");
    // what is typed is text, not a pattern
    only(&search("q=50%25_off").await.1, cai);
    assert!(found(&search("q=%25").await.1).starts_with("1 order"));
    // the items are listed, refunds as amounts
    let page = search(&format!("q={}", &bea.to_string()[..8])).await.1;
    assert!(page.contains("2 × Harbour Lights — VIP"), "{page}");
    // stage and product
    let paid = search("stage=paid").await.1;
    assert_eq!(listed(&paid).len(), 2);
    assert!(found(&paid).starts_with("2 orders match"));
    let honey = search("product=wild-honey").await.1;
    assert_eq!(listed(&honey), [cai.to_string()]);
    // a whole event: its tiers together; the filter's choices grouped by
    // collection, a restaurant's month of times not listed one by one
    let event = search("product=collection%3Aharbour-lights&stage=paid")
        .await
        .1;
    assert_eq!(listed(&event), [bea.to_string()]);
    assert!(
        event.contains("<optgroup label=\"Harbour Lights — live at the pier\"><option value=\"collection:harbour-lights\" selected>All of Harbour Lights"),
        "{event}"
    );
    let options = event.split("<select name=\"product\">").nth(1).unwrap();
    let options = options[..options.find("</select>").unwrap()]
        .matches("<option")
        .count();
    let times: i64 = sqlx::query_scalar("select count(*) from dining_times")
        .fetch_one(&app.db.pool)
        .await
        .unwrap();
    assert!(
        options < 80 && (options as i64) < times,
        "{options} choices for {times} table times"
    );
    // by day, in the shop's zone: today has them all, tomorrow none
    let today = holdfast::clock::ShopZone::parse("UTC")
        .unwrap()
        .today(chrono::Utc::now());
    let tomorrow = today.succ_opt().unwrap();
    let waiting = search(&format!("stage=waiting&from={today}&to={today}"))
        .await
        .1;
    assert!(
        found(&waiting).starts_with("58 orders match"),
        "{}",
        found(&waiting)
    );
    let none = search(&format!("from={tomorrow}")).await.1;
    assert!(found(&none).starts_with("0 orders match"));
    // a page of 50, then the rest: nothing twice, nothing left out
    let first = search("").await.1;
    assert!(
        found(&first).starts_with("60 orders match"),
        "{}",
        found(&first)
    );
    let first_page = listed(&first);
    assert_eq!(first_page.len(), 50);
    let next = first.split("id=\"next-page\"").next().unwrap();
    let href = &next[next.rfind("href=\"/admin/orders?").unwrap() + 20..];
    let href = href[..href.find('"').unwrap()]
        .replace("&#38;", "&")
        .replace("&amp;", "&");
    // an order placed meanwhile does not move the next page
    started(&app.db, "meanwhile", &[("harbour-lights-general", 1)]).await;
    let second = search(&href).await.1;
    let second_page = listed(&second);
    assert_eq!(second_page.len(), 10, "{href}");
    assert!(!second.contains("id=\"next-page\""));
    let all: HashSet<_> = first_page.iter().chain(&second_page).collect();
    assert_eq!(all.len(), 60);
    // a cursor the list never gave, and a state that does not exist
    for bad in [
        "after=yesterday",
        "after=1.not-an-id",
        "stage=lost",
        "from=03/12/2026",
    ] {
        assert_eq!(
            search(bad).await.0,
            reqwest::StatusCode::BAD_REQUEST,
            "{bad}"
        );
    }
    let _ = csrf;
}
