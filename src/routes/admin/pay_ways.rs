//! The Settings page's ways to pay, as it shows them: per way, the
//! providers that take it in the shop's currency and the one chosen
//! ([`crate::payments::methods`]). Saved by `super::storefront`.

use crate::payments::ProviderKind;
use crate::payments::methods::{self, Choice, PayMethod};
use crate::routes::ShopError;
use crate::state::Shop;

/// One way to pay on the Settings page: the providers that take it in the
/// shop's currency, the one chosen, and why a choice was refused.
pub struct PayWay {
    pub method: &'static str,
    pub label: &'static str,
    /// (value, words, chosen): a provider, or `off`.
    pub options: Vec<(&'static str, String, bool)>,
    pub error: String,
}

/// The ways to pay as the Settings page shows them: as stored, or as just
/// typed (`typed`) with the refusals beside them.
pub(super) async fn pay_ways(
    shop: &Shop,
    typed: Option<&[Choice]>,
    refused: &[methods::Refused],
) -> Result<Vec<PayWay>, ShopError> {
    let currency = crate::staff::catalogue::shop_currency(&shop.pool).await?;
    let ways = methods::read(&shop.pool).await?;
    Ok(PayMethod::ALL
        .into_iter()
        // a way the currency rules out is shown only to say why
        .filter(|method| method.takes(&currency) || refused.iter().any(|r| r.method == *method))
        .map(|method| {
            let chosen = match typed {
                Some(typed) => typed
                    .iter()
                    .find(|c| c.method == method)
                    .and_then(|c| c.provider),
                None => ways.provider(&shop.payments, method),
            };
            let mut options: Vec<(&'static str, String, bool)> = ProviderKind::ALL
                .into_iter()
                .filter(|kind| methods::provider_takes(*kind, method))
                .filter(|kind| shop.payments.get(*kind).is_some())
                .map(|kind| {
                    let name = methods::company(kind).to_owned();
                    (kind.as_str(), name, chosen == Some(kind))
                })
                .collect();
            options.push(("off", "Not offered".to_owned(), chosen.is_none()));
            PayWay {
                method: method.as_str(),
                label: method.label(),
                options,
                error: refused
                    .iter()
                    .find(|r| r.method == method)
                    .map(|r| r.reason.clone())
                    .unwrap_or_default(),
            }
        })
        .collect())
}
