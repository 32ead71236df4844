//! Shopper pages: catalogue, basket, checkout start, the return from the
//! provider, the order page. Thin: parse, call checkout, render.

use actix_web::cookie::{Cookie, SameSite};
use actix_web::http::StatusCode;
use actix_web::http::header;
use actix_web::{HttpRequest, HttpResponse, web};
use askama::Template;
use serde::Deserialize;

use super::ShopError;
use super::render::{render, see_other};
use crate::checkout::settle::{SettleError, settle_payment};
use crate::checkout::{
    self, CheckoutStart, Customer, OrderState, Release, ShortLine, Source, StartOutcome,
    WantedLine, basket, catalogue,
};
use crate::inventory::{AccountId, IdempotencyKey, Quantity};
use crate::money;
use crate::payments::{
    EmbedRequest, PageLine, PageRequest, PaymentPage, ProviderError, ProviderKind, ReturnError,
    ReturnParams, ReturnReport,
};
use crate::state::Shop;

const BASKET_COOKIE: &str = "hf_basket";

/// The basket cookie's id, if it is one of ours.
fn basket_id(request: &HttpRequest) -> Option<String> {
    request
        .cookie(BASKET_COOKIE)
        .map(|c| c.value().to_owned())
        .filter(|id| id.len() == 64 && id.bytes().all(|b| b.is_ascii_hexdigit()))
}

async fn basket_count(shop: &Shop, request: &HttpRequest) -> Result<i64, ShopError> {
    let Some(id) = basket_id(request) else {
        return Ok(0);
    };
    Ok(basket::count(&shop.pool, &id).await?)
}

pub struct CatalogueItem {
    pub id: String,
    pub name: String,
    pub when: String,
    pub price: String,
    pub available: i32,
    pub max_qty: i32,
    /// While sold out with holds pending: what may come back, and when.
    pub note: String,
}

/// What a sold-out product's page says while shoppers hold its units: it
/// is not final. Empty when nothing is pending (sold out for good).
pub fn pending_note(
    pending: i32,
    first_back_at: Option<chrono::DateTime<chrono::Utc>>,
    now: chrono::DateTime<chrono::Utc>,
    zone: crate::clock::ShopZone,
) -> String {
    if pending <= 0 {
        return String::new();
    }
    let when = match first_back_at.filter(|at| *at > now) {
        Some(at) => format!("by {}", zone.time(at)),
        None => "any moment now".to_owned(),
    };
    format!(
        "Sold out for now: {pending} held by shoppers who are paying. If they do not finish, \
         the first come back {when}."
    )
}

pub struct Section {
    pub id: String,
    pub title: String,
    pub lede: String,
    pub items: Vec<CatalogueItem>,
}

#[derive(Template)]
#[template(path = "catalogue.html")]
struct CataloguePage {
    basket_count: i64,
    sections: Vec<Section>,
}

fn section_words(collection: &str) -> (String, String) {
    match collection {
        "bakery" => (
            "Bakery pickup".into(),
            "Pick a slot; each one takes eight boxes.".into(),
        ),
        "harbour-lights" => (
            "Harbour Lights — live at the pier".into(),
            "Two tiers, a fixed number of places each.".into(),
        ),
        "pantry" => (
            "Pantry".into(),
            "Small batches, gone when they are gone.".into(),
        ),
        other => (other.to_owned(), String::new()),
    }
}

/// `GET /`: every product with what is left now (holds past their TTL
/// already count as free).
pub async fn catalogue(
    shop: web::Data<Shop>,
    request: HttpRequest,
) -> Result<HttpResponse, ShopError> {
    catalogue_page(&shop, &request, None).await
}

/// `GET /c/{collection}`: one collection's page (the bakery's slot picker,
/// an event's tiers).
pub async fn collection(
    shop: web::Data<Shop>,
    request: HttpRequest,
    collection: web::Path<String>,
) -> Result<HttpResponse, ShopError> {
    catalogue_page(&shop, &request, Some(collection.as_str())).await
}

async fn catalogue_page(
    shop: &Shop,
    request: &HttpRequest,
    only: Option<&str>,
) -> Result<HttpResponse, ShopError> {
    let rows = shop.live.availability(only).await?;
    let now = chrono::Utc::now();
    let mut sections: Vec<Section> = Vec::new();
    for row in rows {
        if sections.last().is_none_or(|s| s.id != row.collection) {
            let (title, lede) = section_words(&row.collection);
            sections.push(Section {
                id: row.collection.clone(),
                title,
                lede,
                items: Vec::new(),
            });
        }
        let available = row.available_now.max(0);
        sections
            .last_mut()
            .expect("pushed above")
            .items
            .push(CatalogueItem {
                id: row.id,
                name: row.name,
                // a slot's name already says when; an event's does not
                when: row
                    .starts_at
                    .filter(|_| row.kind != catalogue::ProductKind::PickupSlot)
                    .map(|at| shop.zone.long(at))
                    .unwrap_or_default(),
                price: money::format(row.price_minor, &row.currency),
                available,
                max_qty: available.min(row.max_per_order),
                note: if available == 0 {
                    pending_note(row.pending_units, row.first_back_at, now, shop.zone)
                } else {
                    String::new()
                },
            });
    }
    if sections.is_empty() && only.is_some() {
        return Err(ShopError::not_found("there is no such page in the shop"));
    }
    let page = CataloguePage {
        basket_count: basket_count(shop, request).await?,
        sections,
    };
    render(StatusCode::OK, &page)
}

