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
use crate::routes::errors::ErrorCode;
use crate::routes::render::{render, see_other};
use crate::state::Shop;

#[derive(Deserialize)]
pub struct LineForm {
    product_id: String,
    qty: Option<i64>,
    /// The access code that unlocked a hidden product.
    code: Option<String>,
    /// The shop's page the shopper added from, to go back to.
    back: Option<String>,
}

/// The cookie that keeps the voucher applied in the basket.
const VOUCHER_COOKIE: &str = "hf_voucher";

/// A page of this shop to go back to: a path of ours (never another
/// site's, `//host` or `/\host`), or `None`.
fn our_page(back: Option<&str>) -> Option<&str> {
    back.filter(|b| {
        b.len() <= 300
            && b.starts_with('/')
            && !b.starts_with("//")
            && b.bytes()
                .all(|c| c.is_ascii_graphic() && c != b'\\' && c != b'#')
    })
}

/// Where an add goes: back to the page it came from, at the product, which
/// says it was added (the header counts the basket); the basket without one.
fn after_add(back: Option<&str>, product: &str) -> String {
    let Some(back) = our_page(back) else {
        return "/basket".to_owned();
    };
    let plain = product
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"-_.:".contains(&b));
    if !plain {
        return back.to_owned();
    }
    let path = back.split('?').next().unwrap_or(back);
    // a hidden product's page keeps its code, a day's page its day; what
    // was added before goes
    let kept: Vec<&str> = back
        .split_once('?')
        .map(|(_, query)| {
            query
                .split('&')
                .filter(|p| p.starts_with("code=") || p.starts_with("day="))
                .collect()
        })
        .unwrap_or_default();
    let mut query = kept.join("&");
    if !query.is_empty() {
        query.push('&');
    }
    format!("{path}?{query}added={product}#p-{product}")
}

