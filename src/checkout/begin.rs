//! The checkout as the shop runs it, from a submitted form to the
//! provider's payment page: docs/contract.md §3 in order. A form the shop's
//! memory can refuse is refused without the database; otherwise one read
//! finds a form submitted before, or the basket with its prices and what is
//! left; then one transaction holds every line and writes the pending
//! order; then, outside any lock, the provider's page; then the payment
//! phase. A failure after the hold gives the units back at once.
//!
//! The shop's form handler parses and renders around [`begin`]; the JSON
//! API calls the same function, so both sell by the same rules.

use sqlx::PgPool;

use super::basket::{self, BasketLine, FormLines};
use super::short::{ShortLine, Supply, Wanted, short_lines};
use super::{
    AttachOutcome, CheckoutRead, CheckoutStart, Checkouts, Customer, Fulfilment, Order, OrderLine,
    OrderState, Release, Result, StartLimits, StartOutcome, WantedLine, codes,
};
use super::{OffSaleLine, VoucherUse};
use crate::catalogue::{Sale, Stock};
use crate::inventory::{AccountId, IdempotencyKey, InvalidInput};
use crate::limits::TooFast;
use crate::limits::client::Fairness;
use crate::live::LiveStock;
use crate::payments::{PageLine, PageRequest, PaymentPage, ProviderError, ProviderKind, Providers};
use crate::retry::{Bound, retry};
use crate::vouchers::{PricedLine, Refusal, VoucherCode};

/// What checking out needs of the shop: its database, its memory, its
/// limits, its combined calls and its providers, and how shoppers reach it.
#[derive(Debug, Clone, Copy)]
pub struct Desk<'a> {
    pub pool: &'a PgPool,
    pub live: &'a LiveStock,
    pub fairness: &'a Fairness,
    pub checkouts: &'a Checkouts,
    pub payments: &'a Providers,
    /// How browsers and providers reach the shop, without a trailing slash.
    pub base_url: &'a str,
    /// Life of a provider payment page.
    pub session_minutes: i64,
    /// The shop's time zone, for the dates the provider's lines say.
    pub zone: crate::clock::ShopZone,
}

/// A submitted checkout, its fields as the shopper sent them.
#[derive(Debug, Clone)]
pub struct BeginRequest {
    /// The form's one-time key: a second submit finds the same order.
    pub checkout_key: IdempotencyKey,
    /// The basket (its cookie), if the shopper has one.
    pub basket_id: Option<String>,
    pub name: String,
    pub email: String,
    /// The guest's phone, as typed: kept (and required) only when the
    /// basket holds a booking.
    pub phone: Option<String>,
    /// The way of paying the shopper chose; the shop's default when `None`.
    pub provider: Option<String>,
    /// The basket as its page showed it: lets a sold-out answer come from
    /// memory. `None`: the database answers.
    pub form_lines: Option<FormLines>,
    /// The client's address, as the limits key it.
    pub address: String,
    /// The voucher code the shopper typed (the form's `voucher` field).
    pub voucher: Option<String>,
    /// The way of paying the shopper chose (its provider is `provider`);
    /// the provider's page offers it alone.
    pub pay_method: Option<crate::payments::methods::PayMethod>,
}