#[derive(Deserialize)]
pub struct LineForm {
    product_id: String,
    qty: Option<i64>,
}

/// `POST /basket/add`
pub async fn add_to_basket(
    shop: web::Data<Shop>,
    request: HttpRequest,
    form: web::Form<LineForm>,
) -> Result<HttpResponse, ShopError> {
    let qty = form.qty.unwrap_or(1);
    if !(1..=100).contains(&qty) || form.product_id.is_empty() || form.product_id.len() > 200 {
        return Err(ShopError::bad_request(
            "choose between 1 and 100 of a product",
        ));
    }
    if let Some(too_fast) = slow_down(&shop, &request).await? {
        return Ok(too_fast);
    }
    let (id, fresh) = match basket_id(&request) {
        Some(id) => (id, false),
        None => (checkout::codes::order_token(), true),
    };
    match basket::add(&shop.pool, &id, &form.product_id, qty as i32).await? {
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
async fn slow_down(shop: &Shop, request: &HttpRequest) -> Result<Option<HttpResponse>, ShopError> {
    let address = shop.fairness.address(request);
    too_fast(&address, shop.fairness.take(&address).await?)
}

/// The 429 for a take from an address's bucket that was refused.
fn too_fast(
    address: &str,
    taken: Result<(), crate::limits::TooFast>,
) -> Result<Option<HttpResponse>, ShopError> {
    match taken {
        Ok(()) => Ok(None),
        Err(too_fast) => {
            let seconds = too_fast.retry_after.as_secs().max(1);
            tracing::info!(%address, seconds, "an address over its rate");
            let mut page = message(
                StatusCode::TOO_MANY_REQUESTS,
                "Too many requests from your address",
                &format!(
                    "So that everyone gets a fair chance, one address can add to baskets and start \
                     checkouts only so often. Please try again in {seconds} seconds; nothing was changed."
                ),
                "/basket",
                "Back to your basket",
            )?;
            page.headers_mut().insert(
                header::RETRY_AFTER,
                header::HeaderValue::from_str(&seconds.to_string())
                    .map_err(|e| ShopError::internal(e.into()))?,
            );
            Ok(Some(page))
        }
    }
}

/// `POST /basket/remove`
pub async fn remove_from_basket(
    shop: web::Data<Shop>,
    request: HttpRequest,
    form: web::Form<LineForm>,
) -> Result<HttpResponse, ShopError> {
    if let Some(id) = basket_id(&request) {
        basket::remove(&shop.pool, &id, std::slice::from_ref(&form.product_id)).await?;
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
struct Told {
    problems: Vec<Problem>,
    error: String,
    name: String,
    email: String,
}

impl Told {
    fn problems(problems: Vec<Problem>, form: &CheckoutForm) -> Self {
        Self {
            problems,
            ..Self::refilled(form)
        }
    }

    fn refilled(form: &CheckoutForm) -> Self {
        Self {
            name: form.name.chars().take(200).collect(),
            email: form.email.chars().take(254).collect(),
            ..Self::default()
        }
    }
}

/// One thing wrong with a basket, as its page lists it. A sold-out line
/// names its product, so the page can watch for units coming back.
pub struct Problem {
    text: String,
    /// The sold-out product, or empty.
    product: String,
    note: String,
}

impl Problem {
    fn plain(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            product: String::new(),
            note: String::new(),
        }
    }
}

async fn basket_page(
    shop: &Shop,
    request: &HttpRequest,
    status: StatusCode,
    told: Told,
) -> Result<HttpResponse, ShopError> {
    let rows = match basket_id(request) {
        Some(id) => basket::lines(&shop.pool, &id).await?,
        None => Vec::new(),
    };
    basket_page_of(shop, rows, status, told)
}

/// The basket page for rows already read.
fn basket_page_of(
    shop: &Shop,
    rows: Vec<basket::BasketLine>,
    status: StatusCode,
    told: Told,
) -> Result<HttpResponse, ShopError> {
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
        form_lines: FormLines::of(&rows),
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

#[derive(Deserialize)]
pub struct CheckoutForm {
    checkout_key: String,
    name: String,
    email: String,
    /// `stripe` or `razorpay`; the shop's default when absent.
    provider: Option<String>,
    /// The basket as the page showed it ([`FormLines`]): lets a sold-out
    /// answer come from memory. Absent or unreadable, the database answers.
    lines: Option<String>,
}

/// The basket's lines as its checkout form carries them: a JSON list of
/// `[product id, quantity]`. Only ever used to refuse a checkout from
/// memory and to show the refusal; the database reads the basket itself
/// for anything else, so a made-up list only changes its sender's answer.
struct FormLines(Vec<(String, i32)>);

impl FormLines {
    fn of(rows: &[basket::BasketLine]) -> String {
        let lines: Vec<(&str, i32)> = rows
            .iter()
            .map(|r| (r.product_id.as_str(), r.qty))
            .collect();
        serde_json::to_string(&lines).expect("strings and numbers serialise")
    }

    /// `None` for anything but 1 to 100 lines of 1 to 100 units of an id
    /// of at most 200 bytes.
    fn parse(text: &str) -> Option<Self> {
        if text.len() > 64 * 1024 {
            return None;
        }
        let lines: Vec<(String, i32)> = serde_json::from_str(text).ok()?;
        let fits = (1..=100).contains(&lines.len())
            && lines
                .iter()
                .all(|(id, qty)| !id.is_empty() && id.len() <= 200 && (1..=100).contains(qty));
        fits.then_some(Self(lines))
    }
}

/// The 409 page for a checkout memory can refuse, without a database round
/// trip: a line wants more than memory shows of its product, nothing held
/// is due to come back, and the form was made after this process last saw
/// that product change. The last condition keeps a double submit honest:
/// if this form's first submit took the last unit, the product changed
/// after the form was made, so the second submit goes to the database and
/// on to the order the first one started. `None`: ask the database.
fn refused_from_memory(
    shop: &Shop,
    form: &CheckoutForm,
) -> Option<Result<HttpResponse, ShopError>> {
    let snapshot = shop.live.now()?;
    let minted = checkout::codes::key_minted_at(&form.checkout_key)?;
    let FormLines(lines) = FormLines::parse(form.lines.as_deref()?)?;
    let now = chrono::Utc::now();
    let mut wanted: std::collections::HashMap<&str, i32> = Default::default();
    for (id, qty) in &lines {
        let (product, _) = snapshot.product(id)?;
        *wanted.entry(product.resource_id.as_str()).or_default() += qty;
    }
    let short = |resource: &str| {
        snapshot.level(resource).is_some_and(|level| {
            level.available < wanted[resource]
                && !level.something_due(now)
                && level.changed_at < minted
        })
    };
    if !wanted.keys().any(|resource| short(resource)) {
        return None;
    }
    let mut rows = Vec::new();
    let mut short_lines = Vec::new();
    for (id, qty) in lines {
        let (product, level) = snapshot.product(&id)?;
        if short(&product.resource_id) {
            short_lines.push(ShortLine {
                product_id: id.clone(),
                name: product.name.clone(),
                requested: qty,
                available: level.available.max(0),
            });
        }
        rows.push(basket::BasketLine {
            product_id: id,
            name: product.name.clone(),
            qty,
            price_minor: product.price_minor,
            currency: product.currency.clone(),
        });
    }
    let sold_out: Vec<String> = short_lines
        .iter()
        .filter(|line| line.available == 0)
        .map(|line| line.product_id.clone())
        .collect();
    shop.live.refused();
    Some(basket_page_of(
        shop,
        rows,
        StatusCode::CONFLICT,
        Told::problems(
            describe_short(&short_lines, &snapshot.stock(&sold_out), shop.zone),
            form,
        ),
    ))
}

/// The lines a checkout could not hold; a sold-out one says what is
/// pending and when it may come back (`stock` of the sold-out products).
fn describe_short(
    lines: &[ShortLine],
    stock: &[catalogue::Stock],
    zone: crate::clock::ShopZone,
) -> Vec<Problem> {
    let now = chrono::Utc::now();
    lines
        .iter()
        .map(|line| match line.available {
            0 => Problem {
                text: format!("{}: sold out (you asked for {})", line.name, line.requested),
                product: line.product_id.clone(),
                note: stock
                    .iter()
                    .find(|s| s.id == line.product_id)
                    .map(|s| pending_note(s.pending, s.first_back_at, now, zone))
                    .unwrap_or_default(),
            },
            left => Problem::plain(format!(
                "{}: only {left} left (you asked for {})",
                line.name, line.requested
            )),
        })
        .collect()
}

fn describe_limited(lines: &[ShortLine]) -> Vec<String> {
    lines
        .iter()
        .map(|line| match line.available {
            0 => format!(
                "{}: you hold as many as one buyer may at once (you asked for {} more); \
                 so that everyone gets a chance, there is a limit per buyer and per address",
                line.name, line.requested
            ),
            left => format!(
                "{}: at most {left} for you right now (you asked for {}); there is a limit per \
                 order, per buyer and per address",
                line.name, line.requested
            ),
        })
        .collect()
}

/// `POST /checkout`: SPEC §3 in order. One transaction holds every line and
/// writes the pending order; then, outside any lock, the provider's session;
/// then the payment phase; then a 303 to the provider.
pub async fn start_checkout(
    shop: web::Data<Shop>,
    request: HttpRequest,
    form: web::Form<CheckoutForm>,
) -> Result<HttpResponse, ShopError> {
    let key = IdempotencyKey::parse(&form.checkout_key).map_err(|_| {
        ShopError::bad_request("the checkout form is out of date; please try again")
    })?;
    // the sold-out crowd is answered from memory and writes nothing
    if basket_id(&request).is_some()
        && let Some(refused) = refused_from_memory(&shop, &form)
    {
        return refused;
    }
    // One read: whether this form was submitted before, and the basket
    // with its prices and what is left (enough to refuse a sold-out line);
    // the address's token is taken meanwhile, so a start pays one round
    // trip for both.
    let basket = basket_id(&request);
    let address = shop.fairness.address(&request);
    let read = async {
        Ok::<_, sqlx::Error>(match &basket {
            Some(basket) => checkout::read_checkout(&shop.pool, key.as_str(), basket).await?,
            None => checkout::CheckoutRead {
                existing: checkout::order_by_checkout_key(&shop.pool, key.as_str())
                    .await?
                    .map(|order| order.id),
                lines: Vec::new(),
            },
        })
    };
    let (read, taken) = futures::join!(read, shop.fairness.take(&address));
    let read = read?;
    // a double submit goes where the first one went, once it knows
    if let Some(existing) = read.existing
        && let Some(order) = checkout::order_by_id(&shop.pool, existing).await?
    {
        return Ok(see_other(&redirect_for(
            &await_provider_page(&shop, order).await?,
        )));
    }
    let provider = match form.provider.as_deref() {
        None => shop.payments.default_kind(),
        Some(name) => ProviderKind::parse(name),
    }
    .filter(|kind| shop.payments.get(*kind).is_some())
    .ok_or_else(|| ShopError::bad_request("that way of paying is not offered here"))?;
    let customer = match Customer::parse(&form.name, &form.email) {
        Ok(customer) => customer,
        Err(error) => {
            return basket_page(
                &shop,
                &request,
                StatusCode::BAD_REQUEST,
                Told {
                    error: error.0,
                    ..Told::refilled(&form)
                },
            )
            .await;
        }
    };
    let Some(basket) = basket else {
        return Ok(see_other("/basket"));
    };
    if read.lines.is_empty() {
        return Ok(see_other("/basket"));
    }
    if let Some(page) = too_fast(&address, taken?)? {
        return Ok(page);
    }
    let limits = checkout::StartLimits::for_customer(&shop.fairness.limits, &customer, &address);
    let start = CheckoutStart {
        limits,
        checkout_key: key,
        account: AccountId::parse(&format!("basket:{basket}"))
            .map_err(|e| ShopError::bad_request(&e.0))?,
        lines: read
            .lines
            .iter()
            .map(|line| {
                Ok(WantedLine {
                    product_id: line.product_id.clone(),
                    qty: Quantity::parse(i64::from(line.qty))?,
                })
            })
            .collect::<Result<_, crate::inventory::InvalidInput>>()
            .map_err(|e| ShopError::bad_request(&e.0))?,
        customer,
        provider,
    };
    let (order, lines, resource) = match shop.checkouts.start_read(&start, &read).await? {
        StartOutcome::Started {
            order,
            lines,
            resource,
        } => (order, lines, resource),
        StartOutcome::AlreadyStarted { order } => {
            return Ok(see_other(&redirect_for(
                &await_provider_page(&shop, order).await?,
            )));
        }
        StartOutcome::Unavailable { lines } => {
            let sold_out: Vec<String> = lines
                .iter()
                .filter(|line| line.available == 0)
                .map(|line| line.product_id.clone())
                .collect();
            let stock = shop.live.stock(&sold_out).await?;
            // the basket as read above: nothing in it changed
            return basket_page_of(
                &shop,
                read.lines.iter().map(|line| line.basket_line()).collect(),
                StatusCode::CONFLICT,
                Told::problems(describe_short(&lines, &stock, shop.zone), &form),
            );
        }
        StartOutcome::OverLimit { lines } => {
            return basket_page_of(
                &shop,
                read.lines.iter().map(|line| line.basket_line()).collect(),
                StatusCode::CONFLICT,
                Told::problems(
                    describe_limited(&lines)
                        .into_iter()
                        .map(Problem::plain)
                        .collect(),
                    &form,
                ),
            );
        }
        StartOutcome::UnknownProducts { ids } => {
            basket::remove(&shop.pool, &basket, &ids).await?;
            let problems = vec![Problem::plain(
                "Some items are no longer sold and were taken out of your basket.",
            )];
            return basket_page(
                &shop,
                &request,
                StatusCode::CONFLICT,
                Told::problems(problems, &form),
            )
            .await;
        }
    };

    crate::faults::crash_point("after_checkout_commit");
    // Outside any transaction or lock: the provider.
    let opened = open_page(&shop, &order, &lines).await;
    let provider_session = match opened {
        Ok(session) => session,
        Err(error) => {
            tracing::warn!(order = %order.id, %error, "the payment provider failed at checkout start");
            checkout::release_order(&shop.pool, order.id, Release::ProviderError).await?;
            return message(
                StatusCode::SERVICE_UNAVAILABLE,
                "We could not reach the payment provider",
                "Nothing was charged and your items were put back. Please try again in a moment.",
                "/basket",
                "Back to your basket",
            );
        }
    };
    crate::faults::crash_point("after_provider_call");
    let url = provider_session.url.clone();
    let order_id = order.id;
    let attached = match shop
        .checkouts
        .attach(order, resource.as_deref(), &provider_session, Some(&basket))
        .await
    {
        Ok(attached) => attached,
        Err(error) => {
            // the provider's page exists but our holds could not move into
            // the payment phase: give them back now rather than at the TTL
            tracing::error!(order = %order_id, error = %error, "could not start the payment phase");
            checkout::release_order(&shop.pool, order_id, Release::PaymentPhaseFailed).await?;
            return message(
                StatusCode::SERVICE_UNAVAILABLE,
                "We could not start your payment",
                "Nothing was charged and your items were put back. Please try again in a moment.",
                "/basket",
                "Back to your basket",
            );
        }
    };
    match attached {
        // the basket was emptied with the payment phase
        checkout::AttachOutcome::Paying { .. } => Ok(see_other(&url)),
        checkout::AttachOutcome::Ended { .. } => message(
            StatusCode::CONFLICT,
            "Your reservation ran out",
            "It took too long to reach the payment page, so your items went back on sale. Nothing was charged.",
            "/basket",
            "Back to your basket",
        ),
    }
}

/// The provider's payment page for a started order.
async fn open_page(
    shop: &Shop,
    order: &checkout::Order,
    lines: &[checkout::OrderLine],
) -> Result<PaymentPage, ProviderError> {
    let provider = shop.payments.for_order(order.provider)?;
    let request = PageRequest {
        order_id: order.id,
        amount_minor: order.amount_minor,
        currency: order.currency.clone(),
        lines: lines
            .iter()
            .map(|line| PageLine {
                name: line.name.clone(),
                qty: line.qty.unsigned_abs(),
                unit_amount_minor: line.unit_price_minor,
            })
            .collect(),
        customer_name: order.customer_name.clone(),
        customer_email: order.customer_email.clone(),
        return_url: format!("{}/checkout/return/{}", shop.base_url, order.token),
        cancel_url: format!("{}/checkout/cancel/{}", shop.base_url, order.token),
        pay_url: format!("{}/pay/{}", shop.base_url, order.token),
        lifetime: std::time::Duration::from_secs(shop.session_minutes.unsigned_abs() * 60),
    };
    provider.open_page(&request).await
}

/// A second submit of a checkout form may arrive while the first is still
/// talking to the provider: wait (a few seconds at most) for the first to
/// record its payment page, so both submits end up in the same place.
async fn await_provider_page(
    shop: &Shop,
    mut order: checkout::Order,
) -> Result<checkout::Order, ShopError> {
    for _ in 0..40 {
        if order.state != OrderState::Pending || order.provider_url.is_some() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
        match checkout::order_by_id(&shop.pool, order.id).await? {
            Some(fresh) => order = fresh,
            None => break,
        }
    }
    Ok(order)
}

/// Where a started order's shopper should go now.
fn redirect_for(order: &checkout::Order) -> String {
    match (&order.provider_url, order.state) {
        (Some(url), OrderState::Pending) => url.clone(),
        _ => format!("/orders/{}", order.token),
    }
}

#[derive(Template)]
#[template(path = "message.html")]
struct MessagePage<'a> {
    basket_count: i64,
    headline: &'a str,
    explanation: &'a str,
    next_href: &'a str,
    next_label: &'a str,
}

pub fn message(
    status: StatusCode,
    headline: &str,
    explanation: &str,
    next_href: &str,
    next_label: &str,
) -> Result<HttpResponse, ShopError> {
    render(
        status,
        &MessagePage {
            basket_count: 0,
            headline,
            explanation,
            next_href,
            next_label,
        },
    )
}

/// `GET /checkout/return/{token}`: the browser's way back from the
/// provider's page (Stripe adds `?session_id=…`).
pub async fn checkout_return(
    shop: web::Data<Shop>,
    token: web::Path<String>,
    query: web::Query<Vec<(String, String)>>,
) -> Result<HttpResponse, ShopError> {
    let params = ReturnParams::from_return(query.into_inner(), Vec::new());
    returned(&shop, &token, params).await
}

/// `POST /checkout/return/{token}`: the same way back when the provider
/// posts it (Razorpay Checkout's redirect-mode callback, success or
/// failure).
pub async fn checkout_return_post(
    shop: web::Data<Shop>,
    token: web::Path<String>,
    query: web::Query<Vec<(String, String)>>,
    form: web::Form<Vec<(String, String)>>,
) -> Result<HttpResponse, ShopError> {
    let params = ReturnParams::from_return(query.into_inner(), form.into_inner());
    returned(&shop, &token, params).await
}

/// The order's unguessable token is in the path, so what the browser
/// brings (a session id, a signed callback) leads nowhere on its own; the
/// provider's adapter verifies it against the page we stored and asks the
/// provider what happened, and a payment goes the way every payment goes:
/// captured if it must be, then the one confirm routine.
async fn returned(
    shop: &Shop,
    token: &str,
    params: ReturnParams,
) -> Result<HttpResponse, ShopError> {
    let unknown = || ShopError::not_found("that is not a payment we know");
    if token.len() != 64 || !token.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(unknown());
    }
    let order = checkout::order_by_token(&shop.pool, token)
        .await?
        .ok_or_else(unknown)?;
    let page_id = order.provider_session_id.clone().ok_or_else(unknown)?;
    let provider = shop
        .payments
        .for_order(order.provider)
        .map_err(|e| ShopError::unavailable(e.to_string()))?;
    let order_page = format!("/orders/{}", order.token);
    match provider.read_return(&page_id, &params).await {
        Ok(ReturnReport::Payment(payment)) => {
            match settle_payment(
                &shop.confirmations,
                provider.as_ref(),
                order.id,
                payment,
                Source::Return,
            )
            .await
            {
                Ok(_) => {}
                Err(SettleError::Checkout(error)) => return Err(error.into()),
                // the capture did not go through now: the webhook, the
                // worker or reconciliation will finish it; the order page
                // says it is waiting
                Err(SettleError::Provider(error)) => {
                    tracing::warn!(order = %order.id, %error, "could not capture at the return");
                }
            }
            Ok(see_other(&order_page))
        }
        Ok(ReturnReport::NotPaid) => Ok(see_other(&order_page)),
        Ok(ReturnReport::Failed { reason }) => {
            tracing::info!(order = %order.id, %reason, "the provider says the payment failed");
            let retry = match (&order.provider_url, order.state) {
                (Some(url), OrderState::Pending) => url.clone(),
                _ => order_page,
            };
            let explanation = format!(
                "{} Nothing was charged, and your items are still held for you: you can try again, \
                 with another card or method if you like.",
                if reason.is_empty() {
                    "The payment did not go through.".to_owned()
                } else {
                    format!("The payment did not go through: {reason}.")
                }
            );
            message(
                StatusCode::OK,
                "Your payment did not go through",
                &explanation,
                &retry,
                "Try again",
            )
        }
        Err(ReturnError::Rejected(why)) => {
            tracing::warn!(order = %order.id, why, "a return that could not be verified");
            message(
                StatusCode::BAD_REQUEST,
                "We could not verify this payment",
                "Nothing was changed. If money left your account, it will be matched to your order or refunded.",
                &order_page,
                "See your order",
            )
        }
        Err(ReturnError::Provider(error)) => Err(ShopError::unavailable(error.to_string())),
    }
}

#[derive(Template)]
#[template(path = "leave.html")]
struct LeavePage {
    basket_count: i64,
    token: String,
    items: String,
    total: String,
}

/// `GET /checkout/cancel/{token}`: the provider's cancel URL. It asks
/// whether to leave and changes nothing: link prefetchers and mail scanners
/// follow URLs, and a purchase must not end because one did.
pub async fn checkout_cancel(
    shop: web::Data<Shop>,
    token: web::Path<String>,
) -> Result<HttpResponse, ShopError> {
    let order = checkout::order_by_token(&shop.pool, &token)
        .await?
        .ok_or_else(|| ShopError::not_found("no such order"))?;
    match order.state {
        OrderState::Pending => {}
        OrderState::Cancelled | OrderState::Expired => return left(),
        // paid (or being refunded): the order page tells the truth
        _ => return Ok(see_other(&format!("/orders/{}", order.token))),
    }
    let lines = checkout::order_lines(&shop.pool, order.id).await?;
    let items = lines
        .iter()
        .map(|line| format!("{} × {}", line.name, line.qty))
        .collect::<Vec<_>>()
        .join(", ");
    let mut response = render(
        StatusCode::OK,
        &LeavePage {
            basket_count: 0,
            token: order.token.clone(),
            items,
            total: money::format(order.amount_minor, &order.currency),
        },
    )?;
    response.headers_mut().insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static("no-store"),
    );
    Ok(response)
}

/// `POST /checkout/cancel/{token}`: the shopper pressed "Leave checkout".
/// The order and its holds are released and the provider's page closed;
/// a payment that already arrived wins, and the order page says so.
pub async fn checkout_leave(
    shop: web::Data<Shop>,
    token: web::Path<String>,
) -> Result<HttpResponse, ShopError> {
    let order = checkout::order_by_token(&shop.pool, &token)
        .await?
        .ok_or_else(|| ShopError::not_found("no such order"))?;
    let after = checkout::release_order(&shop.pool, order.id, Release::ShopperLeft).await?;
    if after
        .as_ref()
        .is_some_and(|o| !matches!(o.state, OrderState::Cancelled | OrderState::Expired))
    {
        return Ok(see_other(&format!("/orders/{}", order.token)));
    }
    left()
}

fn left() -> Result<HttpResponse, ShopError> {
    message(
        StatusCode::OK,
        "Checkout cancelled",
        "Nothing was charged and your items went back on sale.",
        "/",
        "Back to the shop",
    )
}

#[derive(Template)]
#[template(path = "order.html")]
struct OrderPage {
    basket_count: i64,
    waiting: bool,
    paid: bool,
    name: String,
    total: String,
    pickup_code: String,
    /// When the pickup code was used, if it was.
    pickup_used: String,
    /// Staff refunded part of a paid order: how much, and why.
    refund_note: String,
    tickets: Vec<TicketLine>,
    headline: String,
    explanation: String,
    lines: Vec<checkout::OrderLine>,
}

/// A ticket on the order page.
struct TicketLine {
    product: String,
    code: String,
    /// When it was used; empty: not yet.
    used: String,
    /// Its unit was refunded: it admits nobody.
    refunded: bool,
}

/// `GET /orders/{token}`: reachable only by its unguessable link.
pub async fn order_page(
    shop: web::Data<Shop>,
    token: web::Path<String>,
) -> Result<HttpResponse, ShopError> {
    if token.len() != 64 || !token.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(ShopError::not_found("no such order"));
    }
    let order = checkout::order_by_token(&shop.pool, &token)
        .await?
        .ok_or_else(|| ShopError::not_found("no such order"))?;
    let lines = checkout::order_lines(&shop.pool, order.id).await?;
    let names: std::collections::HashMap<String, String> = lines
        .iter()
        .map(|l| (l.product_id.clone(), l.name.clone()))
        .collect();
    let used = crate::redemption::redeemed_codes(&shop.pool, order.id).await?;
    let used_at = |code: &str| {
        used.get(code)
            .map(|at| shop.zone.minute(*at))
            .unwrap_or_default()
    };
    let tickets = checkout::order_codes(&shop.pool, order.id)
        .await?
        .into_iter()
        .map(|(product, code, refunded)| TicketLine {
            product: names.get(&product).cloned().unwrap_or(product),
            used: used_at(&code),
            code,
            refunded,
        })
        .collect();
    let pickup_used = order
        .pickup_code
        .as_deref()
        .map(used_at)
        .unwrap_or_default();
    // what staff refunded, and why (the latest reason)
    let staff_refund = crate::staff::refunds::latest(&shop.pool, order.id).await?;
    let refund_note = match &staff_refund {
        Some((reason, amount)) if order.state == OrderState::Paid => format!(
            "Part of this order was refunded ({}): {reason}",
            money::format(*amount, &order.currency)
        ),
        _ => String::new(),
    };
    let staff_explanation = staff_refund.as_ref().map(|(reason, _)| {
        format!("The shop refunded it: {reason}. The money is on its way back to you.")
    });
    let (headline, explanation) = match order.state {
        OrderState::RefundPending | OrderState::Refunded if staff_explanation.is_some() => (
            "Your order was refunded",
            staff_explanation.as_deref().unwrap_or_default(),
        ),
        OrderState::Expired => (
            "Your reservation ran out",
            "Nothing was charged; the items went back on sale.",
        ),
        OrderState::Cancelled => ("This order was cancelled", "Nothing was charged."),
        OrderState::RefundPending => (
            "Your payment is being refunded",
            "The money arrived after your reservation had ended, so it is on its way back to you.",
        ),
        OrderState::Refunded => (
            "Your payment was refunded",
            "The money is on its way back to you.",
        ),
        OrderState::Pending | OrderState::Paid => ("", ""),
    };
    let page = OrderPage {
        basket_count: 0,
        waiting: order.state == OrderState::Pending,
        paid: order.state == OrderState::Paid,
        name: order.customer_name.clone(),
        total: money::format(order.amount_minor, &order.currency),
        pickup_code: order.pickup_code.clone().unwrap_or_default(),
        pickup_used,
        refund_note,
        tickets,
        headline: headline.into(),
        explanation: explanation.into(),
        lines,
    };
    // the link is the key: keep the page out of caches and search engines
    let mut response = render(StatusCode::OK, &page)?;
    let headers = response.headers_mut();
    headers.insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static("no-store"),
    );
    headers.insert(
        header::HeaderName::from_static("x-robots-tag"),
        header::HeaderValue::from_static("noindex"),
    );
    Ok(response)
}