/// `POST /basket/add`
pub async fn add_to_basket(
    shop: web::Data<Shop>,
    request: HttpRequest,
    form: web::Form<LineForm>,
) -> Result<HttpResponse, ShopError> {
    let choice = Choice::from_fields(ChoiceFields {
        qty: Some(form.qty.unwrap_or(1)),
        ..ChoiceFields::default()
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
        basket::Added::NotChosenThatWay { kind } => {
            return Err(ShopError::bad_request(&format!(
                "a {} {}",
                kind.sheet().noun,
                kind.choice().fields_words()
            )));
        }
        basket::Added::TooMany {
            max_per_order,
            in_basket,
        } => {
            let told = Told {
                problems: vec![Problem::plain(too_many_words(max_per_order, in_basket))],
                back: our_page(form.back.as_deref())
                    .unwrap_or_default()
                    .to_owned(),
                ..Told::default()
            };
            let status = ErrorCode::OverLimit.page_status();
            return basket_page(&shop, &request, status, told).await;
        }
    }
    let mut response = see_other(&after_add(form.back.as_deref(), &form.product_id));
    if fresh {
        response
            .add_cookie(&basket_cookie(&shop, id))
            .map_err(|e| ShopError::internal(e.into()))?;
    }
    Ok(response)
}

/// A quantity over one order's most, said with what can be done.
fn too_many_words(max_per_order: i32, in_basket: i32) -> String {
    let units = |n: i32| {
        if n == 1 {
            "1 unit".to_owned()
        } else {
            format!("{n} units")
        }
    };
    if in_basket > 0 {
        format!(
            "One order takes at most {} of this, and your basket has {in_basket}. Nothing was \
             added; change the quantity below if you like.",
            units(max_per_order)
        )
    } else {
        format!(
            "One order takes at most {} of this. Nothing was added.",
            units(max_per_order)
        )
    }
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

#[derive(Deserialize)]
pub struct QtyForm {
    product_id: String,
    qty: String,
}

/// `POST /basket/update`: how many of a line the basket has (0 takes it
/// out). Over one order's most, the basket says so and stays as it was.
pub async fn update_basket(
    shop: web::Data<Shop>,
    request: HttpRequest,
    form: web::Form<QtyForm>,
) -> Result<HttpResponse, ShopError> {
    let qty = form
        .qty
        .trim()
        .parse::<i32>()
        .ok()
        .filter(|q| (0..=100).contains(q));
    let Some(qty) = qty else {
        let told = Told {
            problems: vec![Problem::plain("Choose a quantity from 0 to 100.")],
            ..Told::default()
        };
        return basket_page(&shop, &request, StatusCode::BAD_REQUEST, told).await;
    };
    let Some(id) = basket_id(&request) else {
        return Ok(see_other("/basket"));
    };
    // a party's size is chosen with its time (the room decides which
    // tables seat it): the basket takes it away, never changes it
    let parties =
        crate::routes::tables::book::party_products(&shop, std::slice::from_ref(&form.product_id))
            .await?;
    if qty > 0 && !parties.is_empty() {
        let told = Told {
            problems: vec![Problem::plain(
                "A booking's party is chosen with its time: remove the booking and choose a \
                 time for the new party on the restaurant's booking page. Nothing changed.",
            )],
            ..Told::default()
        };
        return basket_page(&shop, &request, StatusCode::CONFLICT, told).await;
    }
    let changed = retry("basket_update", Bound::Shopper, || {
        basket::set_qty(&shop.pool, &id, &form.product_id, qty)
    })
    .await?;
    match changed {
        basket::Added::Added { .. }
        | basket::Added::Unknown
        | basket::Added::NotChosenThatWay { .. } => Ok(see_other("/basket")),
        basket::Added::TooMany {
            max_per_order,
            in_basket,
        } => {
            let told = Told {
                problems: vec![Problem::plain(too_many_words(max_per_order, in_basket))],
                ..Told::default()
            };
            basket_page(&shop, &request, ErrorCode::OverLimit.page_status(), told).await
        }
    }
}

#[derive(Deserialize)]
pub struct VoucherForm {
    #[serde(default)]
    voucher: String,
    /// Present: take the voucher off again.
    remove: Option<String>,
}

/// `POST /basket/voucher`: apply a voucher to the basket (its new total
/// shows before paying), or take it off. A code that cannot be used is
/// refused beside its field, and the basket stays as it was.
pub async fn apply_voucher(
    shop: web::Data<Shop>,
    request: HttpRequest,
    form: web::Form<VoucherForm>,
) -> Result<HttpResponse, ShopError> {
    let typed = form.voucher.trim();
    if form.remove.is_some() || typed.is_empty() {
        let mut response = see_other("/basket");
        let mut gone = voucher_cookie(&shop, String::new());
        gone.make_removal();
        response
            .add_cookie(&gone)
            .map_err(|e| ShopError::internal(e.into()))?;
        return Ok(response);
    }
    let rows = basket_rows(&shop, &request).await?;
    let applied = retry("voucher_read", Bound::Shopper, || {
        basket::apply_voucher(&shop.pool, typed, &rows)
    })
    .await?;
    match applied {
        Ok(applied) => {
            let mut response = see_other("/basket");
            response
                .add_cookie(&voucher_cookie(&shop, applied.code.to_string()))
                .map_err(|e| ShopError::internal(e.into()))?;
            Ok(response)
        }
        Err((code, refusal)) => {
            let told = Told {
                voucher_problem: format!("The code {code} {}.", refusal.words(shop.zone())),
                voucher: code,
                ..Told::default()
            };
            let status = ErrorCode::BadVoucher.page_status();
            basket_page_of(&shop, rows, None, status, told).await
        }
    }
}

/// The cookie that names a new basket.
pub(in crate::routes) fn basket_cookie(shop: &Shop, id: String) -> Cookie<'static> {
    Cookie::build(BASKET_COOKIE, id)
        .path("/")
        .http_only(true)
        .secure(shop.secure_cookies())
        .same_site(SameSite::Lax)
        .max_age(actix_web::cookie::time::Duration::days(7))
        .finish()
}

pub(super) fn voucher_cookie(shop: &Shop, code: String) -> Cookie<'static> {
    Cookie::build(VOUCHER_COOKIE, code)
        .path("/")
        .http_only(true)
        .secure(shop.secure_cookies())
        .same_site(SameSite::Lax)
        .max_age(actix_web::cookie::time::Duration::days(7))
        .finish()
}

/// The voucher the basket has applied, if any.
fn applied_code(request: &HttpRequest) -> Option<String> {
    request
        .cookie(VOUCHER_COOKIE)
        .map(|c| c.value().to_owned())
        .filter(|code| !code.is_empty() && code.len() <= 40)
}

