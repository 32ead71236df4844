//! The pages in a real browser: Debian's Chromium, headless, driven through
//! chromedriver (both installed with apt by the tests when missing). Each
//! test saves screenshots to `screenshots/<test>/` (ignored by git) so a
//! person can look at what the shopper and the staff member saw.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::Ordering;
use std::time::Duration;

use fantoccini::elements::Element;
use fantoccini::{Client, ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;

use holdfast::routes::admin::{ROUTES, Verb};
use holdfast::staff::roles::Role;
use holdfast_testkit::*;

mod admin_pages;
mod basket_pay;
mod door;
mod editors;
mod goals;
mod host_stand;
mod mixed_order;
mod pickup_days;
mod seat_admin;
mod seats;
mod storefront;
mod tables;
mod tickets;

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// Chromium is heavy for two cores: browser tests take turns.
fn turn() -> &'static tokio::sync::Mutex<()> {
    static TURN: OnceLock<tokio::sync::Mutex<()>> = OnceLock::new();
    TURN.get_or_init(|| tokio::sync::Mutex::new(()))
}

/// Debian's chromium and chromium-driver, installed once when missing (as
/// the database's packages are).
fn ensure_installed() {
    static INSTALLED: OnceLock<()> = OnceLock::new();
    INSTALLED.get_or_init(|| {
        if Path::new(CHROMIUM).exists() && Path::new(CHROMEDRIVER).exists() {
            return;
        }
        eprintln!("browser tests: installing Debian's chromium and chromium-driver");
        let apt = |args: &[&str]| {
            Command::new("apt-get")
                .args(args)
                .env("DEBIAN_FRONTEND", "noninteractive")
                .stdout(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        };
        let installed = apt(&["update", "-q"])
            && apt(&["install", "-y", "-q", "--no-install-recommends", "chromium", "chromium-driver"]);
        assert!(
            installed && Path::new(CHROMEDRIVER).exists(),
            "could not install chromium and chromium-driver (apt-get install chromium chromium-driver)"
        );
    });
}

/// A chromedriver of our own, on a free port, killed when dropped.
struct Driver {
    child: Child,
    url: String,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn start_driver() -> Driver {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new(CHROMEDRIVER)
        .arg(format!("--port={port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start chromedriver");
    let driver = Driver {
        child,
        url: format!("http://127.0.0.1:{port}"),
    };
    let probe = holdfast_testkit::http_client();
    for _ in 0..100 {
        if let Ok(response) = probe.get(format!("{}/status", driver.url)).send().await
            && response.status().is_success()
        {
            return driver;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("chromedriver did not start");
}

/// Whether a command failed because the page replaced its element.
/// Whether an element was replaced under the test. Chromium says so as a
/// stale reference, or, when the whole document was replaced between
/// finding and reading, as an "unknown error" naming a node that "does not
/// belong to the document".
fn stale(error: &fantoccini::error::CmdError) -> bool {
    matches!(
        error,
        fantoccini::error::CmdError::Standard(e)
            if e.error == fantoccini::error::ErrorStatus::StaleElementReference
                || (e.error == fantoccini::error::ErrorStatus::UnknownError
                    && e.message.contains("does not belong to the document"))
    )
}

/// One headless browser window with a folder for its screenshots.
struct Browser {
    client: Client,
    shots: PathBuf,
    taken: usize,
}

impl Browser {
    async fn open(driver: &Driver, shots: PathBuf) -> Self {
        let capabilities = serde_json::json!({
            "goog:chromeOptions": {
                "binary": CHROMIUM,
                "args": [
                    "--headless", "--no-sandbox", "--disable-gpu",
                    "--disable-background-networking", "--disable-component-update",
                    "--disable-sync", "--disable-dev-shm-usage", "--window-size=1280,1000",
                ],
            }
        });
        let serde_json::Value::Object(capabilities) = capabilities else {
            unreachable!()
        };
        let client = ClientBuilder::new(HttpConnector::new())
            .capabilities(capabilities)
            .connect(&driver.url)
            .await
            .expect("a browser session");
        std::fs::create_dir_all(&shots).unwrap();
        Self {
            client,
            shots,
            taken: 0,
        }
    }

    async fn go(&self, url: &str) {
        self.client.goto(url).await.unwrap();
    }

    async fn find(&self, css: &str) -> Element {
        self.client
            .wait()
            .at_most(Duration::from_secs(20))
            .for_element(Locator::Css(css))
            .await
            .unwrap_or_else(|e| panic!("no {css} on the page: {e}"))
    }

    /// An element's text. A page that navigates or reloads itself (a
    /// form's answer arriving, `live.js` reloading) can replace the element
    /// between finding and reading it: then it is found again.
    async fn text(&self, css: &str) -> String {
        for _ in 0..50 {
            match self.find(css).await.text().await {
                Ok(text) => return text,
                Err(error) if stale(&error) => tokio::time::sleep(Duration::from_millis(100)).await,
                Err(error) => panic!("reading {css}: {error}"),
            }
        }
        panic!("{css} went stale fifty times");
    }

    async fn click(&self, css: &str) {
        for _ in 0..50 {
            match self.find(css).await.click().await {
                Ok(()) => return,
                Err(error) if stale(&error) => tokio::time::sleep(Duration::from_millis(100)).await,
                Err(error) => panic!("clicking {css}: {error}"),
            }
        }
        panic!("{css} went stale fifty times");
    }

    async fn fill(&self, css: &str, value: &str) {
        let field = self.find(css).await;
        field.clear().await.unwrap();
        field.send_keys(value).await.unwrap();
    }

    async fn body(&self) -> String {
        self.text("body").await
    }

    async fn path(&self) -> String {
        self.client.current_url().await.unwrap().path().to_owned()
    }

    /// Waits (a form's answer may still be on its way) until the element's
    /// text contains `needle`; the text it last read.
    async fn wait_for_text(&self, css: &str, needle: &str) -> String {
        let mut text = String::new();
        for _ in 0..200 {
            text = self.text(css).await;
            if text.contains(needle) {
                return text;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("{css} never said {needle:?}; it says {text:?}");
    }

    /// After an add from a product's card: the shop keeps the shopper on
    /// the page, says so at the card and counts the basket in the header;
    /// the header's link then opens the basket.
    async fn to_basket_after_adding(&self, card: &str) {
        self.wait_for_text(&format!("{card} .added"), "Added to your basket")
            .await;
        assert!(
            !self.text(".basket-link .count").await.is_empty(),
            "the header counts the basket"
        );
        self.click(".basket-link").await;
        self.wait_for_path("/basket").await;
    }

    /// Waits (the page may refresh itself) until the path starts with `prefix`.
    async fn wait_for_path(&self, prefix: &str) {
        for _ in 0..200 {
            if self.path().await.starts_with(prefix) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("never reached {prefix}; at {}", self.path().await);
    }

    /// Waits until the page has left `path` (a form's answer arrived):
    /// `wait_for_path("/admin")` alone is met by `/admin/login` itself.
    async fn wait_to_leave(&self, path: &str) {
        for _ in 0..200 {
            if self.path().await != path {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("never left {path}");
    }

    /// A computed style, to prove the stylesheet loaded under the policy.
    async fn style(&self, css: &str, property: &str) -> String {
        let value = self
            .client
            .execute(
                "return getComputedStyle(document.querySelector(arguments[0]))[arguments[1]];",
                vec![css.into(), property.into()],
            )
            .await
            .unwrap();
        value.as_str().unwrap_or_default().to_owned()
    }

    /// Publish the draft whose editing page this is: "Publish…", then
    /// "Yes, publish"; back on the page, it says so and links to the shop.
    async fn publish(&self, shot: &str) {
        self.click("#publishing summary").await;
        self.click("#publish").await;
        self.wait_for_text("#notice", "Published").await;
        assert!(self.text("#publishing").await.contains("View in shop"));
        self.save_page(shot).await;
    }

    async fn screenshot(&mut self, name: &str) {
        self.taken += 1;
        let png = self.client.screenshot().await.unwrap();
        std::fs::write(
            self.shots.join(format!("{:02}-{name}.png", self.taken)),
            png,
        )
        .unwrap();
    }

    async fn close(self) {
        self.client.close().await.unwrap();
    }

    /// The page fits the window's width: nothing scrolls sideways.
    async fn fits_width(&self) -> bool {
        self.client
            .execute(
                "return document.documentElement.scrollWidth <= window.innerWidth;",
                vec![],
            )
            .await
            .unwrap()
            == serde_json::json!(true)
    }
}

fn shots_for(test: &str) -> PathBuf {
    let folder = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("screenshots")
        .join(test);
    let _ = std::fs::remove_dir_all(&folder);
    folder
}

/// The shop, its demo catalogue and a chromedriver; the guard keeps other
/// browser tests waiting until this one is done.
async fn shop_and_driver() -> (TestApp, Driver, tokio::sync::MutexGuard<'static, ()>) {
    let guard = turn().lock().await;
    ensure_installed();
    let app = spawn_app().await;
    app.load_demo().await;
    let driver = start_driver().await;
    (app, driver, guard)
}

/// Basket to checkout form, as a shopper does it. Ends on the provider's
/// hosted page.
async fn check_out(browser: &mut Browser, app: &TestApp, product: &str, qty: &str, shot: &str) {
    check_out_paying(browser, app, product, qty, shot, None).await
}

/// [`check_out`], choosing a way to pay (`sepa_debit` …) in the basket
/// rather than the first offered.
async fn check_out_paying(
    browser: &mut Browser,
    app: &TestApp,
    product: &str,
    qty: &str,
    shot: &str,
    way: Option<&str>,
) {
    app.settled().await;
    // its collection's page: a schedule's shows its first day's times
    let collection: String = sqlx::query_scalar("select collection from products where id = $1")
        .bind(product)
        .fetch_one(&app.db.pool)
        .await
        .unwrap();
    browser.go(&format!("{}/c/{collection}", app.address)).await;
    let card = format!("li[data-product=\"{product}\"]");
    browser.fill(&format!("{card} input[name=qty]"), qty).await;
    browser.click(&format!("{card} button[type=submit]")).await;
    browser.to_basket_after_adding(&card).await;
    browser.fill("input[name=name]", "Ada Lovelace").await;
    browser.fill("input[name=email]", "ada@example.com").await;
    if let Some(way) = way {
        browser
            .click(&format!("input[name=method][value={way}]"))
            .await;
    }
    browser.screenshot(shot).await;
    browser.click("form.checkout button[type=submit]").await;
    browser.find("#pay").await;
}

async fn assert_no_policy_reports(app: &TestApp) {
    // browsers send reports in the background (the counter test sees one
    // arrive within a few hundred milliseconds); give them a second
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        app.csp_reports.load(Ordering::SeqCst),
        0,
        "the pages broke their own policy"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shopper_books_a_pickup_slot_and_gets_a_pickup_code() {
    let (app, driver, _turn) = shop_and_driver().await;
    let mut browser = Browser::open(&driver, shots_for("pickup-slot")).await;
    let slot = app.db.first_slot().await;

    app.settled().await;
    browser.go(&format!("{}/", app.address)).await;
    assert_eq!(browser.text("header .brand").await, "Shop");
    // a day first: the home page lists the bakery's days, not its slots
    let card = format!("li[data-product=\"{slot}\"]");
    browser.click("#bakery .days li:first-child a").await;
    browser.wait_for_path("/c/bakery").await;
    assert_eq!(browser.text(&format!("{card} .left")).await, "8 left");
    // the stylesheet applied: the policy let it through
    assert_eq!(
        browser.style("header.top", "backgroundColor").await,
        "rgb(255, 255, 255)"
    );
    assert_eq!(
        browser
            .style(&format!("{card} button"), "backgroundColor")
            .await,
        "rgb(11, 110, 79)"
    );
    browser.screenshot("catalogue").await;

    check_out(&mut browser, &app, &slot, "1", "basket").await;
    assert!(browser.body().await.contains("Pay"));
    browser.screenshot("sandbox-hosted-page").await;
    browser.click("#pay").await;

    browser.wait_for_path("/orders/").await;
    let code = browser.text(".code.pickup-code").await;
    assert_eq!(code.len(), 6, "{code}");
    assert!(code.chars().all(|c| c.is_ascii_alphanumeric()));
    assert!(browser.text("h1").await.starts_with("Thank you, Ada"));
    let body = browser.body().await;
    assert!(body.contains("Your order is paid: €"), "{body}");
    assert!(body.contains("Say it at the counter"));
    browser.screenshot("order-with-pickup-code").await;

    // the same code is the one stored, and the slot shows one fewer
    let stored: String = sqlx::query_scalar("select code from order_items")
        .fetch_one(&app.db.pool)
        .await
        .unwrap();
    assert_eq!(stored, code);
    app.settled().await;
    browser.go(&format!("{}/c/bakery", app.address)).await;
    assert_eq!(browser.text(&format!("{card} .left")).await, "7 left");
    assert_no_policy_reports(&app).await;
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shopper_buys_two_tickets_and_gets_two_ticket_codes() {
    let (app, driver, _turn) = shop_and_driver().await;
    let mut browser = Browser::open(&driver, shots_for("tickets")).await;
    check_out(&mut browser, &app, "harbour-lights-general", "2", "basket").await;
    browser.screenshot("sandbox-hosted-page").await;
    browser.click("#pay").await;
    browser.wait_for_path("/orders/").await;
    browser.find(".ticket-code").await;
    let codes = browser
        .client
        .find_all(Locator::Css(".ticket-code"))
        .await
        .unwrap();
    let mut texts = Vec::new();
    for code in codes {
        texts.push(code.text().await.unwrap());
    }
    assert_eq!(texts.len(), 2, "{texts:?}");
    assert!(texts.iter().all(|t| t.starts_with("TKT-")), "{texts:?}");
    assert_ne!(texts[0], texts[1]);
    assert_eq!(browser.text("h2").await, "Your tickets");
    browser.screenshot("order-with-tickets").await;
    assert_no_policy_reports(&app).await;
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_second_browser_loses_the_last_unit_and_is_told_so() {
    let (app, driver, _turn) = shop_and_driver().await;
    // one VIP place left
    app.db
        .inventory()
        .upsert_resource(
            &rid("harbour-lights-vip"),
            holdfast::inventory::Capacity::parse(1).unwrap(),
        )
        .await
        .unwrap();
    let mut first = Browser::open(&driver, shots_for("last-unit/first")).await;
    let mut second = Browser::open(&driver, shots_for("last-unit/second")).await;
    // both have it in their basket before either checks out
    for browser in [&mut first, &mut second] {
        app.settled().await;
        browser.go(&format!("{}/", app.address)).await;
        assert_eq!(
            browser
                .text("li[data-product=\"harbour-lights-vip\"] .left")
                .await,
            "1 left"
        );
        browser
            .click("li[data-product=\"harbour-lights-vip\"] button[type=submit]")
            .await;
        browser
            .to_basket_after_adding("li[data-product=\"harbour-lights-vip\"]")
            .await;
        browser.fill("input[name=name]", "Ada Lovelace").await;
        browser.fill("input[name=email]", "ada@example.com").await;
    }
    first.click("form.checkout button[type=submit]").await;
    first.find("#pay").await;
    first.screenshot("got-the-last-place").await;

    second.click("form.checkout button[type=submit]").await;
    let alert = second.text(".alert").await;
    assert!(
        alert.contains("Some of your basket is no longer available"),
        "{alert}"
    );
    assert!(alert.contains("Harbour Lights — VIP: sold out"), "{alert}");
    assert!(alert.contains("Nothing was reserved or charged"));
    second.screenshot("no-longer-available").await;

    first.click("#pay").await;
    first.wait_for_path("/orders/").await;
    first.find(".ticket-code").await;
    first.screenshot("paid").await;
    app.settled().await;
    second.go(&format!("{}/", app.address)).await;
    assert_eq!(
        second
            .text("li[data-product=\"harbour-lights-vip\"] .left")
            .await,
        "Sold out"
    );
    second.screenshot("sold-out-card").await;
    let status = app
        .db
        .inventory()
        .status(&rid("harbour-lights-vip"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!((status.sold, status.held, status.available), (1, 0, 0));
    assert_no_policy_reports(&app).await;
    first.close().await;
    second.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sold_out_while_someone_pays_is_not_final_and_the_pages_see_units_come_back() {
    let (app, driver, _turn) = shop_and_driver().await;
    app.db
        .inventory()
        .upsert_resource(
            &rid("harbour-lights-vip"),
            holdfast::inventory::Capacity::parse(1).unwrap(),
        )
        .await
        .unwrap();
    app.settled().await;
    let vip = "li[data-product=\"harbour-lights-vip\"]";
    let mut payer = Browser::open(&driver, shots_for("not-final/payer")).await;
    let mut loser = Browser::open(&driver, shots_for("not-final/loser")).await;
    let mut watcher = Browser::open(&driver, shots_for("not-final/watcher")).await;
    for browser in [&mut payer, &mut loser] {
        app.settled().await;
        browser.go(&format!("{}/", app.address)).await;
        browser.click(&format!("{vip} button[type=submit]")).await;
        browser.to_basket_after_adding(vip).await;
        browser.fill("input[name=name]", "Ada Lovelace").await;
        browser.fill("input[name=email]", "ada@example.com").await;
    }
    payer.click("form.checkout button[type=submit]").await;
    payer.find("#pay").await;

    // the one who lost the race: the 409 page says the place may come back
    loser.click("form.checkout button[type=submit]").await;
    let alert = loser.text(".alert").await;
    assert!(alert.contains("Harbour Lights — VIP: sold out"), "{alert}");
    let note = loser.text(".alert .live-note").await;
    assert!(
        note.starts_with("Sold out for now: 1 reserved by shoppers who are paying."),
        "{note}"
    );
    assert!(note.contains("the first come back by "), "{note}");
    loser.screenshot("sold-out-for-now").await;
    // a shopper looking at the product page is told the same
    app.settled().await;
    watcher.go(&format!("{}/", app.address)).await;
    assert_eq!(watcher.text(&format!("{vip} .left")).await, "Sold out");
    let note = watcher.text(&format!("{vip} .live-note")).await;
    assert!(
        note.contains("1 reserved by shoppers who are paying"),
        "{note}"
    );
    watcher.screenshot("product-page-pending").await;

    // the payer goes back to the shop: the cancel URL asks first
    payer.click("#abandon").await;
    payer.wait_for_path("/checkout/cancel/").await;
    payer.wait_for_text("h1", "Leave checkout?").await;
    assert_eq!(
        app.db
            .inventory()
            .status(&rid("harbour-lights-vip"))
            .await
            .unwrap()
            .unwrap()
            .held,
        1,
        "asking changed nothing"
    );
    payer.screenshot("leave-checkout").await;
    payer.click("form button[type=submit]").await;
    payer.wait_for_text("h1", "Checkout cancelled").await;

    // both pages see the place come back by themselves, told by the shop
    let mut noticed = String::new();
    for _ in 0..50 {
        noticed = loser.text(".alert .live-note").await;
        if noticed.starts_with("Back on sale") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(noticed, "Back on sale: 1 left. Press Pay to try again.");
    loser.screenshot("back-on-sale").await;
    // the product page reloads itself with the form back
    watcher.find(&format!("{vip} button[type=submit]")).await;
    assert_eq!(watcher.text(&format!("{vip} .left")).await, "1 left");
    watcher.screenshot("product-page-back").await;
    // and the loser's Pay button now works
    loser.click("form.checkout button[type=submit]").await;
    loser.find("#pay").await;
    assert_no_policy_reports(&app).await;
    payer.close().await;
    loser.close().await;
    watcher.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn staff_find_a_hold_release_it_and_see_the_units_come_back() {
    let (app, driver, _turn) = shop_and_driver().await;
    app.add_staff().await;
    // a shopper holding three jars, gone quiet on the payment page
    let mut shopper = Browser::open(&driver, shots_for("staff/shopper")).await;
    check_out(&mut shopper, &app, "wild-honey", "3", "basket").await;
    app.settled().await;
    shopper.go(&format!("{}/", app.address)).await;
    assert_eq!(
        shopper.text("li[data-product=\"wild-honey\"] .left").await,
        "37 left"
    );

    let mut staff = Browser::open(&driver, shots_for("staff/staff")).await;
    staff.go(&format!("{}/admin/holds", app.address)).await;
    staff.wait_for_path("/admin/login").await;
    staff.fill("input[name=email]", STAFF_EMAIL).await;
    staff.fill("input[name=password]", "a wrong password").await;
    staff.click("#login button[type=submit]").await;
    assert!(staff.text("#login-error").await.contains("do not match"));
    staff.screenshot("login-refused").await;
    staff.fill("input[name=password]", STAFF_PASSWORD).await;
    staff.click("#login button[type=submit]").await;
    staff.find("#live").await;
    staff.screenshot("home").await;
    staff
        .click("nav.admin-nav a[href=\"/admin/resources\"]")
        .await;
    staff.wait_for_path("/admin/resources").await;
    let row = "tr[data-resource=\"wild-honey\"]";
    assert_eq!(staff.text(&format!("{row} td.available")).await, "37");
    staff.screenshot("resources").await;

    staff.click("nav.admin-nav a[href=\"/admin/holds\"]").await;
    staff.wait_for_path("/admin/holds").await;
    let hold: uuid::Uuid =
        sqlx::query_scalar("select id from holds where resource_id = 'wild-honey'")
            .fetch_one(&app.db.pool)
            .await
            .unwrap();
    let hold_row = format!("tr[data-hold=\"{hold}\"]");
    assert!(staff.text(&hold_row).await.contains("Ada Lovelace"));
    assert!(staff.text(&hold_row).await.contains("awaiting_payment"));
    staff.screenshot("holds").await;
    staff.click(&format!("{hold_row} a")).await;
    staff.wait_for_path(&format!("/admin/holds/{hold}")).await;
    let history = staff.text("#events").await;
    assert!(
        history.contains("held") && history.contains("payment_started"),
        "{history}"
    );
    staff.screenshot("hold-with-history").await;

    staff.click("#release button[type=submit]").await;
    assert!(staff.text("#notice").await.contains("Released"));
    assert_eq!(staff.text("#hold-state").await, "released");
    assert!(
        staff
            .text("#events")
            .await
            .contains(&format!("staff:{STAFF_EMAIL}"))
    );
    staff.screenshot("released").await;

    staff.go(&format!("{}/admin/resources", app.address)).await;
    assert_eq!(staff.text(&format!("{row} td.available")).await, "40");
    staff.screenshot("resources-after").await;
    // and the shop shows them again
    app.settled().await;
    shopper.go(&format!("{}/", app.address)).await;
    assert_eq!(
        shopper.text("li[data-product=\"wild-honey\"] .left").await,
        "40 left"
    );
    shopper.screenshot("catalogue-after-release").await;

    staff.go(&format!("{}/admin/activity", app.address)).await;
    let activity = staff.text("#activity").await;
    assert!(activity.contains("released the hold"), "{activity}");
    staff.screenshot("activity").await;
    assert_no_policy_reports(&app).await;
    staff.close().await;
    shopper.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_policy_report_counter_does_count_a_violation() {
    // the check above is only worth something if a violation would show
    let (app, driver, _turn) = shop_and_driver().await;
    let browser = Browser::open(&driver, shots_for("policy")).await;
    app.settled().await;
    browser.go(&format!("{}/", app.address)).await;
    browser
        .client
        .execute(
            "var s = document.createElement('script'); s.textContent = 'window.injected = 1'; \
             document.body.appendChild(s); return window.injected === undefined;",
            vec![],
        )
        .await
        .map(|blocked| assert_eq!(blocked, serde_json::Value::Bool(true), "inline script ran"))
        .unwrap();
    for _ in 0..50 {
        if app.csp_reports.load(Ordering::SeqCst) > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        app.csp_reports.load(Ordering::SeqCst) >= 1,
        "no report arrived"
    );
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shopper_reads_the_mail_and_staff_redeem_the_ticket_at_the_door() {
    let (app, driver, _turn) = shop_and_driver().await;
    app.add_staff().await;
    let smtp = app.sandbox.smtp();
    let mailer = holdfast::worker::mail::Mailer::new(
        &smtp,
        "Holdfast shop <shop@holdfast.test>",
        holdfast::clock::ShopZone::UTC,
        &app.address,
    )
    .unwrap();

    // two VIP tickets, paid on the sandbox's page
    let mut shopper = Browser::open(&driver, shots_for("after-the-sale/shopper")).await;
    check_out(&mut shopper, &app, "harbour-lights-vip", "2", "basket").await;
    shopper.click("#pay").await;
    shopper.wait_for_path("/orders/").await;
    let tickets: Vec<String> = sqlx::query_scalar("select code from order_items order by code")
        .fetch_all(&app.db.pool)
        .await
        .unwrap();
    assert_eq!(tickets.len(), 2);
    // the worker mails the confirmation
    let outbox =
        holdfast::worker::outbox::Outbox::new(app.db.pool.clone(), app.sandbox.providers())
            .with_mailer(Some(mailer));
    for _ in 0..50 {
        outbox.drain().await.unwrap();
        if !app.sandbox.mail.messages().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(app.sandbox.mail.messages().len(), 1);

    // the shopper reads it on the sandbox's mail page and follows the link
    shopper.go(&format!("{}/mail", app.sandbox.base)).await;
    assert!(shopper.text("#inbox").await.contains("Your order is paid"));
    shopper.screenshot("mailbox").await;
    shopper.click("#inbox a").await;
    shopper.wait_for_path("/mail/0").await;
    let mail = shopper.text("#raw").await;
    for code in &tickets {
        assert!(mail.contains(code.as_str()), "{mail}");
    }
    shopper.screenshot("confirmation-mail").await;
    shopper.click("#links a.link").await;
    shopper.wait_for_path("/orders/").await;
    assert!(shopper.text("h1").await.starts_with("Thank you, Ada"));
    shopper.screenshot("order-page-from-the-mail").await;

    // at the door: staff redeem the first ticket, then someone tries again
    let mut staff = Browser::open(&driver, shots_for("after-the-sale/staff")).await;
    staff.go(&format!("{}/admin/redeem", app.address)).await;
    staff.wait_for_path("/admin/login").await;
    staff.fill("input[name=email]", STAFF_EMAIL).await;
    staff.fill("input[name=password]", STAFF_PASSWORD).await;
    staff.click("#login button[type=submit]").await;
    staff.find("#live").await;
    staff.go(&format!("{}/admin/redeem", app.address)).await;
    staff.screenshot("redeem-choose").await;
    // the door first chooses what it checks: the one event
    staff.click("#door-event-list a").await;
    staff.wait_for_text("#door-count", "expected").await;
    staff.screenshot("redeem-form").await;
    staff.fill("#code", &tickets[0].to_lowercase()).await;
    staff.fill("input[name=place]", "North door").await;
    staff.click("#redeem button[type=submit]").await;
    let verdict = staff.wait_for_text("#verdict", "Admitted").await;
    assert!(verdict.contains("Ada Lovelace"), "{verdict}");
    staff.screenshot("admitted").await;
    staff.fill("#code", &tickets[0]).await;
    staff.click("#redeem button[type=submit]").await;
    let verdict = staff.wait_for_text("#verdict", "Already used").await;
    assert!(
        verdict.contains("North door") && verdict.contains(STAFF_EMAIL),
        "{verdict}"
    );
    staff.screenshot("already-used").await;

    // the shopper's page shows the ticket used
    let order_url = shopper.client.current_url().await.unwrap();
    shopper.go(order_url.as_ref()).await;
    let used = shopper.text("li.used .used-note").await;
    assert!(used.starts_with("Admitted "), "{used}");
    shopper.screenshot("order-page-ticket-used").await;
    assert_no_policy_reports(&app).await;
    shopper.close().await;
    staff.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_doors_list_is_printed_without_the_menus() {
    let (app, driver, _turn) = shop_and_driver().await;
    app.add_staff().await;
    for (i, name) in ["Zed Last", "amy First", "Bo Middle"].iter().enumerate() {
        let order = holdfast_testkit::engine::paid(
            &app.db,
            &format!("print-{i}"),
            &[("harbour-lights-general", 2)],
        )
        .await;
        sqlx::query("update orders set customer_name = $2 where id = $1")
            .bind(order.id)
            .bind(name)
            .execute(&app.db.pool)
            .await
            .unwrap();
    }
    let mut staff = Browser::open(&driver, shots_for("door-list")).await;
    staff.go(&format!("{}/admin/exports", app.address)).await;
    staff.wait_for_path("/admin/login").await;
    staff.fill("input[name=email]", STAFF_EMAIL).await;
    staff.fill("input[name=password]", STAFF_PASSWORD).await;
    staff.click("#login button[type=submit]").await;
    staff.find("#live").await;
    staff
        .click("nav.admin-nav a[href=\"/admin/exports\"]")
        .await;
    staff.wait_for_path("/admin/exports").await;
    staff.screenshot("exports").await;

    // the box office prints the door's list for the door
    sqlx::query("update staff set role = 'box_office' where email = $1")
        .bind(STAFF_EMAIL)
        .execute(&app.db.pool)
        .await
        .unwrap();
    staff.go(&format!("{}/admin/orders", app.address)).await;
    staff.wait_for_path("/admin/orders").await;
    staff
        .click("nav.admin-nav a[href=\"/admin/door-list\"]")
        .await;
    staff.wait_for_path("/admin/door-list").await;
    staff.screenshot("door-lists").await;
    staff
        .click("#door-lists a[href=\"/admin/door-list?collection=harbour-lights\"]")
        .await;
    staff.wait_for_path("/admin/door-list").await;
    let list = staff.text("#door-list tbody").await;
    let (amy, bo, zed) = (
        list.find("amy First").unwrap(),
        list.find("Bo Middle").unwrap(),
        list.find("Zed Last").unwrap(),
    );
    assert!(amy < bo && bo < zed, "{list}");
    assert_eq!(staff.style(".tick", "border-top-style").await, "solid");
    assert_eq!(staff.style("header.top", "display").await, "flex");
    staff.screenshot("door-list").await;
    // as on paper: Chromium told to lay the page out for print media
    let session = staff.client.session_id().await.unwrap().unwrap();
    let emulated = http_client()
        .post(format!("{}/session/{session}/goog/cdp/execute", driver.url))
        .json(&serde_json::json!({
            "cmd": "Emulation.setEmulatedMedia",
            "params": { "media": "print" },
        }))
        .send()
        .await
        .unwrap();
    assert!(
        emulated.status().is_success(),
        "{:?}",
        emulated.text().await
    );
    assert_eq!(staff.style("header.top", "display").await, "none");
    assert_eq!(staff.style("p.no-print", "display").await, "none");
    assert_eq!(
        staff.style("#door-list thead", "display").await,
        "table-header-group"
    );
    assert_eq!(
        staff.style("#door-list tbody tr", "break-inside").await,
        "avoid"
    );
    assert_eq!(staff.style(".tick", "border-top-style").await, "solid");
    staff.screenshot("door-list-as-printed").await;
    let pdf = staff
        .client
        .print(fantoccini::wd::PrintConfiguration::default())
        .await
        .unwrap();
    assert!(pdf.starts_with(b"%PDF-"), "a PDF");
    std::fs::write(staff.shots.join("door-list.pdf"), &pdf).unwrap();
    assert_no_policy_reports(&app).await;
    staff.close().await;
}

/// The owner's new pages from the keyboard: two-factor set up by reading
/// the key off the page and typing a code (Enter submits), the second step
/// of signing in, the Staff page (someone invited, who chooses their
/// password on the invite's page), and the Settings page
/// (two-factor required of everyone who can refund). Screenshots of each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_sets_up_two_factor_staff_and_settings_from_the_keyboard() {
    use fantoccini::key::Key;

    let (app, driver, _turn) = shop_and_driver().await;
    app.add_staff().await;
    let mut owner = Browser::open(&driver, shots_for("staff-two-factor")).await;
    owner.go(&format!("{}/admin/login", app.address)).await;
    owner.fill("input[name=email]", STAFF_EMAIL).await;
    owner
        .fill(
            "input[name=password]",
            &format!("{STAFF_PASSWORD}{}", Key::Enter),
        )
        .await;
    owner.find("#live").await;

    owner
        .click("nav.admin-nav a[href=\"/admin/two-factor\"]")
        .await;
    owner.wait_for_path("/admin/two-factor").await;
    owner.screenshot("two-factor-off").await;
    owner.click("#start button[type=submit]").await;
    let secret = owner.text("#secret").await.replace(' ', "");
    assert_eq!(secret.len(), 32, "{secret}");
    // the QR code is an image the policy allows (data:), drawn at its size
    let width = owner
        .client
        .execute(
            "const img = document.querySelector('img.qr'); return img.complete ? img.naturalWidth : 0;",
            vec![],
        )
        .await
        .unwrap();
    assert!(width.as_u64().unwrap_or(0) > 100, "{width:?}");
    owner.screenshot("two-factor-enrol").await;
    let code = crate::two_factor::code_at(&secret, crate::two_factor::now());
    owner
        .fill(
            "#confirm input[name=code]",
            &format!("{code}{}", Key::Enter),
        )
        .await;
    let codes = owner
        .wait_for_text("#recovery-codes", "shown only now")
        .await;
    assert_eq!(
        codes
            .lines()
            .filter(|l| l.matches('-').count() == 3)
            .count(),
        10,
        "{codes}"
    );
    owner.screenshot("two-factor-recovery-codes").await;

    owner.click("nav.admin-nav a[href=\"/admin/staff\"]").await;
    owner.wait_for_path("/admin/staff").await;
    owner
        .fill("#add-staff input[name=email]", "box@holdfast.test")
        .await;
    owner
        .client
        .execute(
            "document.querySelector('#add-staff select[name=role]').value = 'box_office';",
            vec![],
        )
        .await
        .unwrap();
    owner.click("#add-staff button[type=submit]").await;
    owner.wait_for_text("#notice", "Invite sent").await;
    assert!(
        owner
            .text("[data-invite=\"box@holdfast.test\"]")
            .await
            .contains("Box office")
    );
    owner.screenshot("staff-invite-sent").await;
    owner.client.set_window_size(390, 844).await.unwrap();
    owner
        .client
        .execute(
            "document.querySelector('#invites').scrollIntoView();",
            vec![],
        )
        .await
        .unwrap();
    owner.screenshot("staff-invite-sent-phone").await;
    owner.client.set_window_size(1280, 900).await.unwrap();
    // the invitee's link, as the mail carries it (staff_invites: proves
    // the mail itself through the sandbox's SMTP server)
    let token: String = sqlx::query_scalar(
        "select payload ->> 'token' from outbox_jobs where kind = 'staff_invite'",
    )
    .fetch_one(&app.db.pool)
    .await
    .unwrap();
    for (width, height, size) in [(390, 844, "phone"), (1280, 900, "desk")] {
        owner.client.set_window_size(width, height).await.unwrap();
        owner
            .go(&format!("{}/admin/invite/{token}", app.address))
            .await;
        owner.find("#invite").await;
        assert_eq!(owner.axe_violations().await, Vec::<String>::new(), "{size}");
        owner.screenshot(&format!("invite-{size}")).await;
    }
    owner
        .fill("#invite input[name=password]", "a long enough passphrase")
        .await;
    owner
        .fill(
            "#invite input[name=again]",
            &format!("a long enough passphrase{}", Key::Enter),
        )
        .await;
    owner.wait_for_text("h1", "Your account is ready").await;
    owner.screenshot("invite-accepted").await;
    owner.go(&format!("{}/admin/staff", app.address)).await;
    assert!(
        owner
            .text("tr[data-staff=\"box@holdfast.test\"] .role")
            .await
            .contains("Box office")
    );
    assert!(
        owner
            .text(&format!("tr[data-staff=\"{STAFF_EMAIL}\"] .two-factor"))
            .await
            .contains("on")
    );
    owner.screenshot("staff").await;

    owner
        .click("nav.admin-nav a[href=\"/admin/settings\"]")
        .await;
    owner.wait_for_path("/admin/settings").await;
    owner
        .click("#settings input[name=two_factor_for_refunds]")
        .await;
    owner.click("#settings button[type=submit]").await;
    owner.wait_for_text("#notice", "Settings saved").await;
    owner.screenshot("settings").await;
    assert!(
        holdfast::staff::two_factor::required_for_refunds(&app.db.pool)
            .await
            .unwrap()
    );

    // signing in again: the password, then the code, from the keyboard
    owner.click("nav.admin-nav button.link").await;
    owner.wait_for_path("/admin/login").await;
    owner.fill("input[name=email]", STAFF_EMAIL).await;
    owner
        .fill(
            "input[name=password]",
            &format!("{STAFF_PASSWORD}{}", Key::Enter),
        )
        .await;
    owner.wait_for_path("/admin/login/code").await;
    let next = crate::two_factor::code_at(&secret, crate::two_factor::now() + 30);
    owner.screenshot("sign-in-code").await;
    owner
        .fill(
            "#login-code input[name=code]",
            &format!("{next}{}", Key::Enter),
        )
        .await;
    owner.find("#live").await;

    // the box office account is sent to set two-factor up first
    let mut boxed = Browser::open(&driver, shots_for("staff-two-factor/box-office")).await;
    boxed.go(&format!("{}/admin/login", app.address)).await;
    boxed.fill("input[name=email]", "box@holdfast.test").await;
    boxed
        .fill(
            "input[name=password]",
            &format!("a long enough passphrase{}", Key::Enter),
        )
        .await;
    boxed.wait_for_path("/admin/two-factor").await;
    assert!(boxed.text("#notice").await.contains("set it up to go on"));
    boxed.screenshot("must-enrol").await;
    assert_no_policy_reports(&app).await;
    boxed.close().await;
    owner.close().await;
}

/// Where the admin's pages are saved for people to look at:
/// `target/screenshots/` (under `CARGO_TARGET_DIR` when it is set).
fn target_screenshots() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target"));
    let folder = target.join("screenshots");
    std::fs::create_dir_all(&folder).unwrap();
    folder
}

/// axe-core's source, installed from npm into `.holdfast/axe` when missing.
fn axe_source() -> &'static str {
    static SOURCE: OnceLock<String> = OnceLock::new();
    SOURCE.get_or_init(|| {
        let dir = workspace_root().join(".holdfast/axe");
        let file = dir.join(format!("node_modules/axe-core-{AXE_VERSION}.js"));
        let installed = dir.join("node_modules/axe-core/axe.min.js");
        if !file.exists() {
            std::fs::create_dir_all(&dir).unwrap();
            let status = Command::new("npm")
                .args(["install", "--silent", "--no-audit", "--no-fund"])
                .arg(format!("axe-core@{AXE_VERSION}"))
                .current_dir(&dir)
                .status()
                .expect("npm runs");
            assert!(
                status.success(),
                "npm install axe-core@{AXE_VERSION} failed"
            );
            std::fs::copy(&installed, &file).unwrap();
        }
        std::fs::read_to_string(&file).unwrap()
    })
}

/// The axe-core release the pages are checked with.
const AXE_VERSION: &str = "4.10.3";

impl Browser {
    /// What axe-core finds against WCAG 2.1 A and AA on the page as it
    /// is: one line per rule broken, with the elements that break it.
    async fn axe_violations(&self) -> Vec<String> {
        let script = format!(
            "{}\nconst done = arguments[arguments.length - 1];\n\
             axe.run(document, {{runOnly: {{type: 'tag', values: \
             ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa']}}}})\n\
             .then(r => done(r.violations.map(v => v.id + ': ' + \
             v.nodes.map(n => n.target.join(' ')).join(', '))))\n\
             .catch(e => done(['axe failed: ' + e]));",
            axe_source()
        );
        let found = self.client.execute_async(&script, vec![]).await.unwrap();
        found
            .as_array()
            .map(|v| {
                v.iter()
                    .map(|l| l.as_str().unwrap_or("").to_owned())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The whole page as `target/screenshots/<name>.png`.
    async fn save_page(&self, name: &str) {
        // as tall as the page, so a long form is seen whole
        let height = self
            .client
            .execute("return document.documentElement.scrollHeight;", vec![])
            .await
            .unwrap()
            .as_u64()
            .unwrap_or(1000)
            .clamp(600, 4000) as u32;
        self.client.set_window_size(1280, height).await.unwrap();
        let png = self.client.screenshot().await.unwrap();
        std::fs::write(target_screenshots().join(format!("{name}.png")), png).unwrap();
        self.client.set_window_size(1280, 1000).await.unwrap();
        let violations = self.axe_violations().await;
        assert!(
            violations.is_empty(),
            "{name}: WCAG 2.1 A/AA: {violations:#?}"
        );
    }

    async fn tick(&self, css: &str) {
        self.click(css).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sale_set_up_in_the_admin_is_sold_with_a_voucher_exported_and_let_in_at_the_door() {
    let (app, driver, _turn) = shop_and_driver().await;
    app.add_staff().await;
    let mut owner = Browser::open(&driver, shots_for("catalogue-admin")).await;
    owner.go(&format!("{}/admin/login", app.address)).await;
    owner.fill("input[name=email]", STAFF_EMAIL).await;
    owner.fill("input[name=password]", STAFF_PASSWORD).await;
    owner.click("#login button[type=submit]").await;
    owner.find("#live").await;

    owner
        .click("nav.admin-nav a[href=\"/admin/catalogue\"]")
        .await;
    owner.wait_for_path("/admin/catalogue").await;
    assert!(owner.text("main").await.contains("Harbour Lights"));
    owner.save_page("catalogue").await;

    // an event, refused once (no date), then made
    owner
        .click("#create a[href=\"/admin/catalogue/events/new\"]")
        .await;
    owner.wait_for_path("/admin/catalogue/events/new").await;
    owner.save_page("event-new").await;
    owner.fill("#f-title", "Midsummer on the pier").await;
    owner.fill("#f-lede", "Two tiers, one long evening.").await;
    // no date picked
    owner.click("#event-form button[type=submit]").await;
    let errors = owner
        .wait_for_text("#form-errors", "Nothing was saved")
        .await;
    assert!(errors.contains("is needed"), "{errors}");
    assert_eq!(
        owner
            .find("#f-starts_at")
            .await
            .attr("aria-describedby")
            .await
            .unwrap()
            .as_deref(),
        Some("f-starts_at-hint f-starts_at-error")
    );
    owner.save_page("event-refused").await;
    // the pickers, in the shop's time (set as a picker sets them)
    owner
        .client
        .execute(
            "document.querySelector('#f-starts_at').value = '2030-06-21T20:00'; \
             document.querySelector('#f-doors_at').value = '19:00';",
            vec![],
        )
        .await
        .unwrap();
    owner.fill("#f-venue", "Pier 4").await;
    owner.click("#event-form button[type=submit]").await;
    owner
        .wait_for_path("/admin/catalogue/events/midsummer-on-the-pier")
        .await;
    assert!(owner.text("#notice").await.contains("Event created"));

    // its two tiers
    for (name, price, capacity) in [("General", "30", "150"), ("Front row", "65.50", "20")] {
        owner.click("#add-tier").await;
        owner
            .wait_for_path("/admin/catalogue/events/midsummer-on-the-pier/tiers/new")
            .await;
        owner.fill("#f-name", name).await;
        owner
            .fill("#f-description", "Standing; doors at 19:00.")
            .await;
        owner.fill("#f-price", price).await;
        owner.fill("#f-capacity", capacity).await;
        if name == "General" {
            owner.save_page("tier-new").await;
        }
        owner.click("#tier-form button[type=submit]").await;
        owner.wait_for_text("#notice", "Tier added").await;
    }
    let tiers = owner.text("#tiers").await;
    assert!(
        tiers.contains("Front row") && tiers.contains("€65.50"),
        "{tiers}"
    );
    owner.save_page("event-with-tiers").await;
    // a draft until published (asked first), then "View in shop"
    assert!(
        owner
            .text("#publishing")
            .await
            .contains("Not in the shop yet")
    );
    owner.publish("event-published").await;
    owner
        .click("tr[data-tier=\"midsummer-on-the-pier-general\"] a")
        .await;
    owner
        .wait_for_path(
            "/admin/catalogue/events/midsummer-on-the-pier/tiers/midsummer-on-the-pier-general",
        )
        .await;
    owner.save_page("tier").await;

    // a pickup schedule, published on saving
    owner
        .go(&format!("{}/admin/catalogue/schedules/new", app.address))
        .await;
    owner.fill("#f-title", "Cake pickup").await;
    owner.fill("#f-name", "Birthday cake").await;
    owner.fill("#f-price", "24").await;
    owner.fill("#f-capacity", "3").await;
    for day in ["3", "5", "6"] {
        owner
            .tick(&format!("input[name=weekday][value=\"{day}\"]"))
            .await;
    }
    owner.fill("#f-opens", "10:00").await;
    owner.fill("#f-closes", "12:00").await;
    owner.fill("#f-slot_minutes", "60").await;
    owner.fill("#f-days_ahead", "13").await;
    owner.save_page("schedule-new").await;
    owner.click("#schedule-form button[type=submit]").await;
    owner
        .wait_for_path("/admin/catalogue/schedules/cake-pickup")
        .await;
    assert!(owner.text("#notice").await.contains("Schedule saved: "));
    owner.save_page("schedule").await;
    owner.publish("schedule-published").await;

    // a stock item on the pantry's shelf
    owner
        .go(&format!("{}/admin/catalogue/stock/new", app.address))
        .await;
    owner.fill("#f-name", "Elderflower cordial").await;
    owner.fill("#f-shelf", "Pantry").await;
    owner.fill("#f-price", "7.50").await;
    owner.fill("#f-capacity", "40").await;
    owner.save_page("stock-new").await;
    owner.click("#stock-form button[type=submit]").await;
    owner
        .wait_for_path("/admin/catalogue/stock/elderflower-cordial")
        .await;
    assert!(owner.text("#notice").await.contains("Stock item created"));
    owner.save_page("stock").await;
    owner.publish("stock-published").await;

    // the box office makes a voucher for the front row
    app.add_staff_as("box@holdfast.test", Role::BoxOffice).await;
    let boxed = Browser::open(&driver, shots_for("catalogue-admin/box-office")).await;
    boxed.go(&format!("{}/admin/login", app.address)).await;
    boxed.fill("input[name=email]", "box@holdfast.test").await;
    boxed.fill("input[name=password]", PASSWORD).await;
    boxed.click("#login button[type=submit]").await;
    boxed.wait_for_path("/admin/orders").await;
    boxed
        .click("nav.admin-nav a[href=\"/admin/vouchers\"]")
        .await;
    boxed.wait_for_path("/admin/vouchers").await;
    boxed.click("#new-voucher").await;
    boxed.wait_for_path("/admin/vouchers/new").await;
    boxed.fill("#f-code", "midsummer-10").await;
    boxed.fill("#f-percent", "10").await;
    boxed.fill("#f-uses", "25").await;
    // the products grouped by event, folded: the filter finds the tier
    // and opens its event's group
    boxed
        .fill("#product-picks input[type=search]", "front row")
        .await;
    boxed
        .tick("input[name=products][value='midsummer-on-the-pier-front-row']")
        .await;
    assert!(
        !boxed
            .find("input[name=products][value='harbour-lights-vip']")
            .await
            .is_displayed()
            .await
            .unwrap(),
        "what the filter leaves out is hidden"
    );
    boxed.tick("#f-per_buyer").await;
    boxed.save_page("voucher-new").await;
    boxed.click("#voucher-form button[type=submit]").await;
    boxed.wait_for_text("#notice", "Voucher created").await;
    let row = boxed.text("tr[data-voucher=\"MIDSUMMER-10\"]").await;
    assert!(row.contains("10%") && row.contains("25"), "{row}");
    boxed.save_page("vouchers").await;

    // the shop shows what was made
    app.settled().await;
    owner.go(&format!("{}/", app.address)).await;
    let home = owner.body().await;
    for shown in [
        "Midsummer on the pier",
        "Front row",
        "Cake pickup",
        "Elderflower cordial",
    ] {
        assert!(home.contains(shown), "{shown}: {home}");
    }
    owner.screenshot("shop").await;

    // a shopper buys two front-row tickets with the code, pays on the
    // sandbox's page, and is charged 2 × 65.50 less 10%
    let mut shopper = Browser::open(&driver, shots_for("catalogue-admin/shopper")).await;
    shopper.go(&format!("{}/", app.address)).await;
    let card = "li[data-product=\"midsummer-on-the-pier-front-row\"]";
    shopper.fill(&format!("{card} input[name=qty]"), "2").await;
    shopper.click(&format!("{card} button[type=submit]")).await;
    shopper.to_basket_after_adding(card).await;
    // the voucher is applied in the basket: the new total before paying
    shopper
        .fill("form.voucher input[name=voucher]", "midsummer-10")
        .await;
    shopper.click("form.voucher button[type=submit]").await;
    shopper.wait_for_text("#voucher-off", "−€13.10").await;
    assert_eq!(
        shopper.text("form.checkout button[type=submit]").await,
        "Pay €117.90"
    );
    shopper.fill("input[name=name]", "Ada Lovelace").await;
    shopper.fill("input[name=email]", "ada@example.com").await;
    shopper.screenshot("basket-with-voucher").await;
    let violations = shopper.axe_violations().await;
    assert!(
        violations.is_empty(),
        "basket-with-voucher: {violations:#?}"
    );
    shopper.click("form.checkout button[type=submit]").await;
    shopper.find("#pay").await;
    let hosted = shopper.body().await;
    assert!(
        hosted.contains("117.90"),
        "the provider is asked for 117.90: {hosted}"
    );
    shopper.click("#pay").await;
    shopper.wait_for_path("/orders/").await;
    let order = shopper.wait_for_text("main", "Your order is paid").await;
    assert!(order.contains("€117.90"), "{order}");
    assert!(
        order.contains("Voucher MIDSUMMER-10: €13.10 off."),
        "{order}"
    );
    let codes: Vec<String> = sqlx::query_scalar(
        "select c.code from order_items c join orders o on o.id = c.order_id \
          where o.voucher_code = 'MIDSUMMER-10' order by c.code",
    )
    .fetch_all(&app.db.pool)
    .await
    .unwrap();
    assert_eq!(codes.len(), 2);
    for code in &codes {
        assert!(order.contains(code.as_str()), "{code}: {order}");
    }
    shopper.screenshot("order-page").await;
    let violations = shopper.axe_violations().await;
    assert!(violations.is_empty(), "order-page: {violations:#?}");

    // the box office's export lists the order, at what was paid
    boxed
        .click("nav.admin-nav a[href=\"/admin/exports\"]")
        .await;
    boxed.wait_for_path("/admin/exports").await;
    boxed.save_page("exports").await;
    let csv = boxed
        .client
        .execute(
            "return fetch('/admin/exports/orders.csv?collection=midsummer-on-the-pier', \
                          {credentials: 'same-origin'}).then(r => r.text());",
            vec![],
        )
        .await
        .unwrap();
    let csv = csv.as_str().unwrap_or_default();
    assert!(
        csv.contains("Ada Lovelace") && csv.contains("MIDSUMMER-10") && csv.contains("11790"),
        "{csv}"
    );

    // at the door: a door account lets the first ticket in, and every
    // admin route its role lacks, from the route table, answers it 403
    app.add_staff_as("door@holdfast.test", Role::Door).await;
    let door = Browser::open(&driver, shots_for("catalogue-admin/door")).await;
    door.go(&format!("{}/admin/login", app.address)).await;
    door.fill("input[name=email]", "door@holdfast.test").await;
    door.fill("input[name=password]", PASSWORD).await;
    door.click("#login button[type=submit]").await;
    door.wait_for_path("/admin/redeem").await;
    door.click("#door-event-list a[href$=\"midsummer-on-the-pier\"]")
        .await;
    door.wait_for_text("#door-count", "expected").await;
    door.fill("#code", &codes[0]).await;
    door.fill("input[name=place]", "Pier gate").await;
    door.click("#redeem button[type=submit]").await;
    let verdict = door.wait_for_text("#verdict", "Admitted").await;
    assert!(verdict.contains("Ada Lovelace"), "{verdict}");
    door.save_page("door-redeem").await;
    let csrf = door
        .client
        .execute(
            "return document.querySelector('input[name=csrf]').value;",
            vec![],
        )
        .await
        .unwrap();
    let csrf = csrf.as_str().unwrap().to_owned();
    let mut refused = 0;
    for route in ROUTES {
        if Role::Door.may(route.permission) {
            continue;
        }
        let path = crate::roles::concrete(route.path, "00000000-0000-0000-0000-000000000000");
        let method = match route.verb {
            Verb::Get => "GET",
            Verb::Post => "POST",
        };
        let status = door
            .client
            .execute(
                "const [path, method, csrf] = arguments; \
                 const init = {method, credentials: 'same-origin', redirect: 'manual'}; \
                 if (method === 'POST') init.body = new URLSearchParams({csrf}); \
                 return fetch(path, init).then(r => r.status);",
                vec![path.clone().into(), method.into(), csrf.clone().into()],
            )
            .await
            .unwrap();
        assert_eq!(status.as_u64(), Some(403), "{method} {path}");
        refused += 1;
    }
    assert!(refused > 20, "the door is refused {refused} routes");
    // the accessibility check can fail: an unlabelled field is caught
    door.client
        .execute(
            "document.querySelector('main').insertAdjacentHTML('beforeend', '<input type=text>');",
            vec![],
        )
        .await
        .unwrap();
    let caught = door.axe_violations().await;
    assert!(caught.iter().any(|v| v.starts_with("label:")), "{caught:?}");
    assert_no_policy_reports(&app).await;
    boxed.close().await;
    shopper.close().await;
    door.close().await;
    for page in [
        "catalogue",
        "event-new",
        "event-refused",
        "tier-new",
        "event-with-tiers",
        "tier",
        "schedule-new",
        "schedule",
        "stock-new",
        "stock",
        "voucher-new",
        "vouchers",
        "exports",
        "door-redeem",
    ] {
        let png = target_screenshots().join(format!("{page}.png"));
        assert!(
            std::fs::metadata(&png).is_ok_and(|m| m.len() > 1000),
            "{}",
            png.display()
        );
    }
    owner.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sold_out_shopper_joins_the_waiting_list_and_pays_from_the_keyboard() {
    use fantoccini::key::Key;
    let (app, driver, _turn) = shop_and_driver().await;
    let product = "wild-honey";
    let resource: String = sqlx::query_scalar("select resource_id from products where id = $1")
        .bind(product)
        .fetch_one(&app.db.pool)
        .await
        .unwrap();
    sqlx::query("select hf_upsert_resource($1, 1)")
        .bind(&resource)
        .execute(&app.db.pool)
        .await
        .unwrap();
    let holder = holdfast_testkit::engine::started(&app.db, "last-jar", &[(product, 1)]).await;
    app.settled().await;
    let browser = Browser::open(&driver, shots_for("waitlist")).await;
    browser.go(&format!("{}/", app.address)).await;
    browser
        .find(&format!("li[data-product=\"{product}\"] .waitlist a"))
        .await;
    browser.save_page("catalogue-sold-out").await;
    browser
        .go(&format!("{}/waitlist/{product}", app.address))
        .await;
    browser.save_page("waitlist-join").await;
    // a refusal shows beside the form, which keeps what was typed
    browser.fill("input[name=name]", "Ada Lovelace").await;
    // the browser takes a@b as an address; the shop wants a domain with a dot
    browser.fill("input[name=email]", "ada@localhost").await;
    browser
        .fill("input[name=qty]", &format!("1{}", Key::Enter))
        .await;
    browser.wait_for_text(".error", "e-mail address").await;
    browser.save_page("waitlist-join-refused").await;
    // the keyboard alone: type, then Enter submits
    browser.fill("input[name=name]", "Ada Lovelace").await;
    browser.fill("input[name=email]", "ada@example.com").await;
    browser
        .fill("input[name=qty]", &format!("1{}", Key::Enter))
        .await;
    browser.wait_for_text("h1", "Check your e-mail").await;
    browser.save_page("waitlist-check-mail").await;
    let token: String = sqlx::query_scalar("select token from waitlist_entries")
        .fetch_one(&app.db.pool)
        .await
        .unwrap();
    browser
        .go(&format!("{}/waitlist/entry/{token}", app.address))
        .await;
    browser.save_page("waitlist-unconfirmed").await;
    browser
        .find("form[action$=\"/confirm\"] button")
        .await
        .send_keys(&Key::Enter.to_string())
        .await
        .unwrap();
    browser
        .wait_for_text(".position", "You are first in line.")
        .await;
    browser.save_page("waitlist-waiting").await;
    holdfast::checkout::release_order(
        &app.db.pool,
        holder.id,
        holdfast::checkout::Release::ShopperLeft,
    )
    .await
    .unwrap();
    // the page watches the product and reloads itself: the offer shows
    // without the shopper doing anything
    browser
        .wait_for_text("main", "Reserved for you until")
        .await;
    browser.save_page("waitlist-offered").await;
    browser
        .find("form[action$=\"/claim\"] button")
        .await
        .send_keys(&Key::Enter.to_string())
        .await
        .unwrap();
    browser.find("#pay").await;
    browser.click("#pay").await;
    browser.wait_for_path("/orders/").await;
    browser
        .go(&format!("{}/waitlist/entry/{token}", app.address))
        .await;
    browser
        .wait_for_text("main", "You were served from the waiting list")
        .await;
    browser.save_page("waitlist-claimed").await;
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drop_queues_order_is_checked_in_the_shoppers_browser() {
    let (app, driver, _turn) = shop_and_driver().await;
    let product = "wild-honey";
    // five jars for forty entrants
    sqlx::query("select hf_upsert_resource(resource_id, 5) from products where id = $1")
        .bind(product)
        .execute(&app.db.pool)
        .await
        .unwrap();
    sqlx::query("update products set sale_opens_at = now() + interval '1 hour' where id = $1")
        .bind(product)
        .execute(&app.db.pool)
        .await
        .unwrap();
    holdfast::queue::turn_on(
        &app.db.pool,
        holdfast::audit::Actor::Operator("tests"),
        product,
    )
    .await
    .unwrap();
    sqlx::query(
        "insert into waitlist_entries (product_id, token, name, email, email_key, qty, provider, \
                                       state, confirmed_at) \
         select $1, md5(g::text) || md5((g + 1)::text), 'Queued ' || g, \
                'q' || g || '@example.com', 'q' || g || '@example.com', 1, 'stripe', 'queued', now() \
           from generate_series(1, 40) g",
    )
    .bind(product)
    .execute(&app.db.pool)
    .await
    .unwrap();
    let browser = Browser::open(&driver, shots_for("queue")).await;
    // the product's card publishes the commitment before the opening
    let commitment: String =
        sqlx::query_scalar("select queue_commitment from products where id = $1")
            .bind(product)
            .fetch_one(&app.db.pool)
            .await
            .unwrap();
    app.settled().await;
    browser.go(&format!("{}/", app.address)).await;
    let card = browser
        .wait_for_text(
            &format!("li[data-product=\"{product}\"] .commitment"),
            &commitment,
        )
        .await;
    assert!(card.contains("SHA-256"), "{card}");
    browser.save_page("catalogue-queue").await;
    // an entrant's page: in the queue, with the id the list will name
    let (first, first_token): (uuid::Uuid, String) =
        sqlx::query_as("select id, token from waitlist_entries order by email limit 1")
            .fetch_one(&app.db.pool)
            .await
            .unwrap();
    browser
        .go(&format!("{}/waitlist/entry/{first_token}", app.address))
        .await;
    assert_eq!(browser.text("#entry-id").await, first.to_string());
    browser.save_page("queue-entry-queued").await;
    browser
        .go(&format!("{}/queue/{product}", app.address))
        .await;
    browser.find("#commitment").await;
    browser.save_page("queue-before-the-draw").await;
    sqlx::query("update products set sale_opens_at = now() - interval '1 second' where id = $1")
        .bind(product)
        .execute(&app.db.pool)
        .await
        .unwrap();
    browser
        .go(&format!("{}/queue/{product}", app.address))
        .await;
    let verdict = browser
        .wait_for_text("#verdict", "Checked in your browser")
        .await;
    assert!(verdict.contains("all 40 places"), "{verdict}");
    browser.save_page("queue-drawn").await;
    // the last of forty, for five jars: told at once that it is sold out
    // for their place, and that they stay in line
    let last: String =
        sqlx::query_scalar("select token from waitlist_entries order by line_no desc limit 1")
            .fetch_one(&app.db.pool)
            .await
            .unwrap();
    app.settled().await;
    browser
        .go(&format!("{}/waitlist/entry/{last}", app.address))
        .await;
    let notice = browser
        .wait_for_text(".refused", "Sold out for your place in line")
        .await;
    assert!(notice.contains("You stay in line"), "{notice}");
    assert!(
        browser
            .text(".position")
            .await
            .contains("34 entries are ahead of you")
    );
    browser.save_page("queue-entry-out-of-reach").await;
    // the page's check can fail: two places swapped in the shop's database
    let ids: Vec<uuid::Uuid> =
        sqlx::query_scalar("select id from waitlist_entries where line_no < 0 order by line_no")
            .fetch_all(&app.db.pool)
            .await
            .unwrap();
    sqlx::query("update waitlist_entries set line_no = line_no - 1000 where id = $1 or id = $2")
        .bind(ids[0])
        .bind(ids[1])
        .execute(&app.db.pool)
        .await
        .unwrap();
    sqlx::query(
        "update waitlist_entries set line_no = case when id = $1 then -39 else -40 end \
          where id = $1 or id = $2",
    )
    .bind(ids[0])
    .bind(ids[1])
    .execute(&app.db.pool)
    .await
    .unwrap();
    browser
        .go(&format!("{}/queue/{product}", app.address))
        .await;
    let verdict = browser.wait_for_text("#verdict", "NOT").await;
    assert!(verdict.contains("Place 1"), "{verdict}");
    browser.close().await;
}

/// Money that takes days, as a phone (390×844) and a desk (1280×900) show
/// it: the shopper pays by SEPA Direct Debit on Stripe's page (the shop
/// offers the dashboard's methods) and reads on the order page that the
/// payment is being processed and until when the jar is theirs; staff see
/// the settling order in the list and on its page, with its method, its
/// deadline and Release; the bank's answer on the sandbox's page then
/// sells the order (phone) or frees its jar (desk). Razorpay's page offers
/// a bank that does not answer. Every shop and admin page passes axe-core.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_debit_that_takes_days_is_seen_by_shopper_and_staff_on_a_phone_and_a_desk() {
    let _turn = turn().lock().await;
    ensure_installed();
    let app = super::settling::debit_shop().await;
    app.add_staff().await;
    let driver = start_driver().await;
    let mut shopper = Browser::open(&driver, shots_for("settling/shopper")).await;
    let mut staff = Browser::open(&driver, shots_for("settling/staff")).await;
    let clean = |page: &str, violations: Vec<String>| {
        assert!(
            violations.is_empty(),
            "{page}: WCAG 2.1 A/AA: {violations:#?}"
        );
    };
    staff.go(&format!("{}/admin/login", app.address)).await;
    staff.fill("input[name=email]", STAFF_EMAIL).await;
    staff.fill("input[name=password]", STAFF_PASSWORD).await;
    staff.click("#login button[type=submit]").await;
    staff.find("#live").await;
    for (width, height, size, bank_pays) in [(390, 844, "phone", true), (1280, 900, "desk", false)]
    {
        shopper.client.set_window_size(width, height).await.unwrap();
        staff.client.set_window_size(width, height).await.unwrap();
        check_out_paying(
            &mut shopper,
            &app,
            "wild-honey",
            "1",
            &format!("basket-{size}"),
            Some("sepa_debit"),
        )
        .await;
        let stripe_page = shopper.client.current_url().await.unwrap().to_string();
        assert!(shopper.body().await.contains("SEPA Direct Debit"));
        shopper.screenshot(&format!("stripe-page-{size}")).await;
        shopper.click("#pay-delayed").await;
        shopper.wait_for_path("/orders/").await;
        let order_page = shopper.client.current_url().await.unwrap().to_string();
        shopper
            .wait_for_text("h1", "Your payment is being processed")
            .await;
        let body = shopper.body().await;
        assert!(
            body.contains("paying €14.00 by SEPA Direct Debit")
                && body.contains("reserved for you until"),
            "{body}"
        );
        shopper.screenshot(&format!("order-settling-{size}")).await;
        clean("order page, settling", shopper.axe_violations().await);

        staff
            .go(&format!("{}/admin/orders?state=settling", app.address))
            .await;
        let listed = staff.text("#orders").await;
        assert!(listed.contains("SEPA Direct Debit, held until"), "{listed}");
        staff.screenshot(&format!("orders-settling-{size}")).await;
        // the list refreshes itself every 15 s (as it did before settling
        // came): axe's meta-refresh rule, the page's own choice, aside
        clean(
            "admin orders, settling",
            staff
                .axe_violations()
                .await
                .into_iter()
                .filter(|v| !v.starts_with("meta-refresh:"))
                .collect(),
        );
        staff.click("#orders tbody tr:first-child a").await;
        staff.wait_for_path("/admin/orders/").await;
        assert!(
            staff
                .text("#settling")
                .await
                .contains("kept for the order until")
        );
        assert!(staff.body().await.contains("Release the units"));
        // what settling adds to the page, in view on a phone too
        staff
            .client
            .execute(
                "document.querySelector('#settling').scrollIntoView();",
                vec![],
            )
            .await
            .unwrap();
        staff.screenshot(&format!("order-settling-{size}")).await;
        clean("admin order, settling", staff.axe_violations().await);

        // days later, on the sandbox's page, the bank answers
        shopper.go(&stripe_page).await;
        let answer = if bank_pays {
            "#bank-pays"
        } else {
            "#bank-refuses"
        };
        shopper.find(answer).await;
        shopper.screenshot(&format!("stripe-bank-{size}")).await;
        shopper.click(answer).await;
        shopper.wait_for_text("h1", "The bank").await;
        let state = if bank_pays { "paid" } else { "cancelled" };
        let token = order_page.rsplit('/').next().unwrap().to_owned();
        app.wait_for_state(&token, state).await;
        shopper.go(&order_page).await;
        let headline = if bank_pays {
            "Thank you"
        } else {
            "This order was cancelled"
        };
        shopper.wait_for_text("h1", headline).await;
        shopper.screenshot(&format!("order-{state}-{size}")).await;
        clean("order page, after the bank", shopper.axe_violations().await);
        // the waiting page's refresh is off: nothing is left settling
        app.settled().await;
    }
    // Razorpay's checkout, and a bank that does not answer in time
    let razorpay = app
        .start(
            &holdfast_testkit::browser(),
            &Purchase::of("wild-honey", 1).with(holdfast::payments::ProviderKind::Razorpay),
        )
        .await;
    for (width, height, size) in [(390, 844, "phone"), (1280, 900, "desk")] {
        shopper.client.set_window_size(width, height).await.unwrap();
        shopper.go(&razorpay.pay_url).await;
        shopper.find("#bank-silent").await;
        shopper.screenshot(&format!("razorpay-page-{size}")).await;
    }
    assert_no_policy_reports(&app).await;
    shopper.close().await;
    staff.close().await;
}
