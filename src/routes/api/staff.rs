//! The staff endpoints: refunds, redemption and vouchers, each through the
//! one routine the admin's page calls ([`refunds::refund_order_as`],
//! [`redemption::redeem`], [`vouchers::create_by`]), each recorded in
//! Activity in that routine's transaction with the key as the actor. Each
//! POST is answered once per `Idempotency-Key` (the first answer is kept);
//! a refund and a redemption are keyed by it themselves too, so a retry
//! racing the first is the same refund, the same scan.

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use serde::Deserialize;
use serde_json::json;
use sha2::{Digest, Sha256};

use super::checkout::{idempotency_key, once, posted};
use super::{ApiError, ErrorCode, key_of};
use crate::audit::{self, Actor};
use crate::redemption::{self, Door, Outcome};
use crate::retry::{Bound, retry};
use crate::staff::StaffError;
use crate::staff::api_keys::ApiKey;
use crate::staff::refunds::{self, RefundOutcome, RefundRequest};
use crate::staff::vouchers::{self, VoucherCreated};
use crate::state::Shop;
use crate::vouchers::{Created, NewVoucher, VoucherCode};

fn invalid(message: impl Into<String>) -> ApiError {
    ApiError::new(ErrorCode::InvalidInput, message)
}

impl From<StaffError> for ApiError {
    fn from(error: StaffError) -> Self {
        match error {
            StaffError::InvalidInput(message) => invalid(message),
            StaffError::Database(error) => error.into(),
            other => {
                tracing::error!(cause = %other, "api staff request failed");
                ApiError::new(
                    ErrorCode::Internal,
                    "something went wrong on our side; nothing was changed twice",
                )
            }
        }
    }
}

/// What this key's `Idempotency-Key` stands for, made into a name the
/// routine keys itself by (no two keys share one).
fn derived(key: &ApiKey, idem: &str) -> [u8; 32] {
    Sha256::digest(format!("{}:{idem}", key.id)).into()
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RefundBody {
    /// Units per product; absent or empty (and no `items`): everything
    /// not refunded yet.
    #[serde(default)]
    units: Vec<RefundUnits>,
    /// Items by id (the order's `items[].id`): these seats, that
    /// booking; each with its units. A product is named in `units` or by
    /// its items, not both.
    #[serde(default)]
    items: Vec<i64>,
    /// Why (the shopper is told): 1 to 500 characters.
    reason: String,
    /// Put the units back on sale (default true); false takes them off.
    #[serde(default = "yes")]
    restock: bool,
    /// Refund units whose codes were redeemed already (default false: such
    /// a refund is refused as `redeemed`). Recorded in Activity.
    #[serde(default)]
    override_redeemed: bool,
}

fn yes() -> bool {
    true
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RefundUnits {
    product_id: String,
    qty: i32,
}

/// `POST /api/v1/orders/{id}/refunds`: refund (some of) a paid order.
#[utoipa::path(post, path = "/api/v1/orders/{id}/refunds", tag = "staff",
    security(("api_key" = [])),
    params(("id" = String, Path, description = "The order's id (a UUID)"),
           ("Idempotency-Key" = String, Header, description = "The same key and body: the same refund, answered again")),
    request_body = RefundBody,
    responses((status = 201, description = "Recorded and queued: `refund_id`, `amount_minor`, `currency`, `units`, `whole`; the provider is asked next"),
              (status = 400, description = "Bad JSON, or no Idempotency-Key", body = super::ErrorBody),
              (status = 401, description = "No live key", body = super::ErrorBody),
              (status = 403, description = "The key lacks refund", body = super::ErrorBody),
              (status = 404, description = "No such order (`not_found`)", body = super::ErrorBody),
              (status = 409, description = "Not paid (`not_paid`), everything refunded (`nothing_left`), or units whose codes were redeemed (`redeemed`)", body = super::ErrorBody),
              (status = 413, description = "The body is too large", body = super::ErrorBody),
              (status = 422, description = "A reason or units that cannot be used (`invalid_input`), more than is left (`too_many`), a product the order lacks (`not_in_order`), or the Idempotency-Key used with another body", body = super::ErrorBody)))]
