//! The shop's words (issue 33): a crawl of every page a shopper reaches
//! from the catalogue, a basket, an order page and the refusals a shopper
//! can meet, over HTTP against the real app. No page says an engine word
//! (hold, resource, lede) where a shopper reads it, and every refusal's
//! sentence starts with a capital.

use std::collections::{BTreeSet, VecDeque};

use holdfast_testkit::*;

/// Words of the engine, never of the shop.
const ENGINE_WORDS: [&str; 5] = ["hold", "holds", "resource", "resources", "lede"];

/// What a page shows a reader: its text without tags, scripts and styles.
fn visible_text(page: &str) -> String {
    let mut text = String::new();
    let mut rest = page;
    while let Some(at) = rest.find('<') {
        text.push_str(&rest[..at]);
        text.push(' ');
        let tail = &rest[at..];
        let skip_to = ["script", "style"]
            .iter()
            .find(|tag| tail.starts_with(&format!("<{tag}")))
            .and_then(|tag| tail.find(&format!("</{tag}>")));
        rest = match skip_to {
            Some(end) => &tail[end..],
            None => tail.find('>').map_or("", |end| &tail[end + 1..]),
        };
    }
    text.push_str(rest);
    text
}

/// The engine words a page's text says.
fn engine_words(page: &str) -> Vec<String> {
    visible_text(page)
        .split(|c: char| !c.is_alphanumeric())
        .filter(|word| ENGINE_WORDS.contains(&word.to_lowercase().as_str()))
        .map(str::to_owned)
        .collect()
}

/// The links of a page to the shop's own pages.
fn shop_links(page: &str) -> Vec<String> {
    page.split("href=\"")
        .skip(1)
        .filter_map(|rest| rest.split('"').next())
        .map(|href| href.replace("&amp;", "&").replace("&#38;", "&"))
        .filter(|href| href.starts_with('/') && !href.starts_with("//"))
        .filter(|href| {
            !["/admin", "/static", "/images", "/availability"]
                .iter()
                .any(|skip| href.starts_with(skip))
        })
        .filter(|href| !href.ends_with(".ics") && !href.ends_with(".json"))
        .map(|href| href.split('#').next().unwrap_or_default().to_owned())
        .collect()
}

/// A refusal page's sentence (the paragraph under its heading).
fn refusal_sentence(page: &str) -> String {
    let after = page.split("</h1>").nth(1).unwrap_or_default();
    let sentence = after.split("<p>").nth(1).unwrap_or_default();
    sentence
        .split("</p>")
        .next()
        .unwrap_or_default()
        .trim()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_shop_page_says_an_engine_word_and_every_refusal_starts_with_a_capital() {
    let app = spawn_app().await;
    app.load_demo().await;
    app.settled().await;
    let shopper = browser();
    // a basket with something in it, and a paid order
    app.add(&shopper, "harbour-lights-vip", 1).await;
    let paid = app
        .buy(&browser(), &Purchase::of("harbour-lights-general", 2))
        .await;

    let mut seen = BTreeSet::new();
    let mut queue: VecDeque<String> = ["/".to_owned(), "/basket".to_owned(), paid.order_url()]
        .into_iter()
        .collect();
    let mut said = Vec::new();
    while let Some(path) = queue.pop_front() {
        if !seen.insert(path.clone()) || seen.len() > 300 {
            continue;
        }
        let response = shopper
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
            said.push(format!("{path}: {word}"));
        }
        queue.extend(shop_links(&page));
    }
    assert!(seen.len() >= 8, "the crawl found the shop: {seen:?}");
    assert!(
        said.is_empty(),
        "engine words on the shop's pages: {said:#?}"
    );

    // the refusals a shopper can meet, each a sentence with a capital
    let refusals = [
        shopper
            .get(format!("{}/c/no-such-thing", app.address))
            .send()
            .await
            .unwrap(),
        shopper
            .get(format!("{}/pay/not-a-token", app.address))
            .send()
            .await
            .unwrap(),
        shopper
            .get(format!("{}/waitlist/no-such-product", app.address))
            .send()
            .await
            .unwrap(),
        shopper
            .get(format!("{}/orders/not-a-token", app.address))
            .send()
            .await
            .unwrap(),
    ];
    for refusal in refusals {
        let status = refusal.status();
        assert!(status.is_client_error(), "{status}: {}", refusal.url());
        let page = refusal.text().await.unwrap();
        let sentence = refusal_sentence(&page);
        assert!(
            sentence.starts_with(char::is_uppercase) && sentence.ends_with('.'),
            "{status}: {sentence:?}"
        );
        assert!(engine_words(&page).is_empty(), "{page}");
    }
}

#[test]
fn the_crawler_reads_what_a_person_reads() {
    let page = "<p>Your hold</p><script>var hold = 1;</script><style>.lede{}</style>\
                <a href=\"/c/x#top\">x</a><a href=\"https://elsewhere\">y</a>";
    assert_eq!(engine_words(page), ["hold"]);
    assert_eq!(shop_links(page), ["/c/x"]);
    assert_eq!(
        refusal_sentence("<h1>Not found</h1>\n<p>There is nothing here.</p>"),
        "There is nothing here."
    );
}
