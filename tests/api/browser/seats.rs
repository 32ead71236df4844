//! A shopper picks seats on the seat map in a real browser at a phone's
//! size (390×844) and a desk's (1280×900): the event's card links to its
//! section's map, each free seat is a link that says its label, row,
//! section, price and state; seats others take while the shopper looks go
//! grey where they are (the page is not read again, the picks are kept, a
//! picked seat taken is put back and said); two seats picked, one of them
//! taken by someone else meanwhile, and the checkout says so (409) with the nearest
//! seats together offered; then the best available, paid at the provider,
//! and the order page names each ticket's seat. No horizontal scroll; axe-core
//! finds nothing.

use super::*;
use crate::seats::take;

const SECTION: &str = "winter-gala-stalls";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shopper_picks_seats_on_the_map_and_is_told_when_one_is_taken() {
    let (app, driver, _turn) = shop_and_driver().await;
    let shots = target_screenshots().join("seats");
    let _ = std::fs::remove_dir_all(&shots);
    // seats others hold: the middle of row C
    take(&app.db.pool, "other-1", SECTION, &["C-7", "C-8"]).await;
    app.settled().await;
    for (round, (width, height, size)) in [(390, 844, "phone"), (1280, 900, "desk")]
        .into_iter()
        .enumerate()
    {
        let mut shopper = Browser::open(&driver, shots.clone()).await;
        shopper.client.set_window_size(width, height).await.unwrap();
        let fits = |browser: &Browser| {
            let client = browser.client.clone();
            async move {
                client
                    .execute(
                        "return document.documentElement.scrollWidth <= window.innerWidth;",
                        vec![],
                    )
                    .await
                    .unwrap()
                    == serde_json::json!(true)
            }
        };
        shopper.go(&format!("{}/c/winter-gala", app.address)).await;
        shopper.screenshot(&format!("event-{size}")).await;
        assert!(fits(&shopper).await, "event ({size}) scrolls sideways");
        shopper.click(&format!("a[href='/seats/{SECTION}']")).await;
        shopper.wait_for_text("h1", "Stalls").await;
        let lede = shopper.text(".lede").await;
        assert!(lede.contains("45.00 a seat"), "{lede}");
        // each seat says what it is; a taken seat is not a link
        let c7 = shopper.find("g[aria-label^='C-7,']").await;
        let words = c7.attr("aria-label").await.unwrap().unwrap();
        assert_eq!(words, "C-7, row C, Stalls, €45.00, taken");
        let a1 = shopper.find("a[aria-label^='A-1,']").await;
        let words = a1.attr("aria-label").await.unwrap().unwrap();
        assert_eq!(words, "A-1, row A, Stalls, €45.00, wheelchair place, free");
        shopper.screenshot(&format!("map-{size}")).await;
        assert!(fits(&shopper).await, "map ({size}) scrolls sideways");
        let violations = shopper.axe_violations().await;
        assert!(violations.is_empty(), "map: {violations:#?}");
        // the map follows the shop's stream: seats another shopper takes
        // now show as taken without the shopper asking
        let gone = if round == 0 { "B-1" } else { "B-2" };
        take(&app.db.pool, &format!("stream-{size}"), SECTION, &[gone]).await;
        shopper.find(&format!("g[aria-label^='{gone},']")).await;

        // from the keyboard: a seat is a link that takes the focus; Enter
        // picks it
        let (first, second) = if round == 0 {
            ("E-5", "E-6")
        } else {
            ("E-9", "E-10")
        };
        for seat in [first, second] {
            let link = shopper.find(&format!("a[aria-label^='{seat},']")).await;
            shopper
                .client
                .execute(
                    "arguments[0].focus();",
                    vec![serde_json::to_value(&link).unwrap()],
                )
                .await
                .unwrap();
            let focused = shopper
                .client
                .execute(
                    "return document.activeElement.getAttribute('aria-label');",
                    vec![],
                )
                .await
                .unwrap();
            assert!(
                focused
                    .as_str()
                    .unwrap_or("")
                    .starts_with(&format!("{seat},")),
                "{focused}"
            );
            link.send_keys("\u{E007}").await.unwrap();
            shopper
                .wait_for_text(".picked-seats [role=status]", seat)
                .await;
        }
        let picked = shopper.text(".picked-seats [role=status]").await;
        assert_eq!(picked, format!("Picked: {first}, {second} (€90.00)"));
        let words = shopper
            .find(&format!("a[aria-label^='{first},']"))
            .await
            .attr("aria-label")
            .await
            .unwrap()
            .unwrap();
        assert!(words.ends_with("picked: press to put it back"), "{words}");
        shopper.screenshot(&format!("picked-{size}")).await;
        let violations = shopper.axe_violations().await;
        assert!(violations.is_empty(), "picked: {violations:#?}");

        // a third seat picked; then, while the shopper looks, others take
        // a seat nearby and that third seat: both go grey where they are,
        // the page is not read again, the third is put back (the status
        // line says so) and the first two stay picked
        let (third, nearby) = if round == 0 {
            ("E-7", "D-2")
        } else {
            ("E-11", "D-12")
        };
        shopper.click(&format!("a[aria-label^='{third},']")).await;
        shopper
            .wait_for_text(".picked-seats [role=status]", third)
            .await;
        shopper
            .client
            .execute("window.seatsKept = true;", vec![])
            .await
            .unwrap();
        take(&app.db.pool, &format!("nearby-{size}"), SECTION, &[nearby]).await;
        take(&app.db.pool, &format!("third-{size}"), SECTION, &[third]).await;
        shopper
            .find(&format!(
                "g[aria-label='{nearby}, row D, Stalls, €45.00, taken']"
            ))
            .await;
        shopper
            .find(&format!(
                "g[aria-label='{third}, row E, Stalls, €45.00, taken']"
            ))
            .await;
        let said = shopper
            .wait_for_text("#seats-changed", "which you picked")
            .await;
        assert!(
            said.contains(&format!("{third}, which you picked, was just taken")),
            "{said}"
        );
        let picked = shopper.text(".picked-seats [role=status]").await;
        assert_eq!(picked, format!("Picked: {first}, {second} (€90.00)"));
        let kept = shopper
            .client
            .execute("return window.seatsKept === true;", vec![])
            .await
            .unwrap();
        assert_eq!(kept, serde_json::json!(true), "the map was read again");
        shopper.screenshot(&format!("live-{size}")).await;
        let violations = shopper.axe_violations().await;
        assert!(violations.is_empty(), "live: {violations:#?}");

        // into the basket; then someone else takes the second seat
        // before the shopper checks out
        shopper.click(".picked-seats button[type=submit]").await;
        shopper.wait_for_path("/basket").await;
        // the basket names the seats picked; they change on the map, not
        // with a quantity box
        let named = shopper.text(".seats-named").await;
        assert_eq!(named, format!("Seats {first}, {second}"));
        let boxes = shopper
            .client
            .execute(
                "return document.querySelectorAll('table.lines input[name=qty]').length;",
                vec![],
            )
            .await
            .unwrap();
        assert_eq!(boxes, serde_json::json!(0));
        shopper.screenshot(&format!("basket-{size}")).await;
        assert!(fits(&shopper).await, "basket ({size}) scrolls sideways");
        let violations = shopper.axe_violations().await;
        assert!(violations.is_empty(), "basket: {violations:#?}");
        take(&app.db.pool, &format!("other-{size}"), SECTION, &[second]).await;
        shopper.fill("input[name=name]", "Ada Lovelace").await;
        shopper.fill("input[name=email]", "ada@example.com").await;
        shopper.click("form.checkout button[type=submit]").await;
        let told = shopper
            .wait_for_text("main", &format!("{second} was just taken."))
            .await;
        assert!(told.contains("Nearest seats together: "), "{told}");
        shopper.screenshot(&format!("taken-{size}")).await;
        assert!(fits(&shopper).await, "basket ({size}) scrolls sideways");
        let violations = shopper.axe_violations().await;
        assert!(violations.is_empty(), "taken: {violations:#?}");

        // the best available instead: paid, and the order names the seats
        shopper
            .go(&format!("{}/seats/{SECTION}", app.address))
            .await;
        shopper.fill(".seats-best input[name=qty]", "2").await;
        shopper.click(".seats-best button[type=submit]").await;
        shopper.wait_for_path("/basket").await;
        shopper.fill("input[name=name]", "Ada Lovelace").await;
        shopper.fill("input[name=email]", "ada@example.com").await;
        shopper.click("form.checkout button[type=submit]").await;
        shopper.find("#pay").await;
        shopper.click("#pay").await;
        shopper.wait_for_path("/orders/").await;
        let body = shopper.body().await;
        // the row nearest the stage with two together (row A; its
        // wheelchair places and companion seats are sold only by name)
        let token = shopper
            .path()
            .await
            .trim_start_matches("/orders/")
            .to_owned();
        let line: String = sqlx::query_scalar(
            "select l.name from order_lines l join orders o on o.id = l.order_id \
              where o.token = $1",
        )
        .bind(&token)
        .fetch_one(&app.db.pool)
        .await
        .unwrap();
        let seats = line.rsplit(" — ").next().unwrap().to_owned();
        let numbers: Vec<i32> = seats
            .split(", ")
            .map(|s| s.strip_prefix("A-").expect("row A").parse().unwrap())
            .collect();
        assert!(
            numbers.len() == 2 && numbers[1] == numbers[0] + 1 && (3..=12).contains(&numbers[0]),
            "{line}"
        );
        // each ticket names its own seat
        for seat in seats.split(", ") {
            assert!(
                body.contains(&format!("Stalls, seat {seat}")),
                "{seat} in {body}"
            );
        }
        shopper.screenshot(&format!("order-{size}")).await;
        assert!(fits(&shopper).await, "order ({size}) scrolls sideways");
        let violations = shopper.axe_violations().await;
        assert!(violations.is_empty(), "order: {violations:#?}");
        shopper.close().await;
    }
    assert_no_policy_reports(&app).await;
}
