//! The waiting list's pages: joining a sold-out product's list, and an
//! entry's page (its link is in the shopper's mail): confirm, see the
//! place in line, leave, and pay for units held for it. Each action is a
//! form (POST), so a mail scanner that opens links changes nothing.

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use askama::Template;
use serde::Deserialize;

use super::basket::slow_down;
use super::{basket_count, message};
use crate::money;
use crate::retry::{Bound, retry};
use crate::routes::ShopError;
use crate::routes::render::{render, see_other};
use crate::state::Shop;
use crate::waitlist::{self, Claim, Confirmed, Entry, EntryState, JoinRequest, Joined};

#[derive(Template)]
#[template(path = "waitlist_join.html")]
struct JoinPage {
    basket_count: i64,
    product_id: String,
    product: String,
    price: String,
    max_qty: i32,
    claim_minutes: i32,
    in_order: bool,
    /// Its drop queue takes entries: the join is to the queue.
    queue_open: bool,
    opens: String,
    error: String,
    name: String,
    email: String,
    qty: i64,
}

#[derive(sqlx::FromRow)]
struct ProductRow {
    name: String,
    price_minor: i64,
    currency: String,
    max_per_order: i32,
    waitlist_claim_minutes: i32,
    waitlist_in_order: bool,
    queue_open: bool,
    sale_opens_at: Option<chrono::DateTime<chrono::Utc>>,
}

async fn product_row(shop: &Shop, id: &str) -> Result<ProductRow, ShopError> {
    if id.is_empty() || id.len() > 200 {
        return Err(ShopError::not_found("that product is not for sale"));
    }
    retry("product_read", Bound::Shopper, || {
        sqlx::query_as::<_, ProductRow>(
            "select name, price_minor, currency, max_per_order, waitlist_claim_minutes, \
                    waitlist_in_order, sale_opens_at, \
                    (queue_commitment is not null and queue_drawn_at is null) as queue_open \
               from products where id = $1 and active and archived_at is null and not hidden",
        )
        .bind(id)
        .fetch_optional(&shop.pool)
    })
    .await?
    .ok_or_else(|| ShopError::not_found("that product is not for sale"))
}

#[allow(clippy::too_many_arguments)]
async fn join_page(
    shop: &Shop,
    request: &HttpRequest,
    product_id: &str,
    status: StatusCode,
    error: String,
    name: String,
    email: String,
    qty: i64,
) -> Result<HttpResponse, ShopError> {
    let product = product_row(shop, product_id).await?;
    let page = JoinPage {
        basket_count: basket_count(shop, request).await?,
        product_id: product_id.to_owned(),
        price: money::format(product.price_minor, &product.currency),
        product: product.name,
        max_qty: product.max_per_order,
        claim_minutes: product.waitlist_claim_minutes,
        in_order: product.waitlist_in_order,
        queue_open: product.queue_open,
        opens: product
            .sale_opens_at
            .map(|at| shop.zone().minute(at))
            .unwrap_or_default(),
        error,
        name,
        email,
        qty,
    };
    render(status, &page)
}

/// `GET /waitlist/{product}`: the form to join a product's waiting list.
pub async fn join_form(
    shop: web::Data<Shop>,
    request: HttpRequest,
    product: web::Path<String>,
) -> Result<HttpResponse, ShopError> {
    join_page(
        &shop,
        &request,
        &product,
        StatusCode::OK,
        String::new(),
        String::new(),
        String::new(),
        1,
    )
    .await
}

#[derive(Deserialize)]
pub struct JoinForm {
    name: String,
    email: String,
    qty: Option<i64>,
}

/// `POST /waitlist/{product}`: join; the answer is the same whether or not
/// the e-mail was on the list already.
pub async fn join(
    shop: web::Data<Shop>,
    request: HttpRequest,
    product: web::Path<String>,
    form: web::Form<JoinForm>,
) -> Result<HttpResponse, ShopError> {
    if form.name.len() > 1000 || form.email.len() > 1000 {
        return Err(ShopError::bad_request("that name or e-mail is too long"));
    }
    if let Some(too_fast) = slow_down(&shop, &request).await? {
        return Ok(too_fast);
    }
    let Some(provider) = shop.payments.default_kind() else {
        return Err(ShopError::unavailable("no way of paying is set up".into()));
    };
    let qty = form.qty.unwrap_or(1);
    let join = JoinRequest {
        product_id: product.clone(),
        name: form.name.clone(),
        email: form.email.clone(),
        qty,
        provider,
        // the per-address cap counts the address's entries as it counts
        // what its checkouts hold
        address: shop
            .fairness
            .limits
            .address_units
            .map(|cap| (shop.fairness.address(&request), cap)),
    };
    let joined = retry("waitlist_join", Bound::Shopper, || {
        shop.joins.join(&shop.live, &join)
    })
    .await?;
    let again = |error: String| {
        join_page(
            &shop,
            &request,
            &product,
            StatusCode::UNPROCESSABLE_ENTITY,
            error,
            form.name.clone(),
            form.email.clone(),
            qty,
        )
    };
    match joined {
        Joined::Mailed => message(
            StatusCode::OK,
            "Check your e-mail",
            "We sent a link to your address. Your place on the waiting list counts from when \
             you open it and confirm; until then the entry does not count.",
            "/",
            "Back to the shop",
        ),
        Joined::UnknownProduct => Err(ShopError::not_found("that product is not for sale")),
        Joined::BadQty { max } => again(format!("Choose between 1 and {max}.")).await,
        Joined::BadCustomer { reason } => again(reason).await,
        Joined::AddressFull { cap } => {
            again(format!(
                "Entries made from your network already want {cap} of this, the most one \
                 address may wait for. Nothing was added."
            ))
            .await
        }
    }
}