/// Where a checkout ended, for the shopper.
#[derive(Debug)]
pub enum Begun {
    /// Everything is held and the provider's page is open: send the
    /// shopper there.
    Pay { url: String },
    /// The order owed nothing and is confirmed, with no provider: send the
    /// shopper to its page.
    Confirmed { order: Box<Order> },
    /// The form was submitted before: its order, as it is now (once its
    /// first submit has its page, or a few seconds have passed).
    Again { order: Box<Order> },
    /// There is nothing to check out.
    EmptyBasket,
    /// The name or the e-mail cannot be used; the reason says why.
    BadCustomer { reason: String },
    /// That way of paying is not offered here.
    UnknownProvider,
    /// The client's address is over its rate.
    TooFast(TooFast),
    /// Lines that cannot be had now; nothing was held. `basket` is the
    /// basket as it was read, `sold_out` what is pending of the sold-out
    /// products.
    Short {
        lines: Vec<ShortLine>,
        basket: Vec<BasketLine>,
        sold_out: Vec<Stock>,
    },
    /// The basket would take more than one shopper may hold.
    OverLimit {
        lines: Vec<ShortLine>,
        basket: Vec<BasketLine>,
    },
    /// Products no longer sold were taken out of the basket.
    Withdrawn,
    /// Lines whose sale is not open (not yet, or no longer); nothing was
    /// held.
    NotOnSale {
        lines: Vec<OffSaleLine>,
        basket: Vec<BasketLine>,
    },
    /// The voucher cannot be used (named, with why); nothing was held.
    BadVoucher {
        code: String,
        refusal: Refusal,
        basket: Vec<BasketLine>,
    },
    /// Hidden products in the basket, sold only with the code that
    /// unlocks them.
    Locked {
        ids: Vec<String>,
        basket: Vec<BasketLine>,
    },
    /// A seat line's seats were taken meanwhile (or are unknown, or not
    /// together), with others offered; nothing was held.
    SeatsRefused {
        refusal: crate::catalogue::kinds::seat_choice::SeatRefusal,
        basket: Vec<BasketLine>,
    },
    /// The provider could not open a page: the units went back.
    ProviderFailed,
    /// The page opened but the payment phase could not start: the units
    /// went back.
    PaymentPhaseFailed,
    /// The hold ran out before the payment page opened: the units went back.
    RanOut,
}

/// Run one checkout.
pub async fn begin(desk: Desk<'_>, request: BeginRequest) -> Result<Begun> {
    // the sold-out crowd is answered from memory and writes nothing
    if request.basket_id.is_some()
        && let Some(refused) = refused_from_memory(desk, &request)
    {
        return Ok(refused);
    }
    // every change committed before this moment is in the reads below
    let read_at = chrono::Utc::now();
    let (read, taken) = read_and_take(desk, &request).await?;
    // a double submit goes where the first one went, once it knows
    if let Some(existing) = read.existing
        && let Some(order) = retry("order_read", Bound::Shopper, || {
            super::order_by_id(desk.pool, existing)
        })
        .await?
    {
        return Ok(Begun::Again {
            order: Box::new(await_provider_page(desk.pool, order).await?),
        });
    }
    let start = match prepare(desk, &request, &read, taken).await? {
        Ok(start) => start,
        Err(refused) => return Ok(refused),
    };
    // run again whole while the database is away: the same key and token
    // find the order a lost commit wrote, and go on from it
    let started = retry("checkout_start", Bound::Shopper, || async {
        let started = desk.checkouts.start_read(&start, &read).await?;
        crate::faults::lost_answer("checkout_start")?;
        Ok::<_, super::CheckoutError>(started)
    })
    .await?;
    let basket_id = request.basket_id.as_deref().unwrap_or_default();
    match started {
        StartOutcome::Started {
            order,
            lines,
            resource,
        } => pay(desk, order, &lines, resource, basket_id, request.pay_method).await,
        refused => not_started(desk, &request, read_at, &read, &start, refused).await,
    }
}

/// One read: whether this form was submitted before, and the basket with
/// its prices and what is left (enough to refuse a sold-out line); the
/// address's token is taken meanwhile, so a start pays one round trip for
/// both.
async fn read_and_take(
    desk: Desk<'_>,
    request: &BeginRequest,
) -> Result<(CheckoutRead, std::result::Result<(), TooFast>)> {
    let key = request.checkout_key.as_str();
    let read = retry("checkout_read", Bound::Shopper, || async {
        Ok::<_, sqlx::Error>(match &request.basket_id {
            Some(basket) => super::read_checkout(desk.pool, key, basket).await?,
            None => CheckoutRead {
                existing: super::order_by_checkout_key(desk.pool, key)
                    .await?
                    .map(|order| order.id),
                lines: Vec::new(),
            },
        })
    });
    let taken = retry("rate_take", Bound::Shopper, || {
        desk.fairness.take(&request.address)
    });
    let (read, taken) = futures::join!(read, taken);
    Ok((read?, taken?))
}