/// `GET /static/shop.css`
pub async fn stylesheet() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/css; charset=utf-8")
        .insert_header((header::CACHE_CONTROL, "public, max-age=3600"))
        .body(include_str!("../../static/shop.css"))
}

#[derive(Template)]
#[template(path = "pay.html")]
struct PayPage {
    basket_count: i64,
    total: String,
    script_url: String,
    cancel_url: String,
    /// JSON for the provider's script; `<` is escaped so it cannot end the tag.
    options_json: String,
}

/// `GET /pay/{token}`: our page for a provider whose checkout runs in its
/// script on a page of ours (Razorpay Checkout, redirect mode). Other
/// providers' orders go to the provider's own page.
pub async fn pay_page(
    shop: web::Data<Shop>,
    token: web::Path<String>,
) -> Result<HttpResponse, ShopError> {
    let order = checkout::order_by_token(&shop.pool, &token)
        .await?
        .ok_or_else(|| ShopError::not_found("no such order"))?;
    let order_page = format!("/orders/{}", order.token);
    let Some(page_id) = order
        .provider_session_id
        .clone()
        .filter(|_| order.state == OrderState::Pending)
    else {
        return Ok(see_other(&order_page));
    };
    let provider = shop
        .payments
        .for_order(order.provider)
        .map_err(|e| ShopError::unavailable(e.to_string()))?;
    let embed = EmbedRequest {
        page_id,
        amount_minor: order.amount_minor,
        currency: order.currency.clone(),
        customer_name: order.customer_name.clone(),
        customer_email: order.customer_email.clone(),
        return_url: format!("{}/checkout/return/{}", shop.base_url, order.token),
        cancel_url: format!("{}/checkout/cancel/{}", shop.base_url, order.token),
    };
    let Some(checkout) = provider.embedded_checkout(&embed) else {
        return Ok(see_other(
            order.provider_url.as_deref().unwrap_or(&order_page),
        ));
    };
    let page = PayPage {
        basket_count: 0,
        total: money::format(order.amount_minor, &order.currency),
        script_url: checkout.script_url.clone(),
        cancel_url: format!("/checkout/cancel/{}", order.token),
        options_json: checkout.options.to_string().replace('<', "\\u003c"),
    };
    let mut response = render(StatusCode::OK, &page)?;
    let policy = embedded_policy(&checkout.origins);
    response.headers_mut().insert(
        header::CONTENT_SECURITY_POLICY,
        header::HeaderValue::from_str(&policy).map_err(|e| ShopError::internal(e.into()))?,
    );
    Ok(response)
}