#[derive(Template)]
#[template(path = "waitlist_entry.html")]
struct EntryPage {
    basket_count: i64,
    token: String,
    product: String,
    qty: i32,
    /// unconfirmed, waiting, offered, claimed, lapsed or removed
    state: &'static str,
    /// Entries in line before this one.
    ahead: i64,
    in_order: bool,
    claim_minutes: i32,
    /// When the held units go to the next entry.
    until: String,
    /// An offer of seats: the seats set aside ("Stalls — C-11, C-12,
    /// together"); empty otherwise.
    seats: String,
    total: String,
    order_href: String,
    notice: String,
    /// The entry's id, as the queue's published list names it.
    entry_id: String,
    product_id: String,
    /// The product's queue: its commitment, when it opens.
    commitment: String,
    opens: String,
    /// Those ahead want more than the line can still get: sold out for
    /// this entry unless someone ahead does not pay.
    out_of_reach: bool,
    /// Watch the product while it waits (`static/live.js` reloads the page
    /// when what is held or left changes): its stock as this page shows it.
    watch: bool,
    live_available: i32,
    live_pending: i32,
    live_first_back: String,
}

async fn entry_of_link(shop: &Shop, token: &str) -> Result<Entry, ShopError> {
    retry("waitlist_read", Bound::Shopper, || {
        waitlist::entry_by_token(&shop.pool, token)
    })
    .await?
    .ok_or_else(|| ShopError::not_found("no such waiting-list entry"))
}

/// The entry a link is about to change: its page, as this shopper was
/// shown it, is not answered from memory again.
async fn entry_to_change(
    shop: &Shop,
    request: &HttpRequest,
    token: &str,
) -> Result<Entry, ShopError> {
    let entry = entry_of_link(shop, token).await?;
    shop.live.forget_page(&page_key(request, token));
    Ok(entry)
}

/// How long an entry's page may be answered from memory while its
/// product's resource is unchanged: every change to the line changes the
/// resource's row (an offer, a payment, a lapse, an entry that leaves), so
/// this is only a bound for a process whose listener missed a word.
const PAGE_FRESH_FOR: std::time::Duration = std::time::Duration::from_secs(60);

fn page_key(request: &HttpRequest, token: &str) -> String {
    format!(
        "waitlist:{token}:{}",
        super::basket_id(request).unwrap_or_default()
    )
}

fn html(status: StatusCode, body: bytes::Bytes) -> HttpResponse {
    HttpResponse::build(status)
        .content_type("text/html; charset=utf-8")
        .body(body)
}

async fn entry_page(
    shop: &Shop,
    request: &HttpRequest,
    entry: Entry,
    status: StatusCode,
    notice: &str,
) -> Result<HttpResponse, ShopError> {
    let (status, body) = entry_html(shop, request, entry, status, notice).await?;
    Ok(html(status, body.into()))
}

async fn entry_html(
    shop: &Shop,
    request: &HttpRequest,
    entry: Entry,
    status: StatusCode,
    notice: &str,
) -> Result<(StatusCode, String), ShopError> {
    // its place in line, from the line in memory
    let entry = retry("waitlist_place", Bound::Shopper, || {
        shop.lines.place(&shop.pool, &shop.live, entry.clone())
    })
    .await?;
    let order = retry("order_read", Bound::Shopper, || {
        waitlist::offer_order(&shop.pool, &entry)
    })
    .await?;
    // the seats set aside for an offer of a seated section
    let seats = match (&order, entry.state()) {
        (Some(order), EntryState::Offered) => retry("order_read", Bound::Shopper, || {
            crate::catalogue::seats::seats_words(&shop.pool, order.id)
        })
        .await?
        .unwrap_or_default(),
        _ => String::new(),
    };
    let stock = shop
        .live
        .now()
        .and_then(|s| s.stock(std::slice::from_ref(&entry.product_id)).pop());
    let page = EntryPage {
        seats,
        basket_count: basket_count(shop, request).await?,
        product: entry.product_name.clone(),
        qty: entry.qty,
        state: entry.state().as_str(),
        ahead: entry.ahead.unwrap_or(0),
        in_order: entry.in_order,
        claim_minutes: entry.claim_minutes,
        until: entry
            .offer_expires_at
            .map(|at| shop.zone().minute(at))
            .unwrap_or_default(),
        total: order
            .as_ref()
            .map(|o| money::format(o.amount_minor, &o.currency))
            .unwrap_or_default(),
        order_href: order
            .map(|o| format!("/orders/{}", o.token))
            .unwrap_or_default(),
        entry_id: entry.id.to_string(),
        product_id: entry.product_id.clone(),
        commitment: entry.queue_commitment.clone().unwrap_or_default(),
        opens: entry
            .sale_opens_at
            .map(|at| shop.zone().minute(at))
            .unwrap_or_default(),
        out_of_reach: entry
            .wanted_ahead
            .is_some_and(|ahead| ahead + i64::from(entry.qty) > entry.for_the_line),
        watch: matches!(entry.state(), EntryState::Queued | EntryState::Waiting),
        live_available: stock.as_ref().map_or(0, |s| s.available),
        live_pending: stock.as_ref().map_or(0, |s| s.pending),
        live_first_back: stock
            .as_ref()
            .and_then(|s| s.first_back_at)
            .map(|at| at.to_rfc3339())
            .unwrap_or_default(),
        token: entry.token,
        notice: notice.to_owned(),
    };
    let body = page.render().map_err(|e| ShopError::internal(e.into()))?;
    Ok((status, body))
}

