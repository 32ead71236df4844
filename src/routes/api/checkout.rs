//! `POST /api/v1/checkouts`: a checkout through the one routine the form
//! uses ([`checkout::begin`]), with the same fair-sale limits, answered
//! with the payment page's URL. The `Idempotency-Key` makes a retry the
//! same checkout: the same key and body get the same answer; another body,
//! 422 and nothing done.

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use serde::Deserialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::{ApiError, ErrorCode, json_body, key_of};
use crate::catalogue::Choice;
use crate::checkout::{self, BeginRequest, Begun, ShortLine, basket};
use crate::inventory::IdempotencyKey;
use crate::payments::methods::PayMethod;
use crate::retry::{Bound, retry};
use crate::routes::errors::checkout_code;
use crate::routes::tables::api_lines as table_lines;
use crate::staff::api_keys::{self, ApiKey, Idempotent};
use crate::state::Shop;

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CheckoutBody {
    /// What to buy: 1 to 20 lines.
    lines: Vec<CheckoutLine>,
    name: String,
    email: String,
    /// The guest's phone: required when a line is a booking, not kept
    /// otherwise.
    #[serde(default)]
    phone: Option<String>,
    /// `stripe` or `razorpay`; the shop's default when absent. Older
    /// storefronts name a provider; newer ones name a `method`.
    #[serde(default)]
    provider: Option<String>,
    /// The way the shopper chose to pay: `card`, `upi`, `netbanking` or
    /// `sepa_debit`, served by the provider the shop's owner chose for it
    /// (with `provider` too, it must be that one); 422 `unknown_provider`
    /// when the shop does not offer it in its currency.
    #[serde(default)]
    method: Option<String>,
    #[serde(default)]
    voucher: Option<String>,
    /// The shopper's IP address as a storefront's server saw it: the
    /// fair-sale limits per address count it instead of the API client's
    /// own address (which, for a storefront, every shopper shares).
    #[serde(default)]
    shopper_address: Option<String>,
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CheckoutLine {
    /// A product; for a table, its dining room (or one of its times).
    product_id: String,
    /// Units of the product (1 to 100).
    #[serde(default)]
    qty: Option<i32>,
    /// A table's party (1 to 100), with `at` and without `qty`.
    #[serde(default)]
    party: Option<i32>,
    /// A table's time, RFC 3339 with its offset: one the room offers.
    #[serde(default)]
    #[schema(value_type = Option<String>, format = DateTime)]
    at: Option<chrono::DateTime<chrono::FixedOffset>>,
    /// A seated section's seats by label, all or none: `["C-12", "C-13"]`.
    #[serde(default)]
    seats: Option<Vec<String>>,
    /// For the best seats: next to each other in one row (the default), or
    /// `false` to take them apart when no row has them together and the
    /// shop sells a split.
    #[serde(default)]
    together: Option<bool>,
}

/// Run `work` once per API key and `Idempotency-Key`: a replay with the
/// same `what` (the action and the object it acts on, normalised) and body
/// gets the kept answer; another action or body under the key is refused;
/// an answer [`worth_another_try`] is not kept. Every POST of the API runs
/// here.
pub async fn once<F, Fut>(
    shop: &Shop,
    what: &str,
    key: &ApiKey,
    idem: &str,
    raw: &[u8],
    work: F,
) -> Result<HttpResponse, ApiError>
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = Result<(StatusCode, Value), ApiError>>,
{
    match api_keys::claim(&shop.pool, key, idem, what, raw).await? {
        Idempotent::Answered { status, body } => {
            return Ok(
                HttpResponse::build(StatusCode::from_u16(status).unwrap_or(StatusCode::OK))
                    .json(body),
            );
        }
        Idempotent::OtherBody => {
            return Err(ApiError::new(
                ErrorCode::IdempotencyKeyReused,
                "this Idempotency-Key was used with another body; nothing was done",
            ));
        }
        Idempotent::Fresh | Idempotent::Unanswered => {}
    }
    let answer = work().await;
    match &answer {
        Err(error) if worth_another_try(error.status) => {
            api_keys::forget(&shop.pool, key, idem).await?;
        }
        Err(error) => {
            api_keys::answer(&shop.pool, key, idem, error.status.as_u16(), &error.body()).await?
        }
        Ok((status, body)) => {
            api_keys::answer(&shop.pool, key, idem, status.as_u16(), body).await?
        }
    }
    let (status, body) = answer?;
    Ok(HttpResponse::build(status).json(body))
}

/// Whether an answer is kept under its `Idempotency-Key`: not a failure
/// of ours (5xx) nor "too fast" (429), which the same request may meet
/// differently later; every other answer is the request's, for good.
pub fn worth_another_try(status: StatusCode) -> bool {
    status.is_server_error() || status == StatusCode::TOO_MANY_REQUESTS
}

/// A JSON POST of the API, read as each is: the key the guard let
/// through, its `Idempotency-Key`, its body, and the bytes the key's
/// answer is kept against.
pub async fn posted<T: serde::de::DeserializeOwned>(
    request: &HttpRequest,
    payload: web::Payload,
) -> Result<(ApiKey, String, T, Vec<u8>), ApiError> {
    let key = key_of(request).expect("the guard let a key through");
    let idem = idempotency_key(request)?;
    let (body, raw) = json_body(payload).await?;
    Ok((key, idem, body, raw))
}

/// The `Idempotency-Key` header: 1 to 64 letters, digits, `-` or `_`.
pub fn idempotency_key(request: &HttpRequest) -> Result<String, ApiError> {
    let key = request
        .headers()
        .get("idempotency-key")
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .unwrap_or("");
    let fits = (1..=64).contains(&key.len())
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if !fits {
        return Err(ApiError::new(
            ErrorCode::IdempotencyKeyRequired,
            "every POST needs an Idempotency-Key header of 1 to 64 letters, digits, - or _; \
             nothing was done",
        ));
    }
    Ok(key.to_owned())
}

/// `POST /api/v1/checkouts`.
#[utoipa::path(post, path = "/api/v1/checkouts", tag = "checkout",
    security(("api_key" = [])),
    params(("Idempotency-Key" = String, Header, description = "The same key and body: the same answer")),
    request_body = CheckoutBody,
    responses((status = 201, description = "Held: send the shopper to `payment_url`; the order is `order_token`; a seat line's seats granted are in `seats` (`[{\"product_id\", \"seats\": [\"C-12\", \"C-13\"]}]`)"),
              (status = 400, description = "Bad JSON, or no Idempotency-Key", body = super::ErrorBody),
              (status = 401, description = "No live key", body = super::ErrorBody),
              (status = 403, description = "The key lacks start_checkouts", body = super::ErrorBody),
              (status = 409, description = "Sold out, over a limit, not on sale, seats taken (`error.seats` names them and offers others) or not together", body = super::ErrorBody),
              (status = 413, description = "The body is too large", body = super::ErrorBody),
              (status = 422, description = "Lines, customer, provider or way to pay (`unknown_provider`) that cannot be used, or the Idempotency-Key used with another body", body = super::ErrorBody),
              (status = 429, description = "Too many from this address", body = super::ErrorBody),
              (status = 503, description = "The provider did not answer; nothing was held", body = super::ErrorBody)))]