/// The embedded checkout page's policy: ours, plus the provider's script,
/// frames and calls. Razorpay's script styles its own overlay inline, so
/// this one page allows inline styles.
fn embedded_policy(origins: &[String]) -> String {
    let origins = origins.join(" ");
    format!(
        "default-src 'self'; script-src 'self' {origins}; style-src 'self' 'unsafe-inline'; \
         img-src 'self' data: {origins}; connect-src 'self' {origins}; frame-src {origins}; \
         object-src 'none'; base-uri 'none'; frame-ancestors 'none'; report-uri /csp-report"
    )
}

/// `GET /static/live.js`: the pages' live availability.
pub async fn live_script() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/javascript; charset=utf-8")
        .insert_header((header::CACHE_CONTROL, "public, max-age=3600"))
        .body(include_str!("../../static/live.js"))
}

#[derive(Deserialize)]
pub struct StockQuery {
    ids: String,
}

/// The most products one availability request may ask about.
pub const MAX_STOCK_IDS: usize = 100;

/// The products an availability question names: 1 to [`MAX_STOCK_IDS`]
/// ids of at most 200 bytes, separated by commas.
fn stock_ids(query: &StockQuery) -> Result<Vec<String>, ShopError> {
    let ids: Vec<String> = query
        .ids
        .split(',')
        .filter(|id| !id.is_empty())
        .map(str::to_owned)
        .collect();
    if ids.is_empty() || ids.len() > MAX_STOCK_IDS || ids.iter().any(|id| id.len() > 200) {
        return Err(ShopError::bad_request(
            "ask about 1 to 100 products, by their ids separated by commas",
        ));
    }
    Ok(ids)
}