pub async fn refund(
    shop: web::Data<Shop>,
    request: HttpRequest,
    id: web::Path<String>,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    let (key, idem, body, raw) = posted::<RefundBody>(&request, payload).await?;
    let not_found = || ApiError::new(ErrorCode::NotFound, "no such order");
    let order_id = uuid::Uuid::parse_str(&id).map_err(|_| not_found())?;
    let by = key.actor_name();
    let refund = RefundRequest {
        order_id,
        units: body
            .units
            .into_iter()
            .map(|u| (u.product_id, u.qty))
            .collect(),
        reason: body.reason,
        restock: body.restock,
        override_redeemed: body.override_redeemed,
        by: by.clone(),
        staff: None,
        // the refund itself is keyed by this key's Idempotency-Key
        key: Some(format!("api-{}", &hex::encode(derived(&key, &idem))[..40])),
    };
    let picked = refunds::Picked {
        items: body.items,
        cancels: false,
    };
    refunds::check(&refund).map_err(invalid)?;
    refunds::check_picked(&picked).map_err(invalid)?;
    once(&shop, &format!("refund {order_id}"), &key, &idem, &raw, || async {
        let outcome = refunds::refund_picked(&shop.pool, &refund, Some(&by), &picked).await?;
        let refused = |code, message: String| Err(ApiError::new(code, message));
        match outcome {
            RefundOutcome::Queued {
                refund_id,
                amount_minor,
                currency,
                units,
                whole,
            } => Ok((
                StatusCode::CREATED,
                json!({
                    "outcome": "queued",
                    "refund_id": refund_id,
                    "order_id": order_id,
                    "amount_minor": amount_minor,
                    "currency": currency,
                    "units": units,
                    "whole": whole,
                }),
            )),
            RefundOutcome::NotPaid { state } => refused(ErrorCode::NotPaid, format!(
                    "the order is {}, not paid; nothing was refunded",
                    state.as_str()
                ),
            ),
            RefundOutcome::NothingLeft => refused(ErrorCode::NothingLeft, "every unit of the order was refunded already".into(),
            ),
            RefundOutcome::NotInOrder { product_id } => refused(ErrorCode::NotInOrder, format!("the order has no {product_id}; nothing was refunded"),
            ),
            RefundOutcome::TooMany {
                product_id,
                asked,
                left,
            } => refused(ErrorCode::TooMany, format!(
                    "{asked} of {product_id} asked for, {left} left to refund; nothing was refunded"
                ),
            ),
            RefundOutcome::Redeemed { codes } => refused(ErrorCode::Redeemed, format!(
                    "these codes were redeemed ({}); send override_redeemed to refund them anyway; nothing was refunded",
                    codes.join(", ")
                ),
            ),
            RefundOutcome::NotFound => Err(not_found()),
        }
    })
    .await
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RedeemBody {
    /// The code as scanned or typed (spaces and case do not matter).
    code: String,
    /// The door or counter: at most 100 characters.
    #[serde(default)]
    place: String,
}

/// `POST /api/v1/redemptions`: redeem a ticket or pickup code once.
#[utoipa::path(post, path = "/api/v1/redemptions", tag = "staff",
    security(("api_key" = [])),
    params(("Idempotency-Key" = String, Header, description = "One per scan: the same key and body get the same answer")),
    request_body = RedeemBody,
    responses((status = 200, description = "What the code came to: `outcome` is `admitted`, `collected`, `already_used` (with `redeemed_at`, `redeemed_by`, `place`), `refunded`, `not_paid` (the order is not paid) or `not_valid`"),
              (status = 400, description = "Bad JSON, or no Idempotency-Key", body = super::ErrorBody),
              (status = 401, description = "No live key", body = super::ErrorBody),
              (status = 403, description = "The key lacks redeem", body = super::ErrorBody),
              (status = 413, description = "The body is too large", body = super::ErrorBody),
              (status = 422, description = "A place over 100 characters (`invalid_input`), or the Idempotency-Key used with another body", body = super::ErrorBody)))]