pub async fn start(
    shop: web::Data<Shop>,
    request: HttpRequest,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    let (key, idem, body, raw) = posted::<CheckoutBody>(&request, payload).await?;
    if body.lines.is_empty()
        || body.lines.len() > 20
        || body
            .lines
            .iter()
            .any(|l| l.product_id.is_empty() || l.product_id.len() > 200)
    {
        return Err(ApiError::new(
            ErrorCode::BadLines,
            "give 1 to 20 lines of 1 to 100 units of a product id; nothing was done",
        ));
    }
    // the sold-out crowd is answered from memory and writes nothing
    if let Some(refused) = refused_from_memory(&shop, &key, &idem, &body) {
        let code = checkout_code(&refused).expect("a refusal has its code");
        return Err(refusal(&shop, code, refused).await?);
    }
    // each line as the basket takes it: a table's time found from its room
    let mut choices: Vec<(String, Choice)> = Vec::with_capacity(body.lines.len());
    for l in &body.lines {
        choices.push(
            table_lines::resolve(
                &shop.live,
                &shop.pool,
                &l.product_id,
                table_lines::Units {
                    qty: l.qty,
                    seats: l.seats.clone(),
                    together: l.together,
                },
                l.party,
                l.at,
            )
            .await?,
        );
    }
    once(&shop, "checkout", &key, &idem, &raw, || async {
        let body = run(&shop, &request, &key, &idem, body, &choices).await?;
        // the key's checkout, in Activity
        let mut tx = shop.pool.begin().await?;
        crate::audit::record(
            &mut tx,
            &key,
            "api_checkout",
            body["order_token"].as_str().unwrap_or(""),
            body["state"].as_str().unwrap_or("started"),
            serde_json::json!({ "amount_minor": body["amount_minor"], "currency": body["currency"] }),
        )
        .await?;
        tx.commit().await?;
        Ok((StatusCode::CREATED, body))
    })
    .await
}