/// What is left, as the pages read it: `{"products": [...]}` with, beside
/// each product's stock, when its first pending hold ends in the shop's
/// zone (`first_back`), as the server says it.
fn stock_body(shop: &Shop, stock: Vec<catalogue::Stock>) -> serde_json::Value {
    let products: Vec<serde_json::Value> = stock
        .into_iter()
        .map(|stock| {
            let back = stock.first_back_at.map(|at| shop.zone.time(at));
            let mut value = serde_json::json!(stock);
            value["first_back"] = serde_json::json!(back);
            value
        })
        .collect();
    serde_json::json!({ "products": products })
}

/// `GET /availability?ids=a,b`: what is left of each product, what is
/// pending and when the first pending hold ends (JSON, unknown ids left
/// out), from memory. Pages without `EventSource` poll it.
pub async fn availability(
    shop: web::Data<Shop>,
    query: web::Query<StockQuery>,
) -> Result<HttpResponse, ShopError> {
    let ids = stock_ids(&query)?;
    let stock = shop.live.stock(&ids).await?;
    Ok(HttpResponse::Ok()
        .insert_header((header::CACHE_CONTROL, "public, max-age=2"))
        .json(stock_body(&shop, stock)))
}

/// `GET /availability/stream?ids=a,b`: the same answer as a stream of
/// server-sent events, the first at once, then one whenever memory sees
/// those products change (at most one per [`crate::live::WATCH_GAP`]),
/// and a comment every [`crate::live::WATCH_KEEPALIVE`] so a dead
/// connection is found. A sold-out page holds one open; one process
/// serves thousands (`live::MAX_WATCHERS`, then 503: the page polls).
pub async fn availability_stream(
    shop: web::Data<Shop>,
    query: web::Query<StockQuery>,
) -> Result<HttpResponse, ShopError> {
    let ids = stock_ids(&query)?;
    let Some(watch) = shop.live.watch(ids) else {
        return Ok(HttpResponse::ServiceUnavailable()
            .insert_header((header::RETRY_AFTER, "10"))
            .insert_header((header::CACHE_CONTROL, "no-store"))
            .body("too many pages are watching; poll /availability instead"));
    };
    let events =
        futures::stream::unfold((true, watch, shop), |(first, mut watch, shop)| async move {
            let bytes = match watch.next().await? {
                crate::live::Watched::Quiet => bytes::Bytes::from_static(b": still here\n\n"),
                crate::live::Watched::Changed(stock) => event(&shop, stock, first),
            };
            Some((
                Ok::<_, std::convert::Infallible>(bytes),
                (false, watch, shop),
            ))
        });
    Ok(HttpResponse::Ok()
        .content_type("text/event-stream")
        .insert_header((header::CACHE_CONTROL, "no-store"))
        // a proxy in front must pass each event on as it comes
        .insert_header(("x-accel-buffering", "no"))
        .streaming(events))
}

