//! The owner's pages: Staff (accounts, roles, disabling, a lost second
//! factor) and Settings (two-factor sign-in required of everyone who can
//! refund). Thin handlers over `staff::accounts` and `staff::two_factor`.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, web};
use askama::Template;
use serde::Deserialize;

use super::form::{Form, refusal};
use super::notices::NoticeQuery;
use super::pages::{Nav, nav, render, see_other};
use crate::audit::Actor;
use crate::routes::ShopError;
use crate::staff::accounts::{self, AccountRow, Change};
use crate::staff::invites::{self, InviteRow, Invited};
use crate::staff::roles::Role;
use crate::staff::two_factor::{self, SettingOutcome};
use crate::staff::{Session, StaffEmail};
use crate::state::Shop;

#[derive(Template)]
#[template(path = "admin/staff.html")]
pub(super) struct StaffPage {
    nav: Nav,
    accounts: Vec<AccountRow>,
    /// Invites not used nor cancelled.
    invites: Vec<InviteRow>,
    roles: [Role; 3],
    me: i64,
    /// The form to invite someone: empty, or as typed when it was refused.
    form: Form,
    /// An account whose role change was refused, and why.
    role_refused: Option<(i64, String)>,
}

impl StaffPage {
    /// Why an account's role change was refused, if it was.
    fn role_error(&self, id: impl super::pages::Plain<i64>) -> Option<&str> {
        let id = id.plain();
        self.role_refused
            .as_ref()
            .filter(|(account, _)| *account == id)
            .map(|(_, message)| message.as_str())
    }
}

/// `GET /admin/staff`.
pub async fn staff_page(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    notice: web::Query<NoticeQuery>,
) -> Result<HttpResponse, ShopError> {
    let page = StaffPage {
        nav: nav(&shop, &session, &notice).await?,
        accounts: accounts::list(&shop.pool).await?,
        invites: invites::open(&shop.pool).await?,
        roles: Role::ALL,
        me: session.staff.id,
        form: Form::default(),
        role_refused: None,
    };
    render(StatusCode::OK, &page)
}

fn account_id(id: &str) -> Result<i64, ShopError> {
    id.parse()
        .map_err(|_| ShopError::not_found("no such staff account"))
}

fn after(change: Change, done: &str) -> Result<HttpResponse, ShopError> {
    let notice = match change {
        Change::Done => done,
        Change::Unchanged => "staff_unchanged",
        Change::LastOwner => "last_owner",
        Change::NoSuchAccount => return Err(ShopError::not_found("no such staff account")),
    };
    Ok(see_other(&format!("/admin/staff?notice={notice}")))
}

/// `POST /admin/staff`: invite an address with a role (fields `email`,
/// `role`): a mail with a link to choose their own password. A refused
/// one is the Staff page again with what was typed and why, beside its
/// field (400).
pub async fn invite(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    form: web::Form<Vec<(String, String)>>,
) -> Result<HttpResponse, ShopError> {
    let mut form = Form::typed(form.into_inner());
    let email = StaffEmail::parse(form.value("email"))
        .map_err(|error| form.fail("email", refusal(&error.to_string())))
        .ok();
    let role = Role::parse(form.value("role"));
    if role.is_none() {
        form.fail(
            "role",
            "Choose owner, box office or door. Nothing was changed.",
        );
    }
    if let (Some(email), Some(role)) = (email, role) {
        let actor = Actor::from(&session.staff);
        return Ok(see_other(
            match invites::invite(&shop.pool, actor, &email, role).await? {
                Invited::Sent => "/admin/staff?notice=invite_sent",
                Invited::HasAccount => "/admin/staff?notice=staff_exists",
            },
        ));
    }
    let page = StaffPage {
        nav: nav(&shop, &session, &NoticeQuery::default()).await?,
        accounts: accounts::list(&shop.pool).await?,
        invites: invites::open(&shop.pool).await?,
        roles: Role::ALL,
        me: session.staff.id,
        form,
        role_refused: None,
    };
    render(StatusCode::BAD_REQUEST, &page)
}

