//! The checkout as a shopper's browser goes through it: the basket and the
//! checkout form at the shop, then the provider's page (Stripe's hosted
//! page, or the sandbox's stand-in for Razorpay's checkout.js), a button
//! pressed there, and the way back to the shop unless the return is lost.

use anyhow::Context;

use holdfast::payments::ProviderKind as Provider;

use super::World;
use crate::browser::{ShopSend, form_field, location, shop_send};

/// A checkout that reached the provider's page: which page, and the ways
/// back to the shop.
pub(super) struct Started {
    /// The Stripe session or the Razorpay order.
    pub(super) reference: String,
    /// Stripe: the hosted page. Razorpay: the sandbox checkout's page.
    pub(super) pay_url: String,
    pub(super) callback_url: String,
    pub(super) cancel_url: String,
}

/// Basket, checkout form, submit. `None` when the shop refused (sold out).
pub(super) async fn start_checkout(
    world: &World,
    client: &reqwest::Client,
    provider: Provider,
) -> anyhow::Result<Option<Started>> {
    let basket = client
        .get(format!("{}/basket", world.shop))
        .shop_send()
        .await?
        .text()
        .await?;
    let key = form_field(&basket, "checkout_key").context("no checkout key on the basket page")?;
    let submitted = client
        .post(format!("{}/checkout", world.shop))
        .form(&[
            ("checkout_key", key.as_str()),
            ("name", "Simulated Shopper"),
            ("email", "shopper@example.com"),
            ("provider", provider.as_str()),
        ])
        .shop_send()
        .await?;
    match submitted.status().as_u16() {
        409 => return Ok(None),
        303 => {}
        other => anyhow::bail!("checkout answered {other}"),
    }
    let target = location(&submitted)?;
    match provider {
        Provider::Stripe => {
            let reference = target
                .rsplit('/')
                .next()
                .context("a payment page address")?
                .to_owned();
            Ok(Some(Started {
                reference,
                pay_url: target,
                callback_url: String::new(),
                cancel_url: String::new(),
            }))
        }
        Provider::Razorpay => {
            let token = target
                .rsplit('/')
                .next()
                .context("a payment page address")?
                .to_owned();
            let page_url = if target.starts_with("http") {
                target.clone()
            } else {
                format!("{}{target}", world.shop)
            };
            let page = shop_send(client.get(page_url)).await?.text().await?;
            // what Razorpay's checkout.js reads from the page
            let options = page
                .split("<script id=\"pay-options\" type=\"application/json\">")
                .nth(1)
                .and_then(|rest| rest.split("</script>").next())
                .context("no Razorpay options on the payment page")?;
            let options: serde_json::Value = serde_json::from_str(options)?;
            let reference = options["order_id"]
                .as_str()
                .context("no order id in the Razorpay options")?
                .to_owned();
            let callback_url = options["callback_url"]
                .as_str()
                .context("no callback URL in the Razorpay options")?
                .to_owned();
            Ok(Some(Started {
                pay_url: format!("{}/razorpay/pay/{reference}", world.sandbox),
                cancel_url: format!("{}/checkout/cancel/{token}", world.shop),
                reference,
                callback_url,
            }))
        }
    }
}

/// Back at the shop's cancel URL, the shopper reads "Leave checkout?" and
/// presses the button (the GET alone changes nothing).
async fn leave(client: &reqwest::Client, cancel_url: &str) -> anyhow::Result<()> {
    let asked = shop_send(client.get(cancel_url)).await?;
    anyhow::ensure!(
        asked.status().is_success() || asked.status().is_redirection(),
        "the cancel URL answered {}",
        asked.status()
    );
    if asked.text().await?.contains("Leave checkout?") {
        let left = shop_send(client.post(cancel_url)).await?;
        anyhow::ensure!(
            left.status().is_success() || left.status().is_redirection(),
            "leaving answered {}",
            left.status()
        );
    }
    Ok(())
}

/// Press a button on the provider's page; follow the way back to the shop
/// unless the return is lost.
pub(super) async fn press(
    provider: Provider,
    started: &Started,
    client: &reqwest::Client,
    action: &str,
    follow: bool,
) -> anyhow::Result<()> {
    match provider {
        Provider::Stripe => {
            let answer = client
                .post(format!("{}/{action}", started.pay_url))
                .send()
                .await?;
            if answer.status() == 303 && action == "abandon" {
                leave(client, &location(&answer)?).await?;
            } else if answer.status() == 303 && follow {
                let back = shop_send(client.get(location(&answer)?)).await?;
                anyhow::ensure!(
                    back.status().is_success() || back.status().is_redirection(),
                    "the way back answered {}",
                    back.status()
                );
            }
        }
        Provider::Razorpay => {
            let answer = client
                .post(format!("{}/{action}", started.pay_url))
                .form(&[
                    ("callback_url", started.callback_url.as_str()),
                    ("cancel_url", started.cancel_url.as_str()),
                ])
                .send()
                .await?;
            if action == "abandon" {
                if answer.status() == 303 {
                    leave(client, &location(&answer)?).await?;
                }
                return Ok(());
            }
            let page = answer.text().await?;
            let fields: Vec<(&str, String)> = [
                "razorpay_payment_id",
                "razorpay_order_id",
                "razorpay_signature",
            ]
            .into_iter()
            .filter_map(|name| form_field(&page, name).map(|value| (name, value)))
            .collect();
            if follow && fields.len() == 3 {
                let back = client
                    .post(&started.callback_url)
                    .form(&fields)
                    .shop_send()
                    .await?;
                anyhow::ensure!(
                    back.status().is_success() || back.status().is_redirection(),
                    "the callback answered {}",
                    back.status()
                );
            } else if follow && page.contains("name=\"error[code]\"") {
                // a declined card comes back too, with Razorpay's error fields
                let errors: Vec<(&str, String)> = [
                    "error[code]",
                    "error[description]",
                    "error[source]",
                    "error[step]",
                    "error[reason]",
                    "error[metadata]",
                ]
                .into_iter()
                .filter_map(|name| form_field(&page, name).map(|value| (name, value)))
                .collect();
                let back = client
                    .post(&started.callback_url)
                    .form(&errors)
                    .shop_send()
                    .await?;
                // a try-again page, or (a bank that may still answer) the
                // order's page
                anyhow::ensure!(
                    back.status() == reqwest::StatusCode::OK || back.status().is_redirection(),
                    "the failure callback answered {}",
                    back.status()
                );
            }
        }
    }
    Ok(())
}