pub async fn redeem(
    shop: web::Data<Shop>,
    request: HttpRequest,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    let (key, idem, body, raw) = posted::<RedeemBody>(&request, payload).await?;
    let place = body.place.trim();
    if place.chars().count() > 100 {
        return Err(invalid(
            "the door or counter's name is at most 100 characters; nothing was redeemed",
        ));
    }
    let by = key.actor_name();
    let door = Door {
        by: &by,
        place,
        // this scan, once per Idempotency-Key
        attempt: uuid::Uuid::from_slice(&derived(&key, &idem)[..16]).expect("16 bytes"),
        checks: None,
        overrule: false,
    };
    once(&shop, "redeem", &key, &idem, &raw, || async {
        // the scan and its record together, as the admin's page does
        let redeemed = retry("redeem", Bound::Shopper, || async {
            let mut tx = shop.pool.begin().await?;
            let redeemed = redemption::redeem(&mut *tx, &body.code, &door).await?;
            audit::record(
                &mut tx,
                &key,
                "redeem",
                &redeemed.code.chars().take(64).collect::<String>(),
                redeemed.outcome.as_str(),
                json!({ "place": place, "order": redeemed.order_id }),
            )
            .await?;
            tx.commit().await?;
            Ok::<_, sqlx::Error>(redeemed)
        })
        .await?;
        let mut answer = json!({
            "code": redeemed.code.chars().take(64).collect::<String>(),
            "outcome": redeemed.outcome.as_str(),
            "lets_through": redeemed.outcome.lets_through(),
            "kind": redeemed
                .kind
                .and_then(|kind| kind.code_words())
                .map(|words| words.noun),
            "order_id": redeemed.order_id,
            "customer_name": redeemed.customer_name,
            "what": redeemed.what,
            "for": redeemed
                .made_for
                .as_ref()
                .map(|made_for| made_for.describe(shop.zone())),
        });
        if let Outcome::AlreadyUsed { at, by, place } = &redeemed.outcome {
            answer["redeemed_at"] = json!(at);
            answer["redeemed_by"] = json!(by);
            answer["place"] = json!(place);
        }
        Ok((StatusCode::OK, answer))
    })
    .await
}

/// `GET /api/v1/vouchers`: every voucher, newest first, with its uses.
#[utoipa::path(get, path = "/api/v1/vouchers", tag = "staff",
    security(("api_key" = [])),
    responses((status = 200, description = "Every voucher (archived ones too): code, discount, products, unlocks, validity, `uses`, `held`, `used`, `archived`"),
              (status = 401, description = "No live key", body = super::ErrorBody),
              (status = 403, description = "The key lacks manage_vouchers", body = super::ErrorBody)))]
pub async fn vouchers_list(shop: web::Data<Shop>) -> Result<HttpResponse, ApiError> {
    let vouchers = crate::vouchers::list(&shop.pool).await?;
    Ok(HttpResponse::Ok().json(json!({ "vouchers": vouchers })))
}

/// `POST /api/v1/vouchers`: create a voucher, as the admin's Vouchers page.
#[utoipa::path(post, path = "/api/v1/vouchers", tag = "staff",
    security(("api_key" = [])),
    params(("Idempotency-Key" = String, Header, description = "The same key and body: the same answer")),
    request_body = NewVoucher,
    responses((status = 201, description = "Created: its `code`, normalised"),
              (status = 400, description = "Bad JSON, or no Idempotency-Key", body = super::ErrorBody),
              (status = 401, description = "No live key", body = super::ErrorBody),
              (status = 403, description = "The key lacks manage_vouchers", body = super::ErrorBody),
              (status = 409, description = "A voucher of that code exists, perhaps archived (`exists`)", body = super::ErrorBody),
              (status = 413, description = "The body is too large", body = super::ErrorBody),
              (status = 422, description = "A voucher that cannot be made (`invalid_input`, the check's words), products the shop lacks (`unknown_products`) or unlocks that are not hidden (`not_hidden`), or the Idempotency-Key used with another body", body = super::ErrorBody)))]
