//! The owner's words (issue 46): a crawl of every admin page an owner
//! reaches from Home, after a sale, over HTTP
//! against the real app. No page says an engine word (hold, engine,
//! worker, resource, a raw state or job kind, a provider's id) where an
//! owner reads it: technical details stay folded in a `<details>`, and the
//! operator's own pages (holds, counts, payments without an order) are
//! left out, as they are the engine's by name.

use std::collections::{BTreeSet, VecDeque};

use holdfast_testkit::*;

/// Words of the engine, never of the shop's owner.
const ENGINE_WORDS: [&str; 12] = [
    "hold",
    "holds",
    "engine",
    "worker",
    "resource",
    "resources",
    "refund_pending",
    "awaiting_payment",
    "order_confirmation",
    "refund_notice",
    "webhook_event",
    "lede",
];

/// Raw ids a provider gives, by their prefix.
const PROVIDER_IDS: [&str; 4] = ["pi_", "cs_test_", "cs_live_", "pay_"];

/// The operator's pages, the engine's by name, and the integrator's
/// (webhooks name their events as the API does).
const ENGINE_PAGES: [&str; 5] = [
    "/admin/holds",
    "/admin/resources",
    "/admin/payments/orphans",
    "/admin/webhooks",
    "/admin/logout",
];

/// What a page shows an owner at first: its text without tags, scripts,
/// styles, and the insides of folded `<details>` (their summary stays).
pub(crate) fn shown_text(page: &str) -> String {
    let mut text = String::new();
    let mut rest = page;
    while let Some(at) = rest.find('<') {
        text.push_str(&rest[..at]);
        text.push(' ');
        let tail = &rest[at..];
        let skip_to = if tail.starts_with("<script") {
            tail.find("</script>")
        } else if tail.starts_with("<style") {
            tail.find("</style>")
        } else if tail.starts_with("<details")
            && !tail[..tail.find('>').unwrap_or(0)].contains(" open")
        {
            // the summary is read; the rest is folded
            let summary = tail
                .find("<summary")
                .and_then(|s| tail[s..].find("</summary>").map(|e| (s, s + e)));
            if let Some((from, to)) = summary {
                text.push_str(&shown_text(&tail[from..to]));
            }
            tail.find("</details>")
        } else {
            None
        };
        rest = match skip_to {
            Some(end) => &tail[end..],
            None => tail.find('>').map_or("", |end| &tail[end + 1..]),
        };
    }
    text.push_str(rest);
    text
}

/// The engine words and provider ids a page shows an owner.
fn engine_words(page: &str) -> Vec<String> {
    // a box office holds seats back for the house: its word, not the engine's
    shown_text(page)
        .replace("Hold back", "Keep back")
        .replace("hold back", "keep back")
        .replace("holding back", "keeping back")
        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|word| {
            let lower = word.to_lowercase();
            ENGINE_WORDS.contains(&lower.as_str())
                || PROVIDER_IDS
                    .iter()
                    .any(|p| lower.starts_with(p) && lower.len() > p.len() + 3)
        })
        .map(str::to_owned)
        .collect()
}

/// The links of a page to the admin's pages an owner reads.
fn admin_links(page: &str) -> Vec<String> {
    page.split("href=\"")
        .skip(1)
        .filter_map(|rest| rest.split('"').next())
        .map(|href| href.replace("&amp;", "&").replace("&#38;", "&"))
        .filter(|href| href.starts_with("/admin"))
        .filter(|href| !ENGINE_PAGES.iter().any(|skip| href.starts_with(skip)))
        .filter(|href| !href.ends_with(".csv") && !href.contains("/exports/"))
        .map(|href| href.split('#').next().unwrap_or_default().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_admin_page_an_owner_reads_says_an_engine_word() {
    let app = spawn_app().await;
    app.load_demo().await;
    app.settled().await;
    app.add_staff().await;
    app.buy(&browser(), &Purchase::of("harbour-lights-general", 2))
        .await;
    let (owner, _) = app.staff_browser().await;
    let mut seen = BTreeSet::new();
    let mut queue: VecDeque<String> = ["/admin".to_owned()].into_iter().collect();
    let mut said = BTreeSet::new();
    while let Some(path) = queue.pop_front() {
        // one page of each shape: the orders of one filter, not of each
        let shape: String = path.split('?').next().unwrap_or_default().to_owned();
        if !seen.insert(path.clone()) || seen.len() > 400 {
            continue;
        }
        let response = owner
            .get(format!("{}{path}", app.address))
            .send()
            .await
            .unwrap();
        let status = response.status();
        assert!(!status.is_server_error(), "{path}: {status}");
        if !response
            .headers()
            .get("content-type")
            .is_some_and(|t| t.to_str().unwrap_or("").starts_with("text/html"))
        {
            continue;
        }
        let page = response.text().await.unwrap();
        for word in engine_words(&page) {
            said.insert(format!("{shape}: {word}"));
        }
        queue.extend(
            admin_links(&page)
                .into_iter()
                .filter(|l| !l.contains('?') || l.starts_with("/admin/dining")),
        );
    }
    assert!(seen.len() >= 20, "the crawl found the admin: {seen:?}");
    assert!(
        said.is_empty(),
        "engine words on the owner's pages: {said:#?}"
    );
}

#[test]
fn folded_details_and_scripts_are_not_read() {
    let page = "<p>Paid</p><details><summary>Technical details</summary>hold pi_3Nabcdef</details>\
                <details open><summary>x</summary>engine</details><script>var hold;</script>\
                <p>Hold back seats for the press.</p>";
    assert_eq!(engine_words(page), ["engine"]);
}
