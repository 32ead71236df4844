//! The Vouchers pages: every voucher with its uses (used, held, left), a
//! form to create one (a discount, an access code that unlocks hidden
//! products, or both), and archiving one. Thin handlers over
//! `staff::vouchers`; what a voucher is and how its uses are held is
//! `crate::vouchers`.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, web};
use askama::Template;

use super::form::Form;
use super::notices::NoticeQuery;
use super::pages::{Nav, money, nav, render, see_other};
use super::picks::{self, PickGroup};
use crate::routes::ShopError;
use crate::staff::catalogue;
use crate::staff::vouchers::{self, VoucherCreated};
use crate::staff::{Session, StaffError};
use crate::state::Shop;
use crate::vouchers::{Created, Discount, NewVoucher, Voucher, VoucherCode};

#[derive(Template)]
#[template(path = "admin/vouchers.html")]
pub(super) struct VouchersPage {
    nav: Nav,
    vouchers: Vec<Voucher>,
}

impl VouchersPage {
    /// What a voucher takes off, in words.
    fn discount(&self, voucher: &Voucher) -> String {
        let currency = voucher.currency.as_deref().unwrap_or("eur");
        match voucher.discount {
            Discount::None => "nothing (an access code)".to_owned(),
            Discount::Percent { percent } => format!("{percent}%"),
            Discount::PerOrder { minor } => format!("{} per order", money(minor, currency)),
            Discount::PerUnit { minor } => format!("{} per unit", money(minor, currency)),
        }
    }

    fn left(&self, voucher: &Voucher) -> i32 {
        voucher.uses - voucher.held - voucher.used
    }
}

/// `GET /admin/vouchers`.
pub async fn vouchers_page(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    notice: web::Query<NoticeQuery>,
) -> Result<HttpResponse, ShopError> {
    let page = VouchersPage {
        nav: nav(&shop, &session, &notice).await?,
        vouchers: crate::vouchers::list(&shop.pool).await?,
    };
    render(StatusCode::OK, &page)
}

#[derive(Template)]
#[template(path = "admin/voucher.html")]
pub(super) struct VoucherPage {
    nav: Nav,
    form: Form,
    /// Products it may be limited to, grouped by event, day or shelf.
    products: Vec<PickGroup>,
    /// Hidden products it may unlock, grouped as `products`.
    hidden: Vec<PickGroup>,
    currency: String,
}

async fn voucher_page(
    shop: &Shop,
    session: &Session,
    form: Form,
    status: StatusCode,
) -> Result<HttpResponse, ShopError> {
    let zone = shop.zone();
    // (group, id, name, hidden): a tier under its event, a slot or a
    // table's time under its collection's day, an item under its shelf
    let on_sale: Vec<(String, String, String, bool)> = catalogue::collections(&shop.pool)
        .await?
        .into_iter()
        .flat_map(|c| {
            let title = c.collection.title;
            let own_time = c.collection.starts_at.is_none();
            c.products.into_iter().map(move |p| {
                let group = match p.starts_at.filter(|_| own_time) {
                    Some(at) => format!("{title}, {}", zone.local(at).format("%a %-d %b")),
                    None => title.clone(),
                };
                (group, p.id, p.name, p.hidden)
            })
        })
        .collect();
    let chosen = |name: &str, id: &str| form.has(name, id);
    let page = VoucherPage {
        nav: nav(shop, session, &NoticeQuery::default()).await?,
        hidden: picks::grouped(on_sale.iter().filter(|p| p.3).map(|(group, id, name, _)| {
            (
                group.clone(),
                id.clone(),
                name.clone(),
                chosen("unlocks", id),
            )
        })),
        products: picks::grouped(on_sale.into_iter().map(|(group, id, name, _)| {
            let ticked = chosen("products", &id);
            (group, id, name, ticked)
        })),
        form,
        currency: catalogue::shop_currency(&shop.pool).await?,
    };
    render(status, &page)
}

/// `GET /admin/vouchers/new`.
pub async fn new_voucher(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
) -> Result<HttpResponse, ShopError> {
    let mut form = Form::default();
    form.set("discount", "percent");
    form.set("uses", "100");
    voucher_page(&shop, &session, form, StatusCode::OK).await
}