/// `GET /waitlist/entry/{token}`: the entry's page. The crowd waiting at
/// a drop reloads it: after the first database answer, memory answers
/// while the product's stock is unchanged (and for a few seconds at most).
pub async fn entry(
    shop: web::Data<Shop>,
    request: HttpRequest,
    token: web::Path<String>,
) -> Result<HttpResponse, ShopError> {
    let key = page_key(&request, &token);
    if let Some(body) = shop.live.kept_page(&key, PAGE_FRESH_FOR) {
        return Ok(html(StatusCode::OK, body));
    }
    // every change committed before this moment is in the reads below
    let read_at = chrono::Utc::now();
    let entry = entry_of_link(&shop, &token).await?;
    let resource = entry.resource_id.clone();
    // every way an entry in line changes (an offer, its payment or lapse, a
    // draw, an entry ahead leaving) changes the resource's row; confirming
    // does not, so an unconfirmed entry's page is read each time (another
    // process may have confirmed it)
    let keep = entry.state() != EntryState::Unconfirmed;
    let (status, body) = entry_html(&shop, &request, entry, StatusCode::OK, "").await?;
    let body = bytes::Bytes::from(body);
    if keep {
        shop.live.keep_page(&key, &resource, read_at, body.clone());
    }
    Ok(html(status, body))
}

/// `POST /waitlist/entry/{token}/confirm`: take a place in line.
pub async fn confirm(
    shop: web::Data<Shop>,
    request: HttpRequest,
    token: web::Path<String>,
) -> Result<HttpResponse, ShopError> {
    let confirmed = retry("waitlist_confirm", Bound::Shopper, || {
        waitlist::confirm(&shop.pool, &token)
    })
    .await?;
    shop.live.forget_page(&page_key(&request, &token));
    if confirmed == Confirmed::NotFound {
        return Err(ShopError::not_found("no such waiting-list entry"));
    }
    Ok(see_other(&format!("/waitlist/entry/{token}")))
}

/// `POST /waitlist/entry/{token}/leave`: off the list.
pub async fn leave(
    shop: web::Data<Shop>,
    request: HttpRequest,
    token: web::Path<String>,
) -> Result<HttpResponse, ShopError> {
    let entry = entry_to_change(&shop, &request, &token).await?;
    retry("waitlist_leave", Bound::Shopper, || {
        waitlist::remove(
            &shop.pool,
            crate::audit::Actor::Operator("shopper"),
            entry.id,
        )
    })
    .await?;
    let entry = entry_of_link(&shop, &token).await?;
    entry_page(&shop, &request, entry, StatusCode::OK, "").await
}

/// `POST /waitlist/entry/{token}/claim`: pay for the units held.
pub async fn claim(
    shop: web::Data<Shop>,
    request: HttpRequest,
    token: web::Path<String>,
) -> Result<HttpResponse, ShopError> {
    let entry = entry_to_change(&shop, &request, &token).await?;
    match waitlist::claim(shop.desk(), &entry).await? {
        Claim::Pay { url } => Ok(see_other(&url)),
        Claim::Paid { order_token } => Ok(see_other(&format!("/orders/{order_token}"))),
        Claim::NotOpen => {
            entry_page(
                &shop,
                &request,
                entry,
                StatusCode::CONFLICT,
                "Nothing is reserved for this entry now.",
            )
            .await
        }
        Claim::ProviderFailed => {
            entry_page(
                &shop,
                &request,
                entry,
                StatusCode::SERVICE_UNAVAILABLE,
                "The payment page could not be opened just now. The units stay yours until the \
                 time below: please try again in a moment.",
            )
            .await
        }
    }
}

impl EntryState {
    /// Whether the entry's page offers to leave the list.
    pub fn may_leave(self) -> bool {
        matches!(
            self,
            EntryState::Unconfirmed | EntryState::Queued | EntryState::Waiting
        )
    }
}