/// The checkout to start, from the request and the read: the way of
/// paying, the customer, the basket's lines as the shopper chose them,
/// the voucher judged now; or why there is none.
async fn prepare(
    desk: Desk<'_>,
    request: &BeginRequest,
    read: &CheckoutRead,
    taken: std::result::Result<(), TooFast>,
) -> Result<std::result::Result<CheckoutStart, Begun>> {
    let Some(provider) = match request.provider.as_deref() {
        None => desk.payments.default_kind(),
        Some(name) => ProviderKind::parse(name),
    }
    .filter(|kind| desk.payments.get(*kind).is_some()) else {
        return Ok(Err(Begun::UnknownProvider));
    };
    // a booking's guest gives a phone; anyone else's is not kept
    let asks_phone = read
        .lines
        .iter()
        .any(|line| line.kind.choice() == crate::catalogue::ChoiceKind::Party);
    let customer = match Customer::parse(&request.name, &request.email).and_then(|customer| {
        customer.with_phone(request.phone.as_deref().filter(|_| asks_phone), asks_phone)
    }) {
        Ok(customer) => customer,
        Err(error) => return Ok(Err(Begun::BadCustomer { reason: error.0 })),
    };
    let Some(basket_id) = request.basket_id.as_deref() else {
        return Ok(Err(Begun::EmptyBasket));
    };
    if read.lines.is_empty() {
        return Ok(Err(Begun::EmptyBasket));
    }
    if let Err(too_fast) = taken {
        return Ok(Err(Begun::TooFast(too_fast)));
    }
    let voucher = match request
        .voucher
        .as_deref()
        .map(str::trim)
        .filter(|code| !code.is_empty())
    {
        None => None,
        Some(typed) => match voucher_for(desk, typed, read, &customer).await? {
            Ok(voucher) => Some(voucher),
            Err((code, refusal)) => {
                return Ok(Err(Begun::BadVoucher {
                    code,
                    refusal,
                    basket: as_read(read),
                }));
            }
        },
    };
    let lines = read
        .lines
        .iter()
        .map(|line| {
            // a basket's row, read as the kind reads a line's fields
            let choice = line
                .kind
                .choice()
                .parse(crate::catalogue::ChoiceFields {
                    qty: Some(i64::from(line.qty)),
                    party: None,
                    at: line.starts_at,
                    seats: line.seat_labels.clone(),
                    together: line.seat_best.as_deref().map(|b| b == "together"),
                })
                .map_err(|e| InvalidInput(e.to_string()))?;
            Ok(WantedLine {
                product_id: line.product_id.clone(),
                choice,
            })
        })
        .collect::<std::result::Result<_, InvalidInput>>()?;
    Ok(Ok(CheckoutStart {
        voucher,
        limits: StartLimits::for_customer(&desk.fairness.limits, &customer, &request.address),
        checkout_key: request.checkout_key.clone(),
        order_token: codes::order_token(),
        account: AccountId::parse(&format!("basket:{basket_id}"))?,
        lines,
        customer,
        provider,
    }))
}

/// The basket as it was read, for a page that shows it again.
fn as_read(read: &CheckoutRead) -> Vec<BasketLine> {
    read.lines.iter().map(|l| l.basket_line()).collect()
}