pub async fn vouchers_create(
    shop: web::Data<Shop>,
    request: HttpRequest,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    let (key, idem, voucher, raw) = posted::<NewVoucher>(&request, payload).await?;
    voucher.check().map_err(|e| invalid(e.0))?;
    once(&shop, "create voucher", &key, &idem, &raw, || async {
        let currency = crate::staff::catalogue::shop_currency(&shop.pool).await?;
        let created =
            vouchers::create_by(&shop.pool, Actor::from(&key), &voucher, &currency).await?;
        let refused = |code, message: String| Err(ApiError::new(code, message));
        match created {
            VoucherCreated::Made(Created::Created { code }) => {
                Ok((StatusCode::CREATED, json!({ "code": code })))
            }
            VoucherCreated::Made(Created::Exists { code }) => Err(ApiError::new(
                ErrorCode::Exists,
                format!("a voucher {code} exists already (perhaps archived); nothing was changed"),
            )),
            VoucherCreated::Made(Created::UnknownProducts { ids }) => refused(
                ErrorCode::UnknownProducts,
                format!(
                    "the shop does not sell {}; nothing was changed",
                    ids.join(", ")
                ),
            ),
            VoucherCreated::NotHidden { ids } => refused(
                ErrorCode::NotHidden,
                format!(
                    "{} is not hidden: everyone can buy it already; nothing was changed",
                    ids.join(", ")
                ),
            ),
        }
    })
    .await
}

/// `POST /api/v1/vouchers/{code}/archive`: stop a voucher, as the admin's
/// Vouchers page does: no checkout may start with it again; uses held run
/// their course. The body is empty (or `{}`).
#[utoipa::path(post, path = "/api/v1/vouchers/{code}/archive", tag = "staff",
    security(("api_key" = [])),
    params(("code" = String, Path, description = "The voucher's code (case does not matter)"),
           ("Idempotency-Key" = String, Header, description = "The same key: the same answer")),
    responses((status = 200, description = "Archived: its `code`, `held` and `used`"),
              (status = 400, description = "A body that is not empty or `{}`, or no Idempotency-Key", body = super::ErrorBody),
              (status = 401, description = "No live key", body = super::ErrorBody),
              (status = 403, description = "The key lacks manage_vouchers", body = super::ErrorBody),
              (status = 404, description = "No such voucher (`not_found`)", body = super::ErrorBody),
              (status = 409, description = "Archived already (`archived`)", body = super::ErrorBody),
              (status = 413, description = "The body is too large", body = super::ErrorBody),
              (status = 422, description = "The Idempotency-Key used with another voucher", body = super::ErrorBody)))]
pub async fn vouchers_archive(
    shop: web::Data<Shop>,
    request: HttpRequest,
    code: web::Path<String>,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    let key = key_of(&request).expect("the guard let a key through");
    let idem = idempotency_key(&request)?;
    let raw = super::empty_body(payload).await?;
    let not_found = || ApiError::new(ErrorCode::NotFound, "no such voucher");
    let code = VoucherCode::parse(&code).map_err(|_| not_found())?;
    // the voucher (its code, normalised) is part of what the key stands
    // for: another voucher under the same key is refused, not answered
    // with this one's answer
    once(
        &shop,
        &format!("archive voucher {}", code.as_str()),
        &key,
        &idem,
        &raw,
        || async {
            if vouchers::archive_by(&shop.pool, Actor::from(&key), &code).await? {
                let voucher = crate::vouchers::find(&shop.pool, &code).await?;
                return Ok((
                    StatusCode::OK,
                    json!({
                        "code": code.as_str(),
                        "archived": true,
                        "held": voucher.as_ref().map(|v| v.held),
                        "used": voucher.as_ref().map(|v| v.used),
                    }),
                ));
            }
            match crate::vouchers::find(&shop.pool, &code).await? {
                Some(voucher) if voucher.archived => Err(ApiError::new(
                    ErrorCode::Archived,
                    format!(
                        "{} was archived already; nothing was changed",
                        code.as_str()
                    ),
                )),
                _ => Err(not_found()),
            }
        },
    )
    .await
}