/// One server-sent event; the first also says how long a browser waits
/// before it connects again.
fn event(shop: &Shop, stock: Vec<catalogue::Stock>, first: bool) -> bytes::Bytes {
    let retry = if first { "retry: 5000\n" } else { "" };
    format!("{retry}data: {}\n\n", stock_body(shop, stock)).into()
}

pub async fn razorpay_script() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/javascript; charset=utf-8")
        .insert_header((header::CACHE_CONTROL, "public, max-age=3600"))
        .body(include_str!("../../static/razorpay.js"))
}

/// The shopper's pages, their scripts and styles, and the way back from the
/// providers.
pub fn routes(config: &mut web::ServiceConfig) {
    config
        .route("/static/razorpay.js", web::get().to(razorpay_script))
        .route("/static/live.js", web::get().to(live_script))
        .route("/static/shop.css", web::get().to(stylesheet))
        .route("/availability", web::get().to(availability))
        .route("/availability/stream", web::get().to(availability_stream))
        .route("/", web::get().to(catalogue))
        .route("/c/{collection}", web::get().to(collection))
        .route("/basket", web::get().to(basket))
        .route("/basket/add", web::post().to(add_to_basket))
        .route("/basket/remove", web::post().to(remove_from_basket))
        .route("/checkout", web::post().to(start_checkout))
        .route("/checkout/return/{token}", web::get().to(checkout_return))
        // Razorpay Checkout in redirect mode posts its callback
        .route(
            "/checkout/return/{token}",
            web::post().to(checkout_return_post),
        )
        .route("/checkout/cancel/{token}", web::get().to(checkout_cancel))
        .route("/checkout/cancel/{token}", web::post().to(checkout_leave))
        .route("/pay/{token}", web::get().to(pay_page))
        .route("/orders/{token}", web::get().to(order_page));
}