/// A checkout the engine did not start, said to the shopper.
async fn not_started(
    desk: Desk<'_>,
    request: &BeginRequest,
    read_at: chrono::DateTime<chrono::Utc>,
    read: &CheckoutRead,
    start: &CheckoutStart,
    outcome: StartOutcome,
) -> Result<Begun> {
    let basket = as_read(read);
    Ok(match outcome {
        StartOutcome::Started { .. } => unreachable!("a started checkout goes to pay"),
        StartOutcome::AlreadyStarted { order } => Begun::Again {
            order: Box::new(await_provider_page(desk.pool, order).await?),
        },
        StartOutcome::Unavailable { lines } => {
            // a replay of this form is refused from memory while nothing
            // it wants changes
            desk.live
                .remember_refused_form(request.checkout_key.as_str(), read_at);
            let sold_out: Vec<String> = lines
                .iter()
                .filter(|line| line.available == 0)
                .map(|line| line.product_id.clone())
                .collect();
            Begun::Short {
                sold_out: retry("stock_read", Bound::Shopper, || desk.live.stock(&sold_out))
                    .await?,
                lines,
                basket,
            }
        }
        StartOutcome::OverLimit { lines } => Begun::OverLimit { lines, basket },
        StartOutcome::UnknownProducts { ids } => {
            let basket_id = request.basket_id.as_deref().unwrap_or_default();
            retry("basket_remove", Bound::Shopper, || {
                basket::remove(desk.pool, basket_id, &ids)
            })
            .await?;
            Begun::Withdrawn
        }
        StartOutcome::NotOnSale { lines } => Begun::NotOnSale { lines, basket },
        StartOutcome::Locked { ids } => Begun::Locked { ids, basket },
        StartOutcome::SeatsRefused { refusal } => Begun::SeatsRefused { refusal, basket },
        StartOutcome::VoucherRefused { refusal } => Begun::BadVoucher {
            code: start
                .voucher
                .as_ref()
                .map(|v| v.voucher.code.to_string())
                .unwrap_or_default(),
            refusal,
            basket,
        },
    })
}

/// A started order on its way to pay: outside any transaction or lock,
/// the provider's page; then the payment phase. A failure gives the units
/// back at once.
async fn pay(
    desk: Desk<'_>,
    order: Order,
    lines: &[OrderLine],
    resource: Option<String>,
    basket_id: &str,
    method: Option<crate::payments::methods::PayMethod>,
) -> Result<Begun> {
    crate::faults::crash_point("after_checkout_commit");
    if order.amount_minor == 0 {
        return confirm_free(desk, order, basket_id).await;
    }
    if let Some(method) = method {
        retry("order_pay_method", Bound::Shopper, || {
            super::order::keep_pay_method(desk.pool, order.id, method)
        })
        .await?;
    }
    let page = match open_page(desk, &order, lines, method).await {
        Ok(page) => page,
        Err(error) => {
            tracing::warn!(order = %order.id, %error, "the payment provider failed at checkout start");
            release(desk.pool, order.id, Release::ProviderError).await?;
            return Ok(Begun::ProviderFailed);
        }
    };
    crate::faults::crash_point("after_provider_call");
    let order_id = order.id;
    let attached = retry("checkout_attach", Bound::Shopper, || {
        desk.checkouts
            .attach(order.clone(), resource.as_deref(), &page, Some(basket_id))
    })
    .await;
    let attached = match attached {
        Ok(attached) => attached,
        Err(error) => {
            // the provider's page exists but our holds could not move into
            // the payment phase: give them back now rather than at the TTL
            tracing::error!(order = %order_id, error = %error, "could not start the payment phase");
            release(desk.pool, order_id, Release::PaymentPhaseFailed).await?;
            return Ok(Begun::PaymentPhaseFailed);
        }
    };
    Ok(match attached {
        // the basket was emptied with the payment phase
        AttachOutcome::Paying { .. } => Begun::Pay { url: page.url },
        AttachOutcome::Ended { .. } => Begun::RanOut,
    })
}

/// An order of nothing, confirmed at once by the one confirm routine
/// without a provider (docs/design.md, "An order of nothing"); its basket
/// is emptied as a paying one's is. Holds that ended meanwhile leave it
/// unsold, as [`Begun::RanOut`].
async fn confirm_free(desk: Desk<'_>, order: Order, basket_id: &str) -> Result<Begun> {
    let order_id = order.id;
    let confirmed = retry("checkout_free", Bound::Shopper, || {
        super::confirm_free(desk.pool, order_id)
    })
    .await?;
    if !matches!(
        confirmed,
        Fulfilment::Fulfilled { .. } | Fulfilment::AlreadyFulfilled { .. }
    ) {
        release(desk.pool, order_id, Release::PaymentPhaseFailed).await?;
        return Ok(Begun::RanOut);
    }
    if !basket_id.is_empty() {
        retry("basket_clear", Bound::Shopper, || {
            basket::clear(desk.pool, basket_id)
        })
        .await?;
    }
    let order = retry("order_read", Bound::Shopper, || {
        super::order_by_id(desk.pool, order_id)
    })
    .await?
    .unwrap_or(order);
    Ok(Begun::Confirmed {
        order: Box::new(order),
    })
}