pub struct BasketLineView {
    pub product_id: String,
    pub name: String,
    pub qty: i32,
    /// A party at a time (a table booking): said as "Party of 4", its
    /// size chosen with its time, not in the basket.
    pub party: bool,
    pub total: String,
    /// When it happens ("Sun 20 Dec 19:30 CET"); empty: its name says.
    pub when: String,
    /// The seats picked on the map ("E-5, E-6"): changed on the map, not
    /// with a quantity. Empty: not seats by name.
    pub seats: String,
}

#[derive(Template)]
#[template(path = "basket.html")]
struct BasketPage {
    basket_count: i64,
    lines: Vec<BasketLineView>,
    /// The lines' total, before a voucher.
    subtotal: String,
    /// The voucher applied and what it takes off ("−€5.00"); empty: none.
    voucher: String,
    off: String,
    /// What the provider is asked for.
    total: String,
    checkout_key: String,
    /// The lines as the form sends them back (see [`FormLines`]).
    form_lines: String,
    told: Told,
    /// The ways to pay a shopper may choose for this basket: (form value,
    /// label, hint) ([`crate::payments::methods`]).
    ways: Vec<(&'static str, &'static str, &'static str)>,
    /// Ways the owner offers that this basket cannot use, each saying why
    /// ([`crate::payments::timing`]).
    too_slow: Vec<String>,
    /// A line is a booking: its guest gives a phone.
    asks_phone: bool,
    /// Every line is a booking: the column says "Party".
    all_parties: bool,
    /// Nothing to pay: the form confirms.
    free: bool,
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
    /// A booking's phone, filled in again.
    pub(super) phone: String,
    /// The voucher code, filled in again, and what was wrong with it.
    pub(super) voucher: String,
    pub(super) voucher_problem: String,
    /// Said above the basket, not as an error ("your items are back").
    pub(super) note: String,
    /// The shop's page a refused add came from, to go back to.
    pub(super) back: String,
    /// The problems stopped a checkout (not a change to the basket).
    pub(super) at_checkout: bool,
}

impl Told {
    pub(super) fn problems(problems: Vec<Problem>, name: &str, email: &str) -> Self {
        Self {
            problems,
            at_checkout: true,
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

/// The basket's lines, read.
async fn basket_rows(
    shop: &Shop,
    request: &HttpRequest,
) -> Result<Vec<basket::BasketLine>, ShopError> {
    Ok(match basket_id(request) {
        Some(id) => {
            retry("basket_read", Bound::Shopper, || {
                basket::lines(&shop.pool, &id)
            })
            .await?
        }
        None => Vec::new(),
    })
}

pub(super) async fn basket_page(
    shop: &Shop,
    request: &HttpRequest,
    status: StatusCode,
    told: Told,
) -> Result<HttpResponse, ShopError> {
    let rows = basket_rows(shop, request).await?;
    basket_page_of(shop, rows, applied_code(request), status, told).await
}

/// The basket page for rows already read, with the voucher applied to
/// them (`voucher`: the code the basket or the form carried).
pub(super) async fn basket_page_of(
    shop: &Shop,
    rows: Vec<basket::BasketLine>,
    voucher: Option<String>,
    status: StatusCode,
    mut told: Told,
) -> Result<HttpResponse, ShopError> {
    // a hidden product came with its code: it is applied with the basket
    let code = voucher
        .filter(|c| !c.trim().is_empty())
        .or_else(|| rows.iter().find_map(|r| r.unlocked_by.clone()));
    let mut applied = None;
    if let Some(code) = code.filter(|_| !rows.is_empty()) {
        let judged = retry("voucher_read", Bound::Shopper, || {
            basket::apply_voucher(&shop.pool, &code, &rows)
        })
        .await?;
        match judged {
            Ok(ok) => applied = Some(ok),
            Err((code, refusal)) if told.voucher_problem.is_empty() => {
                told.voucher_problem = format!(
                    "The code {code} {}, so it was taken off.",
                    refusal.words(shop.zone())
                );
            }
            Err(_) => {}
        }
    }
    let currency = rows
        .first()
        .map(|r| r.currency.clone())
        .unwrap_or_else(|| "eur".into());
    let subtotal: i64 = rows.iter().map(|r| r.price_minor * i64::from(r.qty)).sum();
    let off = applied.as_ref().map_or(0, |a| a.off_minor);
    if told.voucher.is_empty()
        && let Some(applied) = &applied
    {
        told.voucher = applied.code.to_string();
    }
    let ids: Vec<String> = rows.iter().map(|r| r.product_id.clone()).collect();
    let parties = crate::routes::tables::book::party_products(shop, &ids).await?;
    // a way whose money may come after the first item starts is left out,
    // and the page says why
    let (_, ways) = retry("pay_methods_read", Bound::Shopper, || {
        shop.live.ways_to_pay()
    })
    .await?;
    let terms = retry("pay_methods_read", Bound::Shopper, || {
        shop.live.settle_terms()
    })
    .await?;
    // (the lines' own `starts_at` is for showing: a slot's name says it)
    let starts = retry("basket_read", Bound::Shopper, || {
        shop.live.first_start(&ids)
    })
    .await?;
    let now = chrono::Utc::now();
    let mut too_slow = Vec::new();
    let ways = ways
        .offered(&shop.payments, &currency)
        .into_iter()
        .filter(
            |(method, kind)| match terms.too_slow(*kind, *method, starts, now) {
                Some(slow) => {
                    too_slow.push(slow.words());
                    false
                }
                None => true,
            },
        )
        .map(|(method, _)| (method.as_str(), method.label(), method.hint()))
        .collect();
    let page = BasketPage {
        // a booking asks a phone
        asks_phone: !parties.is_empty(),
        all_parties: !rows.is_empty() && parties.len() == rows.len(),
        free: !rows.is_empty() && subtotal - off == 0,
        // a party is one booking, whatever its size (as every page counts)
        basket_count: rows
            .iter()
            .map(|r| {
                if parties.contains(&r.product_id) {
                    1
                } else {
                    i64::from(r.qty)
                }
            })
            .sum(),
        lines: rows
            .iter()
            .map(|r| BasketLineView {
                product_id: r.product_id.clone(),
                name: r.name.clone(),
                qty: r.qty,
                party: parties.contains(&r.product_id),
                total: money::format(r.price_minor * i64::from(r.qty), &r.currency),
                when: r
                    .starts_at
                    .map(|at| shop.zone().long(at))
                    .unwrap_or_default(),
                seats: r.seats.as_deref().unwrap_or_default().join(", "),
            })
            .collect(),
        subtotal: money::format(subtotal, &currency),
        voucher: applied
            .as_ref()
            .map(|a| a.code.to_string())
            .unwrap_or_default(),
        off: if off > 0 {
            format!("−{}", money::format(off, &currency))
        } else {
            String::new()
        },
        total: money::format(subtotal - off, &currency),
        // a fresh key per rendered form: submitting it twice is one order
        checkout_key: checkout::codes::checkout_key(),
        form_lines: basket::FormLines::of(&rows),
        told,
        ways,
        too_slow,
    };
    render(status, &page)
}

#[derive(Deserialize)]
pub struct BasketQuery {
    /// Set after leaving checkout: the items are back.
    left: Option<String>,
}

/// `GET /basket`
pub async fn basket(
    shop: web::Data<Shop>,
    request: HttpRequest,
    query: web::Query<BasketQuery>,
) -> Result<HttpResponse, ShopError> {
    let told = Told {
        note: if query.left.is_some() {
            "You left checkout: nothing was charged, and your items are back in your basket."
                .to_owned()
        } else {
            String::new()
        },
        ..Told::default()
    };
    basket_page(&shop, &request, StatusCode::OK, told).await
}

#[cfg(test)]
mod tests {
    use super::after_add;

    #[test]
    fn an_add_comes_back_to_a_page_of_ours_with_its_code_and_day() {
        let back = |page: &str| after_add(Some(page), "slot-1");
        assert_eq!(back("/"), "/?added=slot-1#p-slot-1");
        assert_eq!(
            back("/c/bakery?day=2026-12-04&added=slot-0"),
            "/c/bakery?day=2026-12-04&added=slot-1#p-slot-1"
        );
        assert_eq!(
            back("/c/jazz?code=FANS-1"),
            "/c/jazz?code=FANS-1&added=slot-1#p-slot-1"
        );
        for elsewhere in ["//evil.example", "https://evil.example", "/\\evil", "x", ""] {
            assert_eq!(back(elsewhere), "/basket", "{elsewhere}");
        }
        assert_eq!(after_add(None, "slot-1"), "/basket");
    }
}
