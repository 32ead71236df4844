//! The shop's own section of the Settings page: its name, description,
//! accent colour, contact address and legal links ([`crate::storefront`]).
//! Owners only (the Settings permission); every field checked, a refusal
//! shown beside its field with nothing saved.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, web};

use super::notices::NoticeQuery;
use super::pages::{nav, render};
use super::staff_accounts::{SettingsPage, refunding_roles};
use crate::payments::ProviderKind;
use crate::payments::methods::{self, Choice, PayMethod};
use crate::routes::ShopError;
use crate::routes::render::see_other;
use crate::staff::Session;
use crate::state::Shop;
use crate::storefront::{self, Saved, StorefrontEdit};

/// `POST /admin/settings/shop`: save the shop's name and looks, recorded
/// in Activity; the shop's pages show them from the next page on.
pub async fn save(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    form: web::Form<StorefrontEdit>,
) -> Result<HttpResponse, ShopError> {
    match storefront::save(&shop.pool, (&session.staff).into(), &form).await? {
        Saved::Saved => {
            shop.storefronts.forget();
            // pages show the shop from memory: this process reads it
            // before the owner is told (every other hears of it at once)
            shop.live.refresh().await;
            Ok(see_other("/admin/settings?notice=shop_saved#shop"))
        }
        Saved::Refused(refused) => {
            let page = SettingsPage {
                nav: nav(&shop, &session, &NoticeQuery::default()).await?,
                two_factor_for_refunds: crate::staff::two_factor::required_for_refunds(&shop.pool)
                    .await?,
                refunding_roles: refunding_roles(),
                shop_form: form.into_inner(),
                shop_refused: refused,
                pay_ways: super::pay_ways::pay_ways(&shop, None, &[]).await?,
            };
            render(StatusCode::BAD_REQUEST, &page)
        }
    }
}

impl SettingsPage {
    /// The logo's upload field, showing the logo now.
    pub(super) fn logo_field(&self) -> super::images::ImageField {
        let shown = storefront::shown();
        super::images::ImageField {
            action: "/admin/settings/logo".to_owned(),
            current: shown
                .logo_id
                .as_deref()
                .map(|id| crate::images::src(id, crate::images::THUMB_WIDTH))
                .unwrap_or_default(),
            back: "/admin/settings#image".to_owned(),
            error: String::new(),
        }
    }
}

/// `POST /admin/settings/pay`: which provider serves each way to pay
/// (`card=stripe&sepa_debit=off` …); a provider that does not take a way
/// in the shop's currency is refused beside it, and nothing is saved.
pub async fn save_pay_ways(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    form: web::Form<Vec<(String, String)>>,
) -> Result<HttpResponse, ShopError> {
    let mut choices = Vec::new();
    // a provider not in the list is said beside its way, nothing saved
    let mut unknown = Vec::new();
    for (name, value) in form.iter() {
        let Some(method) = PayMethod::parse(name) else {
            continue;
        };
        let provider = match value.as_str() {
            "off" => None,
            other => match ProviderKind::parse(other) {
                Some(kind) => Some(kind),
                None => {
                    unknown.push(methods::Refused {
                        method,
                        reason: "Choose a provider from the list.".into(),
                    });
                    None
                }
            },
        };
        choices.push(Choice { method, provider });
    }
    let currency = crate::staff::catalogue::shop_currency(&shop.pool).await?;
    let saved = if unknown.is_empty() {
        methods::save(&shop.pool, (&session.staff).into(), &currency, &choices).await?
    } else {
        Err(unknown)
    };
    match saved {
        Ok(()) => {
            // the checkout offers the ways from memory: this process reads
            // them before the owner is told
            shop.live.refresh().await;
            Ok(see_other("/admin/settings?notice=pay_saved#pay"))
        }
        Err(refused) => {
            let page = SettingsPage {
                nav: nav(&shop, &session, &NoticeQuery::default()).await?,
                two_factor_for_refunds: crate::staff::two_factor::required_for_refunds(&shop.pool)
                    .await?,
                refunding_roles: refunding_roles(),
                shop_form: crate::storefront::Storefront::read(&shop.pool)
                    .await?
                    .as_edit(),
                shop_refused: Vec::new(),
                pay_ways: super::pay_ways::pay_ways(&shop, Some(&choices), &refused).await?,
            };
            render(StatusCode::BAD_REQUEST, &page)
        }
    }
}