/// The voucher a form describes; its errors on the form.
fn read_voucher(form: &mut Form, zone: crate::clock::ShopZone) -> Option<NewVoucher> {
    let code = match VoucherCode::parse(form.value("code")) {
        Ok(code) => Some(code),
        Err(_) => {
            form.fail(
                "code",
                "The code is 3 to 40 letters, digits and hyphens, starting with a letter or digit",
            );
            None
        }
    };
    let kind = form.value("discount").to_owned();
    let (percent_off, amount_off_minor, per_unit) = match kind.as_str() {
        "none" => (None, None, false),
        "percent" => (
            form.whole("percent", "The percentage off", 1, 100),
            None,
            false,
        ),
        "per_order" | "per_unit" => {
            let amount = form.money("amount", "The amount off");
            if amount == Some(0) {
                form.fail("amount", "The amount off is more than zero");
            }
            (None, amount, kind == "per_unit")
        }
        _ => {
            form.fail("discount", "Choose what the voucher takes off");
            (None, None, false)
        }
    };
    let uses = form.whole("uses", "The number of uses", 1, 1_000_000);
    let products: Vec<String> = form
        .all("products")
        .into_iter()
        .map(str::to_owned)
        .collect();
    let unlocks: Vec<String> = form.all("unlocks").into_iter().map(str::to_owned).collect();
    if kind == "none" && unlocks.is_empty() {
        form.fail(
            "unlocks",
            "A voucher without a discount is an access code: choose the hidden product it unlocks",
        );
    }
    let valid_from = form.moment("valid_from", "Valid from", zone, false);
    let valid_until = form.moment("valid_until", "Valid until", zone, false);
    if let (Some(from), Some(until)) = (valid_from, valid_until)
        && from >= until
    {
        form.fail("valid_until", "Valid until is after valid from");
    }
    if !form.ok() {
        return None;
    }
    let voucher = NewVoucher {
        code: code?.to_string(),
        percent_off: percent_off.map(|p| p as i32),
        amount_off_minor,
        per_unit,
        currency: None,
        uses: uses?,
        products: (!products.is_empty()).then_some(products),
        unlocks,
        valid_from,
        valid_until,
        per_buyer: form.ticked("per_buyer"),
    };
    if let Err(error) = voucher.check() {
        form.fail("", error.0);
        return None;
    }
    Some(voucher)
}

/// `POST /admin/vouchers`.
pub async fn create_voucher(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    fields: web::Form<Vec<(String, String)>>,
) -> Result<HttpResponse, ShopError> {
    let mut form = Form::typed(fields.into_inner());
    let Some(voucher) = read_voucher(&mut form, shop.zone()) else {
        return voucher_page(&shop, &session, form, StatusCode::BAD_REQUEST).await;
    };
    let currency = catalogue::shop_currency(&shop.pool).await?;
    let status = match vouchers::create(&shop.pool, &session.staff, &voucher, &currency).await {
        Ok(VoucherCreated::Made(Created::Created { .. })) => {
            return Ok(see_other("/admin/vouchers?notice=voucher_created"));
        }
        Ok(VoucherCreated::Made(Created::Exists { code })) => {
            form.fail(
                "code",
                format!(
                    "A voucher {code} exists already (perhaps archived): choose another code. \
                     Nothing was changed."
                ),
            );
            StatusCode::CONFLICT
        }
        Ok(VoucherCreated::Made(Created::UnknownProducts { ids })) => {
            form.fail(
                "products",
                format!(
                    "The shop does not sell {}. Nothing was changed.",
                    ids.join(", ")
                ),
            );
            StatusCode::BAD_REQUEST
        }
        Ok(VoucherCreated::NotHidden { ids }) => {
            form.fail(
                "unlocks",
                format!(
                    "{} is not hidden: everyone can buy it already. Nothing was changed.",
                    ids.join(", ")
                ),
            );
            StatusCode::BAD_REQUEST
        }
        Err(StaffError::InvalidInput(message)) => {
            form.fail("", message);
            StatusCode::BAD_REQUEST
        }
        Err(other) => return Err(other.into()),
    };
    voucher_page(&shop, &session, form, status).await
}

/// `POST /admin/vouchers/{code}/archive`.
pub async fn archive_voucher(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    code: web::Path<String>,
) -> Result<HttpResponse, ShopError> {
    let code = VoucherCode::parse(&code).map_err(|_| ShopError::not_found("no such voucher"))?;
    if vouchers::archive(&shop.pool, &session.staff, &code).await? {
        Ok(see_other("/admin/vouchers?notice=voucher_archived"))
    } else {
        Err(ShopError::not_found("no such voucher in use"))
    }
}

/// `POST /admin/vouchers/{code}/restore`: an archived voucher in use again.
pub async fn restore_voucher(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    code: web::Path<String>,
) -> Result<HttpResponse, ShopError> {
    let code = VoucherCode::parse(&code).map_err(|_| ShopError::not_found("no such voucher"))?;
    if vouchers::restore(&shop.pool, &session.staff, &code).await? {
        Ok(see_other("/admin/vouchers?notice=voucher_restored"))
    } else {
        Err(ShopError::not_found("no such archived voucher"))
    }
}