/// The API's basket for this key's checkout, filled with its lines: each
/// added once (a run again adds nothing more), or why a line cannot be.
async fn fill_basket(
    shop: &Shop,
    basket_id: &str,
    choices: &[(String, Choice)],
) -> Result<(), ApiError> {
    for (product_id, choice) in choices {
        let add =
            uuid::Uuid::from_slice(&Sha256::digest(format!("{basket_id}:{product_id}"))[..16])
                .expect("16 bytes");
        let added = retry("basket_add", Bound::Shopper, || {
            basket::add(&shop.pool, basket_id, product_id, choice, add, None)
        })
        .await?;
        match added {
            basket::Added::Added { .. } => {}
            basket::Added::Unknown => {
                return Err(ApiError::new(
                    ErrorCode::UnknownProduct,
                    format!("{} is not for sale; nothing was held", product_id),
                ));
            }
            basket::Added::NotChosenThatWay { kind } => {
                return Err(ApiError::new(
                    ErrorCode::BadLines,
                    format!(
                        "{product_id}: a {} {}; nothing was done",
                        kind.sheet().noun,
                        kind.choice().fields_words()
                    ),
                ));
            }
            basket::Added::TooMany { max_per_order, .. } => {
                return Err(ApiError::new(
                    ErrorCode::OverLimit,
                    format!(
                        "one order takes at most {max_per_order} of {}; nothing was held",
                        product_id
                    ),
                ));
            }
        }
    }
    Ok(())
}

async fn run(
    shop: &Shop,
    request: &HttpRequest,
    key: &api_keys::ApiKey,
    idem: &str,
    body: CheckoutBody,
    choices: &[(String, Choice)],
) -> Result<serde_json::Value, ApiError> {
    // whose address the limits count: the shopper's, when the storefront
    // says it, else the client's own
    let address = match body.shopper_address.as_deref().map(str::trim) {
        None | Some("") => shop.fairness.address(request),
        Some(text) => text
            .parse::<std::net::IpAddr>()
            .map(crate::limits::client::address_key)
            .map_err(|_| {
                ApiError::new(
                    ErrorCode::InvalidInput,
                    "shopper_address must be an IPv4 or IPv6 address; nothing was held",
                )
            })?,
    };
    // the way to pay, before anything is held: the provider its owner chose
    let (provider, pay_method) = way_to_pay(shop, &body).await?;
    // one checkout per API key and Idempotency-Key: its form key and basket
    let digest = hex::encode(Sha256::digest(format!("{}:{idem}", key.id)));
    let checkout_key = IdempotencyKey::parse(&format!("api-{}", &digest[..40]))
        .map_err(|e| ApiError::new(ErrorCode::InvalidInput, e.0))?;
    let basket_id = format!("api-{}", &digest[..40]);
    fill_basket(shop, &basket_id, choices).await?;
    let begun = checkout::begin(
        shop.desk(),
        BeginRequest {
            checkout_key: checkout_key.clone(),
            basket_id: Some(basket_id),
            name: body.name,
            email: body.email,
            phone: body.phone,
            provider,
            form_lines: None,
            address,
            voucher: body.voucher,
            pay_method,
        },
    )
    .await?;
    let Some(code) = checkout_code(&begun) else {
        let order = checkout::order_by_checkout_key(&shop.pool, checkout_key.as_str())
            .await?
            .ok_or_else(|| ApiError::new(ErrorCode::Unavailable, "try again in a moment"))?;
        let mut answer = serde_json::json!({
            "order_token": order.token,
            "state": order.state,
            "payment_url": order.provider_url,
            "order_url": format!("{}/orders/{}", shop.base_url, order.token),
            "amount_minor": order.amount_minor,
            "currency": order.currency,
        });
        // a booking says its tables and its stay
        let bookings = table_lines::bookings_of(&shop.pool, order.id).await?;
        if !bookings.is_empty() {
            answer["bookings"] = serde_json::Value::Array(bookings);
        }
        // a seat line says the seats it got, section by section
        let seats = crate::catalogue::seats::order_seats(&shop.pool, order.id).await?;
        if !seats.is_empty() {
            answer["seats"] = serde_json::to_value(seats).unwrap_or_default();
        }
        return Ok(answer);
    };
    Err(refusal(shop, code, begun).await?)
}

