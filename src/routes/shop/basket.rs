//! The basket: adding and removing lines (nothing is held until checkout),
//! and its page with the checkout form.

use actix_web::cookie::{Cookie, SameSite};
use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use askama::Template;
use serde::Deserialize;

use super::{BASKET_COOKIE, basket_id, too_fast};
use crate::catalogue::{Choice, ChoiceFields};
use crate::checkout::{self, basket};
use crate::money;
use crate::retry::{Bound, retry};
use crate::routes::ShopError;
use crate::routes::render::{render, see_other};
use crate::state::Shop;

#[derive(Deserialize)]
pub struct LineForm {
    product_id: String,
    qty: Option<i64>,
    /// The access code that unlocked a hidden product.
    code: Option<String>,
}

/// `POST /basket/add`
pub async fn add_to_basket(
    shop: web::Data<Shop>,
    request: HttpRequest,
    form: web::Form<LineForm>,
) -> Result<HttpResponse, ShopError> {
    let choice = Choice::from_fields(ChoiceFields {
        qty: Some(form.qty.unwrap_or(1)),
    });
    let (Ok(choice), false) = (
        choice,
        form.product_id.is_empty() || form.product_id.len() > 200,
    ) else {
        return Err(ShopError::bad_request(
            "choose between 1 and 100 of a product",
        ));
    };
    if let Some(too_fast) = slow_down(&shop, &request).await? {
        return Ok(too_fast);
    }
    let (id, fresh) = match basket_id(&request) {
        Some(id) => (id, false),
        None => (checkout::codes::order_token(), true),
    };
    // one add, run again whole while the database is away
    let add = uuid::Uuid::new_v4();
    let added = retry("basket_add", Bound::Shopper, || {
        basket::add(
            &shop.pool,
            &id,
            &form.product_id,
            &choice,
            add,
            form.code
                .as_deref()
                .map(str::trim)
                .filter(|c| !c.is_empty()),
        )
    })
    .await?;
    match added {
        basket::Added::Added { .. } => {}
        basket::Added::Unknown => {
            return Err(ShopError::not_found("that product is not for sale"));
        }
        basket::Added::TooMany {
            max_per_order,
            in_basket,
        } => {
            return Err(ShopError::conflict(&format!(
                "one order takes at most {max_per_order} of that (your basket has {in_basket}); \
                 nothing was added"
            )));
        }
    }
    let mut response = see_other("/basket");
    if fresh {
        let cookie = Cookie::build(BASKET_COOKIE, id)
            .path("/")
            .http_only(true)
            .secure(shop.secure_cookies())
            .same_site(SameSite::Lax)
            .max_age(actix_web::cookie::time::Duration::days(7))
            .finish();
        response
            .add_cookie(&cookie)
            .map_err(|e| ShopError::internal(e.into()))?;
    }
    Ok(response)
}

/// One basket add or checkout start from the client's address: `Some`
/// is the 429 to answer when the address has gone over its rate.
pub(super) async fn slow_down(
    shop: &Shop,
    request: &HttpRequest,
) -> Result<Option<HttpResponse>, ShopError> {
    let address = shop.fairness.address(request);
    match retry("rate_take", Bound::Shopper, || shop.fairness.take(&address)).await? {
        Ok(()) => Ok(None),
        Err(refused) => too_fast(&address, refused).map(Some),
    }
}

/// `POST /basket/remove`
pub async fn remove_from_basket(
    shop: web::Data<Shop>,
    request: HttpRequest,
    form: web::Form<LineForm>,
) -> Result<HttpResponse, ShopError> {
    if let Some(id) = basket_id(&request) {
        let ids = std::slice::from_ref(&form.product_id);
        retry("basket_remove", Bound::Shopper, || {
            basket::remove(&shop.pool, &id, ids)
        })
        .await?;
    }
    Ok(see_other("/basket"))
}

pub struct BasketLineView {
    pub product_id: String,
    pub name: String,
    pub qty: i32,
    pub total: String,
}

#[derive(Template)]
#[template(path = "basket.html")]
struct BasketPage {
    basket_count: i64,
    lines: Vec<BasketLineView>,
    total: String,
    checkout_key: String,
    /// The lines as the form sends them back (see [`FormLines`]).
    form_lines: String,
    told: Told,
    providers: Vec<&'static str>,
}

/// What the basket page tells the shopper above its form, and what it
/// fills the form in with again (a shopper who lost a race does not type
/// their name twice).
#[derive(Default)]
pub(super) struct Told {
    pub(super) problems: Vec<Problem>,
    pub(super) error: String,
    pub(super) name: String,
    pub(super) email: String,
    /// The voucher code, filled in again, and what was wrong with it.
    pub(super) voucher: String,
    pub(super) voucher_problem: String,
}

impl Told {
    pub(super) fn problems(problems: Vec<Problem>, name: &str, email: &str) -> Self {
        Self {
            problems,
            ..Self::refilled(name, email)
        }
    }

    pub(super) fn refilled(name: &str, email: &str) -> Self {
        Self {
            name: name.chars().take(200).collect(),
            email: email.chars().take(254).collect(),
            ..Self::default()
        }
    }
}

/// One thing wrong with a basket, as its page lists it. A sold-out line
/// names its product, so the page can watch for units coming back.
pub struct Problem {
    pub(super) text: String,
    /// The sold-out product, or empty.
    pub(super) product: String,
    pub(super) note: String,
}

impl Problem {
    pub(super) fn plain(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            product: String::new(),
            note: String::new(),
        }
    }
}

pub(super) async fn basket_page(
    shop: &Shop,
    request: &HttpRequest,
    status: StatusCode,
    told: Told,
) -> Result<HttpResponse, ShopError> {
    let rows = match basket_id(request) {
        Some(id) => {
            retry("basket_read", Bound::Shopper, || {
                basket::lines(&shop.pool, &id)
            })
            .await?
        }
        None => Vec::new(),
    };
    basket_page_of(shop, rows, status, told)
}

/// The basket page for rows already read.
pub(super) fn basket_page_of(
    shop: &Shop,
    rows: Vec<basket::BasketLine>,
    status: StatusCode,
    mut told: Told,
) -> Result<HttpResponse, ShopError> {
    // a hidden product came with its code: the form offers it again
    if told.voucher.is_empty()
        && let Some(code) = rows.iter().find_map(|r| r.unlocked_by.clone())
    {
        told.voucher = code;
    }
    let currency = rows
        .first()
        .map(|r| r.currency.clone())
        .unwrap_or_else(|| "eur".into());
    let total: i64 = rows.iter().map(|r| r.price_minor * i64::from(r.qty)).sum();
    let page = BasketPage {
        basket_count: rows.iter().map(|r| i64::from(r.qty)).sum(),
        lines: rows
            .iter()
            .map(|r| BasketLineView {
                product_id: r.product_id.clone(),
                name: r.name.clone(),
                qty: r.qty,
                total: money::format(r.price_minor * i64::from(r.qty), &r.currency),
            })
            .collect(),
        total: money::format(total, &currency),
        // a fresh key per rendered form: submitting it twice is one order
        checkout_key: checkout::codes::checkout_key(),
        form_lines: basket::FormLines::of(&rows),
        told,
        providers: shop.payments.kinds().iter().map(|p| p.as_str()).collect(),
    };
    render(status, &page)
}

/// `GET /basket`
pub async fn basket(
    shop: web::Data<Shop>,
    request: HttpRequest,
) -> Result<HttpResponse, ShopError> {
    basket_page(&shop, &request, StatusCode::OK, Told::default()).await
}