/// `POST /admin/staff/invites/{id}/resend`: a new link (the old one stops
/// working) for another 72 hours.
pub async fn resend_invite(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    id: web::Path<String>,
) -> Result<HttpResponse, ShopError> {
    let gone = || ShopError::not_found("no such invite waiting");
    let id: i64 = id.parse().map_err(|_| gone())?;
    if invites::resend(&shop.pool, Actor::from(&session.staff), id).await? {
        Ok(see_other("/admin/staff?notice=invite_resent"))
    } else {
        Err(gone())
    }
}

/// `POST /admin/staff/invites/{id}/cancel`: the link stops working.
pub async fn cancel_invite(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    id: web::Path<String>,
) -> Result<HttpResponse, ShopError> {
    let gone = || ShopError::not_found("no such invite waiting");
    let id: i64 = id.parse().map_err(|_| gone())?;
    if invites::cancel(&shop.pool, Actor::from(&session.staff), id).await? {
        Ok(see_other("/admin/staff?notice=invite_cancelled"))
    } else {
        Err(gone())
    }
}

#[derive(Deserialize)]
pub struct RoleForm {
    #[serde(default)]
    role: String,
}

/// `POST /admin/staff/{id}/role`: field `role`. One not known is the
/// Staff page again with why beside that account's choice (400).
pub async fn change_role(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    id: web::Path<String>,
    form: web::Form<RoleForm>,
) -> Result<HttpResponse, ShopError> {
    let id = account_id(&id)?;
    let Some(role) = Role::parse(&form.role) else {
        let page = StaffPage {
            nav: nav(&shop, &session, &NoticeQuery::default()).await?,
            accounts: accounts::list(&shop.pool).await?,
            roles: Role::ALL,
            me: session.staff.id,
            form: Form::default(),
            invites: invites::open(&shop.pool).await?,
            role_refused: Some((
                id,
                "Choose owner, box office or door. Nothing was changed.".to_owned(),
            )),
        };
        return render(StatusCode::BAD_REQUEST, &page);
    };
    let change = accounts::change_role(&shop.pool, Actor::from(&session.staff), id, role).await?;
    after(change, "role_changed")
}

/// `POST /admin/staff/{id}/disable`: disabled, its sessions ended.
pub async fn disable(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    id: web::Path<String>,
) -> Result<HttpResponse, ShopError> {
    let id = account_id(&id)?;
    let change = accounts::disable(&shop.pool, Actor::from(&session.staff), id).await?;
    after(change, "staff_disabled")
}

/// `POST /admin/staff/{id}/enable`.
pub async fn enable(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    id: web::Path<String>,
) -> Result<HttpResponse, ShopError> {
    let id = account_id(&id)?;
    let change = accounts::enable(&shop.pool, Actor::from(&session.staff), id).await?;
    after(change, "staff_enabled")
}

/// `POST /admin/staff/{id}/two-factor/reset`: a lost phone; the account
/// signs in with its password and enrols again.
pub async fn reset_two_factor(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    id: web::Path<String>,
) -> Result<HttpResponse, ShopError> {
    let id = account_id(&id)?;
    let was_on = two_factor::reset(&shop.pool, Actor::from(&session.staff), id).await?;
    Ok(see_other(if was_on {
        "/admin/staff?notice=two_factor_reset"
    } else {
        "/admin/staff?notice=staff_unchanged"
    }))
}

#[derive(Template)]
#[template(path = "admin/settings.html")]
pub(super) struct SettingsPage {
    pub(super) nav: Nav,
    pub(super) two_factor_for_refunds: bool,
    /// The roles the setting covers, as the page names them.
    pub(super) refunding_roles: String,
    /// The shop's name and looks, as stored or as just typed
    /// ([`super::storefront`]).
    pub(super) shop_form: crate::storefront::StorefrontEdit,
    /// Why what was typed there was not saved, per field.
    pub(super) shop_refused: Vec<crate::storefront::Refused>,
    /// Which provider serves each way to pay ([`super::pay_ways::PayWay`]).
    pub(super) pay_ways: Vec<super::pay_ways::PayWay>,
}