/// A checkout that started nothing, in the API's words.
async fn refusal(shop: &Shop, code: ErrorCode, begun: Begun) -> Result<ApiError, ApiError> {
    Ok(match begun {
        Begun::BadCustomer { reason } => ApiError::new(code, reason),
        Begun::TooSlowToPay { reason } => {
            ApiError::new(code, format!("{reason} Nothing was held."))
        }
        Begun::SoldOut { lines, .. } | Begun::NoTable { lines, .. } => {
            short_error(shop, code, &lines).await?
        }
        Begun::BadVoucher { code: typed, .. } => ApiError::new(
            code,
            format!("the code {typed} cannot be used; nothing was held"),
        ),
        Begun::EmptyBasket => ApiError::new(code, "nothing to check out"),
        Begun::SeatsRefused { refusal, .. } => {
            let mut error = ApiError::new(code, format!("{} Nothing was held.", refusal.words()));
            error.seats = Some(serde_json::json!({
                "product_id": refusal.product_id,
                "seats": refusal.seats,
                "offers": refusal.offers,
                "split_allowed": refusal.split_allowed,
            }));
            error
        }
        _ => ApiError::of(code),
    })
}

/// A checkout memory can refuse without a database round trip
/// ([`checkout::api_lines_refused`]): memory may be believed, the
/// `Idempotency-Key` was not claimed before its last full read, the body
/// is one the database would not refuse first (a provider and a way to
/// pay offered, a shopper's address that reads, a customer who may buy
/// what the lines ask, no voucher to judge), and every line asks so many
/// units (or the best seats) of a product memory knows, within one
/// order's most, or a party at a time of a room whose times around it
/// memory keeps (`routes::tables::around`). `None`: the database answers,
/// and keeps its answer.
fn refused_from_memory(
    shop: &Shop,
    key: &ApiKey,
    idem: &str,
    body: &CheckoutBody,
) -> Option<Begun> {
    let snapshot = shop.live.now()?;
    let settings = snapshot.settings();
    if settings.claimed(&key.id, idem) || body.voucher.is_some() {
        return None;
    }
    shop.payments.chosen(body.provider.as_deref())?;
    if let Some(method) = body.method.as_deref() {
        let (kind, method) = settings
            .ways
            .serving(&shop.payments, &settings.currency, method)?;
        // a bank debit is judged against the order's start first
        if body.provider.as_deref().is_some_and(|p| p != kind.as_str()) || method.settles_later() {
            return None;
        }
    }
    if body
        .shopper_address
        .as_deref()
        .map(str::trim)
        .is_some_and(|a| !a.is_empty() && a.parse::<std::net::IpAddr>().is_err())
    {
        return None;
    }
    let mut lines: Vec<(String, i32)> = Vec::with_capacity(body.lines.len());
    // the party lines, with the times around each as memory keeps them
    let mut parties = Vec::new();
    for line in &body.lines {
        if line.seats.is_some() {
            return None;
        }
        let (product_id, qty, choice) = match (line.party, line.at) {
            (None, None) => {
                let qty = line.qty.filter(|q| (1..=100).contains(q))?;
                let choice = Choice::from_fields(crate::catalogue::ChoiceFields {
                    qty: Some(i64::from(qty)),
                    together: line.together,
                    ..Default::default()
                })
                .ok()?;
                (line.product_id.clone(), qty, choice)
            }
            (Some(party), Some(at)) if line.qty.is_none() && line.together.is_none() => {
                let at = at.with_timezone(&chrono::Utc);
                let time = settings.dining_time(&line.product_id, at)?;
                let choice = Choice::from_fields(crate::catalogue::ChoiceFields {
                    party: Some(i64::from(party)),
                    at: Some(at),
                    ..Default::default()
                })
                .ok()?;
                let around =
                    crate::routes::tables::around::kept(&shop.live, &time.product_id, party)?;
                parties.push((time.product_id.clone(), party, around));
                (time.product_id.clone(), party, choice)
            }
            _ => return None,
        };
        let (product, _) = snapshot.product(&product_id)?;
        let takes = product.kind.choice().takes_in_basket(&choice);
        if !takes
            || product.hidden
            || qty > product.max_per_order
            || lines.iter().any(|(id, _)| *id == product_id)
        {
            return None;
        }
        lines.push((product_id, qty));
    }
    // a party's guest gives a phone: without a customer who may buy, the
    // database's answer is that
    checkout::Customer::parse(&body.name, &body.email)
        .and_then(|c| c.with_phone(body.phone.as_deref(), !parties.is_empty()))
        .ok()?;
    if let Some(refused) = checkout::api_lines_refused(&shop.live, &snapshot, &lines) {
        return Some(refused);
    }
    // covers enough, but no table free for the party's stay, as memory
    // keeps the room's answer around its time: the database seats the
    // lines in their order, so the first party no table seats alone is
    // the one it refuses
    let now = chrono::Utc::now();
    for (product_id, party, around) in &parties {
        let asked = around.asked()?;
        if asked.seats {
            continue;
        }
        // a first try under this key that took the table changed its
        // time after memory's last full read: the database answers its
        // retry (with the order it made), not memory
        let (_, level) = snapshot.product(product_id)?;
        if level.changed_at >= snapshot.full_read_began() {
            return None;
        }
        // a hold past its end around the time is free to the database:
        // it may seat the party where the kept answer did not
        let due = around.times.iter().any(|t| {
            snapshot
                .product(&t.product_id)
                .is_none_or(|(_, level)| level.something_due(now))
        });
        if due {
            return None;
        }
        if asked.covers_left < *party {
            return None;
        }
        shop.live.refused();
        return Some(Begun::NoTable {
            lines: vec![ShortLine {
                product_id: product_id.clone(),
                name: snapshot
                    .product(product_id)
                    .map(|(p, _)| p.name.clone())
                    .unwrap_or_default(),
                requested: *party,
                available: 0,
            }],
            basket: Vec::new(),
        });
    }
    None
}

