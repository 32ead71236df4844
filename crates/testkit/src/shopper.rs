//! Shoppers: the shop's pages as a browser reads them (the basket, the
//! checkout form, redirects, form fields) and what a shopper does there,
//! one request at a time. The browsers themselves are in `client.rs`.

use reqwest::Response;

use crate::shop::TestApp;

/// The text of the page at `url` as `browser` gets it, whatever its status.
pub async fn read_page(browser: &reqwest::Client, url: &str) -> String {
    text_of(browser.get(url)).await
}

/// Send `request`: the answer's text, whatever its status.
pub async fn text_of(request: reqwest::RequestBuilder) -> String {
    request.send().await.unwrap().text().await.unwrap()
}

/// Where a redirect points.
pub fn location(response: &reqwest::Response) -> String {
    response.headers()["location"].to_str().unwrap().to_owned()
}

/// A form field's value on a page (`name="…" value="…"`), `&amp;` decoded.
pub fn field(page: &str, name: &str) -> String {
    try_field(page, name).unwrap_or_else(|| panic!("no {name} in {page}"))
}

/// [`field`], when the page may not have it.
pub fn try_field(page: &str, name: &str) -> Option<String> {
    let marker = format!("name=\"{name}\" value=\"");
    let start = page.find(&marker)? + marker.len();
    let end = page[start..].find('"')? + start;
    Some(page[start..end].replace("&amp;", "&"))
}

/// The value of a hidden form field, as rendered (entities left as they
/// are).
pub fn hidden(page: &str, name: &str) -> String {
    let marker = format!("name=\"{name}\" value=\"");
    let start = page
        .find(&marker)
        .unwrap_or_else(|| panic!("no {name} field in {page}"))
        + marker.len();
    let end = page[start..].find('"').unwrap() + start;
    page[start..end].to_owned()
}

/// The checkout form's one-time key on a basket page.
pub fn checkout_key(page: &str) -> String {
    hidden(page, "checkout_key")
}

/// The checkout form's lines, as the browser sends them.
pub fn form_lines(page: &str) -> String {
    hidden(page, "lines")
        .replace("&#34;", "\"")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

/// An order's token: the last segment of its page's (or return's) URL.
pub fn token_of(order_url: &str) -> String {
    order_url.rsplit('/').next().unwrap().to_owned()
}

/// What a shopper does in the shop, one request at a time.
impl TestApp {
    /// Put `qty` of `product` into the basket; the shop must take it.
    pub async fn add(&self, shopper: &reqwest::Client, product: &str, qty: i64) {
        let response = shopper
            .post(format!("{}/basket/add", self.address))
            .form(&[("product_id", product), ("qty", &qty.to_string())])
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 303, "adding {product}");
    }

    /// Fill in the checkout form as it was rendered (with its one-time key).
    pub async fn checkout(&self, shopper: &reqwest::Client) -> Response {
        let page = read_page(shopper, &format!("{}/basket", self.address)).await;
        self.submit_form(shopper, &checkout_key(&page), &form_lines(&page))
            .await
    }

    /// The checkout form as a browser sends it: its key and the lines the
    /// page showed.
    pub async fn submit_form(&self, shopper: &reqwest::Client, key: &str, lines: &str) -> Response {
        self.post_checkout(shopper, &[("checkout_key", key), ("lines", lines)])
            .await
    }

    /// The checkout form with `key` and without its lines (a form the
    /// shop's memory cannot judge: the database answers).
    pub async fn submit_checkout(&self, shopper: &reqwest::Client, key: &str) -> Response {
        self.post_checkout(shopper, &[("checkout_key", key)]).await
    }

    /// The checkout form: `fields`, and Ada Shopper's name, e-mail and
    /// phone (kept only for a booking).
    async fn post_checkout(&self, shopper: &reqwest::Client, fields: &[(&str, &str)]) -> Response {
        let mut form = fields.to_vec();
        form.extend([
            ("name", "Ada Shopper"),
            ("email", "ada@example.com"),
            ("phone", "+44 20 7946 0000"),
        ]);
        shopper
            .post(format!("{}/checkout", self.address))
            .form(&form)
            .send()
            .await
            .unwrap()
    }

    /// The shopper leaves checkout as a browser does: the provider sends
    /// them to the cancel URL, which asks; they press "Leave checkout".
    /// The POST's answer.
    pub async fn leave(&self, shopper: &reqwest::Client, cancel_url: &str) -> reqwest::Response {
        let asked = shopper.get(cancel_url).send().await.unwrap();
        assert_eq!(asked.status(), 200, "GET {cancel_url}");
        let page = asked.text().await.unwrap();
        assert!(page.contains("Leave checkout?"), "{page}");
        shopper.post(cancel_url).send().await.unwrap()
    }
}