/// The voucher a shopper typed, judged for this basket by the database's
/// clock; or the code and why it cannot be used. Its uses are the engine's
/// to grant, with the order's units.
async fn voucher_for(
    desk: Desk<'_>,
    typed: &str,
    read: &CheckoutRead,
    customer: &Customer,
) -> Result<std::result::Result<VoucherUse, (String, Refusal)>> {
    let Ok(code) = VoucherCode::parse(typed) else {
        return Ok(Err((typed.chars().take(40).collect(), Refusal::Unknown)));
    };
    let (found, now) = retry("voucher_read", Bound::Shopper, || {
        crate::vouchers::find_now(desk.pool, &code)
    })
    .await?;
    let Some(voucher) = found else {
        return Ok(Err((code.to_string(), Refusal::Unknown)));
    };
    let lines: Vec<PricedLine> = read
        .lines
        .iter()
        .map(|l| PricedLine {
            product_id: l.product_id.clone(),
            unit_price_minor: l.price_minor,
            qty: l.qty,
        })
        .collect();
    let currency = read
        .lines
        .first()
        .map(|l| l.currency.as_str())
        .unwrap_or("");
    if let Err(refusal) = voucher.judge(now, &lines, currency) {
        return Ok(Err((code.to_string(), refusal)));
    }
    let buyer = voucher
        .per_buyer
        .then(|| code.buyer_resource(&crate::limits::email_key(customer.email())));
    if let Some(buyer) = &buyer {
        retry("voucher_buyer", Bound::Shopper, || async {
            crate::vouchers::ensure_buyer_use(desk.pool, buyer)
                .await
                .map_err(|e| match e.downcast::<crate::inventory::InventoryError>() {
                    Ok(crate::inventory::InventoryError::Database(db)) => {
                        super::CheckoutError::Database(db)
                    }
                    Ok(other) => super::CheckoutError::Inventory(other),
                    Err(other) => super::CheckoutError::InvalidInput(other.to_string()),
                })
        })
        .await?;
    }
    Ok(Ok(VoucherUse { voucher, buyer }))
}

/// How near a sale's opening or closing memory leaves the answer to the
/// database (its estimate of the database's clock is off by a read's round
/// trip at most).
const NEAR_THE_MOMENT: chrono::Duration = chrono::Duration::milliseconds(250);

/// A checkout memory can refuse, without a database round trip: a line
/// wants more than memory shows of its product, nothing held is due to come
/// back, and the form was made (or the database last refused this very
/// form) after this process last saw that product change. The last
/// condition keeps a double submit honest: if this form's first submit
/// took the last unit, the product changed after the form was made, so the
/// second submit goes to the database and on to the order the first one
/// started; a form the database refused started no order, so its replays
/// cost that one read until the product changes. `None`: ask the database.
fn refused_from_memory(desk: Desk<'_>, request: &BeginRequest) -> Option<Begun> {
    let snapshot = desk.live.now()?;
    let key = request.checkout_key.as_str();
    let minted = codes::key_minted_at(key).max(desk.live.refused_form_at(key))?;
    let lines = request.form_lines.as_ref()?.lines();
    let now = chrono::Utc::now();
    let mut wanted = Vec::with_capacity(lines.len());
    let mut basket = Vec::with_capacity(lines.len());
    for (id, qty) in lines {
        let (product, _) = snapshot.product(id)?;
        wanted.push(Wanted {
            product_id: id,
            name: &product.name,
            qty: *qty,
            resource: &product.resource_id,
        });
        basket.push(BasketLine {
            product_id: id.clone(),
            name: product.name.clone(),
            qty: *qty,
            price_minor: product.price_minor,
            currency: product.currency.clone(),
            unlocked_by: None,
            starts_at: None,
        });
    }
    // a sale not open by the database's clock, as memory knows it (its
    // last read's offset from this process's clock): refused here only
    // when it is clearly so; near the moment, the database decides
    let db_now = snapshot.database_now();
    let off_sale: Vec<OffSaleLine> = lines
        .iter()
        .filter_map(|(id, _)| {
            let (product, _) = snapshot.product(id)?;
            let sale = match (
                product.sale(db_now - NEAR_THE_MOMENT),
                product.sale(db_now + NEAR_THE_MOMENT),
            ) {
                (Sale::Opens { at }, Sale::Opens { .. }) => Sale::Opens { at },
                (Sale::Closed { at }, Sale::Closed { .. }) => Sale::Closed { at },
                _ => return None,
            };
            Some(OffSaleLine {
                product_id: id.clone(),
                name: product.name.clone(),
                sale,
            })
        })
        .collect();
    if !off_sale.is_empty() {
        desk.live.refused();
        return Some(Begun::NotOnSale {
            lines: off_sale,
            basket,
        });
    }
    let short = short_lines(&wanted, |resource| {
        snapshot.level(resource).map(|level| Supply {
            left: level.available,
            settled: !level.something_due(now) && level.changed_at < minted,
        })
    });
    if short.is_empty() {
        return None;
    }
    let sold_out: Vec<String> = short
        .iter()
        .filter(|line| line.available == 0)
        .map(|line| line.product_id.clone())
        .collect();
    desk.live.refused();
    Some(Begun::Short {
        sold_out: snapshot.stock(&sold_out),
        lines: short,
        basket,
    })
}