/// The provider named for a checkout and the way to pay: a `method` is
/// served by the provider the shop's owner chose for it (and `provider`,
/// if named too, must be that one); without one, `provider` as sent.
async fn way_to_pay(
    shop: &Shop,
    body: &CheckoutBody,
) -> Result<(Option<String>, Option<PayMethod>), ApiError> {
    let Some(name) = body.method.as_deref() else {
        return Ok((body.provider.clone(), None));
    };
    let (currency, ways) = shop.live.ways_to_pay().await?;
    match ways.serving(&shop.payments, &currency, name) {
        Some((kind, method)) if body.provider.as_deref().is_none_or(|p| p == kind.as_str()) => {
            Ok((Some(kind.as_str().to_owned()), Some(method)))
        }
        _ => Err(ApiError::new(
            ErrorCode::UnknownProvider,
            format!(
                "That way of paying is not offered here ({}); nothing was held",
                name.chars().take(40).collect::<String>()
            ),
        )),
    }
}

/// Lines that cannot be had, in the API's words: what is left of each (a
/// party: that no table seats it), and for a party the nearest times that
/// seat it.
async fn short_error(shop: &Shop, code: ErrorCode, lines: &[ShortLine]) -> sqlx::Result<ApiError> {
    let words: Vec<String> = lines
        .iter()
        .map(|l| match code {
            ErrorCode::NoTable => format!("{}: no table for {}", l.product_id, l.requested),
            _ => format!(
                "{}: {} left, {} asked for",
                l.product_id, l.available, l.requested
            ),
        })
        .collect();
    // a table taken: the nearest times that seat the party (only a
    // party has times to offer; memory says which lines are)
    let ids: Vec<String> = lines.iter().map(|l| l.product_id.clone()).collect();
    let parties = shop.live.parties(&ids).await?;
    let tables: Vec<ShortLine> = lines
        .iter()
        .filter(|l| parties.contains(&l.product_id))
        .cloned()
        .collect();
    let nearest = table_lines::nearest_words(&shop.live, &shop.pool, &tables).await?;
    let nearest = if nearest.is_empty() {
        String::new()
    } else {
        format!("; {nearest}")
    };
    let what = match code {
        ErrorCode::NoTable => "no table then",
        _ => "not enough left",
    };
    Ok(ApiError::new(
        code,
        format!("{what} ({}){nearest}; nothing was held", words.join("; ")),
    ))
}
