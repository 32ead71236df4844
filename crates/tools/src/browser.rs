//! What the tools' shoppers do that a bare HTTP client does not: try again
//! while the shop is too busy to answer, read where a redirect points and
//! what a form's fields hold. `simulate` and `flash-sale` both browse so.

use std::time::Duration;

use anyhow::Context;

/// The shop answers 503 while it is too busy to get a database connection
/// (its pool waits two seconds at most): a shopper tries again, as a person
/// at a browser would. Every request sent this way is safe to repeat.
pub(crate) trait ShopSend {
    async fn shop_send(self) -> anyhow::Result<reqwest::Response>;
}

impl ShopSend for reqwest::RequestBuilder {
    async fn shop_send(self) -> anyhow::Result<reqwest::Response> {
        shop_send(self).await
    }
}

/// `request`, sent again while the shop answers 503 (fifty tries, a tenth
/// of a second apart); [`ShopSend`] as a function.
pub(crate) async fn shop_send(
    request: reqwest::RequestBuilder,
) -> anyhow::Result<reqwest::Response> {
    for _ in 0..50 {
        let attempt = request
            .try_clone()
            .context("a request that cannot be sent again")?;
        let answer = attempt.send().await?;
        if answer.status() != reqwest::StatusCode::SERVICE_UNAVAILABLE {
            return Ok(answer);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(request.send().await?)
}

/// Where a redirect points.
pub(crate) fn location(response: &reqwest::Response) -> anyhow::Result<String> {
    Ok(response
        .headers()
        .get("location")
        .context("a redirect without a location")?
        .to_str()?
        .to_owned())
}

/// A hidden or filled form field's value from a page (escaped quotes and
/// ampersands decoded, the ampersand last).
pub(crate) fn form_field(page: &str, name: &str) -> Option<String> {
    let marker = format!("name=\"{name}\" value=\"");
    let start = page.find(&marker)? + marker.len();
    let end = page[start..].find('"')? + start;
    Some(
        page[start..end]
            .replace("&#34;", "\"")
            .replace("&quot;", "\"")
            .replace("&#39;", "'")
            .replace("&amp;", "&"),
    )
}