/// The provider's payment page for a started order.
pub async fn open_page(
    desk: Desk<'_>,
    order: &Order,
    lines: &[OrderLine],
    method: Option<crate::payments::methods::PayMethod>,
) -> std::result::Result<PaymentPage, ProviderError> {
    let provider = desk.payments.for_order(order.provider)?;
    let base = desk.base_url;
    // a dated line says its date at the provider too: "Winter Jazz —
    // General, Mon 20 Dec 19:30 CET" (a read failing leaves the names)
    let days = super::line_days(desk.pool, order.id, desk.zone)
        .await
        .unwrap_or_default();
    let named = |line: &OrderLine| match days.get(&line.product_id) {
        Some(day) => format!("{}, {day}", line.name),
        None => line.name.clone(),
    };
    let request = PageRequest {
        order_id: order.id,
        amount_minor: order.amount_minor,
        currency: order.currency.clone(),
        lines: lines
            .iter()
            .map(|line| {
                if line.paid_minor == line.unit_price_minor * i64::from(line.qty) {
                    PageLine {
                        name: named(line),
                        qty: line.qty.unsigned_abs(),
                        unit_amount_minor: line.unit_price_minor,
                    }
                } else {
                    // a voucher's share of the line may not divide into its
                    // units: the line as one, at what is paid for it
                    PageLine {
                        name: format!("{} × {} (with your voucher)", named(line), line.qty),
                        qty: 1,
                        unit_amount_minor: line.paid_minor,
                    }
                }
            })
            .collect(),
        customer_name: order.customer_name.clone(),
        customer_email: order.customer_email.clone(),
        return_url: format!("{base}/checkout/return/{}", order.token),
        cancel_url: format!("{base}/checkout/cancel/{}", order.token),
        pay_url: format!("{base}/pay/{}", order.token),
        lifetime: std::time::Duration::from_secs(desk.session_minutes.unsigned_abs() * 60),
        method,
    };
    provider.open_page(&request).await
}

/// A second submit of a checkout form may arrive while the first is still
/// talking to the provider: wait (a few seconds at most) for the first to
/// record its payment page, so both submits end up in the same place.
async fn await_provider_page(pool: &PgPool, mut order: Order) -> sqlx::Result<Order> {
    for _ in 0..40 {
        if order.state != OrderState::Pending || order.provider_url.is_some() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
        let id = order.id;
        match retry("order_read", Bound::Shopper, || {
            super::order_by_id(pool, id)
        })
        .await?
        {
            Some(fresh) => order = fresh,
            None => break,
        }
    }
    Ok(order)
}

/// An order's units back, tried again while the database is away (a
/// release run twice finds the order released and changes nothing).
async fn release(pool: &PgPool, order_id: uuid::Uuid, why: Release<'_>) -> Result<()> {
    retry("checkout_release", Bound::Shopper, || {
        super::release_order(pool, order_id, why)
    })
    .await?;
    Ok(())
}
