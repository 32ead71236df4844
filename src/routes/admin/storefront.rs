//! The shop's own section of the Settings page: its name, description,
//! accent colour, contact address and legal links ([`crate::storefront`]).
//! Owners only (the Settings permission); every field checked, a refusal
//! shown beside its field with nothing saved.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, web};

use super::notices::NoticeQuery;
use super::pages::{nav, render};
use super::staff_accounts::{SettingsPage, refunding_roles};
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