/// One field of the shop's section: its name, label, value, input type
/// and hint.
pub(super) struct ShopField<'a> {
    pub(super) name: &'static str,
    pub(super) label: &'static str,
    pub(super) value: &'a str,
    pub(super) kind: &'static str,
    pub(super) hint: &'static str,
}

impl SettingsPage {
    /// The shop's section's fields, in the page's order.
    fn shop_fields(&self) -> Vec<ShopField<'_>> {
        let f = &self.shop_form;
        fn field<'a>(
            name: &'static str,
            label: &'static str,
            value: &'a str,
            kind: &'static str,
            hint: &'static str,
        ) -> ShopField<'a> {
            ShopField {
                name,
                label,
                value,
                kind,
                hint,
            }
        }
        vec![
            field(
                "name",
                "Name",
                &f.name,
                "text",
                "Shown at the top of every page, up to 100 characters.",
            ),
            field(
                "description",
                "Description",
                &f.description,
                "text",
                "One line at the foot of every page, up to 300 characters.",
            ),
            field(
                "accent",
                "Accent colour",
                &f.accent,
                "text",
                "Like #0b6e4f: dark enough for white text on it.",
            ),
            field(
                "contact_email",
                "Contact e-mail",
                &f.contact_email,
                "email",
                "Where shoppers write to you.",
            ),
            field(
                "terms_url",
                "Terms",
                &f.terms_url,
                "url",
                "A web address, or empty.",
            ),
            field(
                "privacy_url",
                "Privacy notice",
                &f.privacy_url,
                "url",
                "A web address, or empty.",
            ),
            field(
                "imprint_url",
                "Imprint",
                &f.imprint_url,
                "url",
                "A web address, or empty.",
            ),
            field(
                "time_zone",
                "Time zone",
                &f.time_zone,
                "text",
                "Where the shop is, like Europe/Berlin or Asia/Kolkata: every page and mail \
                 shows times in it, and times you type are read in it. Empty: the zone the \
                 server was started with.",
            ),
        ]
    }

    /// The zone names the time zone field suggests.
    fn zone_names(&self) -> Vec<&'static str> {
        crate::clock::ShopZone::names().collect()
    }

    /// Why a field of the shop's section was refused; empty: it was not.
    fn shop_error(&self, field: &str) -> &str {
        self.shop_refused
            .iter()
            .find(|refused| refused.field == field)
            .map_or("", |refused| refused.message.as_str())
    }
}

/// The roles two-factor for refunds covers, as the page names them.
pub(super) fn refunding_roles() -> String {
    let roles: Vec<&str> = Role::ALL
        .into_iter()
        .filter(|role| role.refunds())
        .map(|role| role.label())
        .collect();
    roles.join(" and ").to_lowercase()
}

/// `GET /admin/settings`.
pub async fn settings_page(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    notice: web::Query<NoticeQuery>,
) -> Result<HttpResponse, ShopError> {
    let page = SettingsPage {
        nav: nav(&shop, &session, &notice).await?,
        two_factor_for_refunds: two_factor::required_for_refunds(&shop.pool).await?,
        refunding_roles: refunding_roles(),
        shop_form: crate::storefront::Storefront::read(&shop.pool)
            .await?
            .as_edit(),
        shop_refused: Vec::new(),
        pay_ways: super::pay_ways::pay_ways(&shop, None, &[]).await?,
    };
    render(StatusCode::OK, &page)
}

#[derive(Deserialize)]
pub struct SettingsForm {
    /// A ticked checkbox sends `on`; an unticked one sends nothing.
    two_factor_for_refunds: Option<String>,
}

/// `POST /admin/settings`.
pub async fn save_settings(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    form: web::Form<SettingsForm>,
) -> Result<HttpResponse, ShopError> {
    let on = form.two_factor_for_refunds.is_some();
    let outcome = two_factor::set_required_for_refunds(&shop.pool, &session, on).await?;
    Ok(see_other(match outcome {
        SettingOutcome::Changed | SettingOutcome::Unchanged => {
            "/admin/settings?notice=settings_saved"
        }
        SettingOutcome::EnrolFirst => "/admin/settings?notice=enrol_first",
    }))
}
