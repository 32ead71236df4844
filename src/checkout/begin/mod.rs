//! The checkout as the shop runs it, from a submitted form to the
//! provider's payment page: docs/contract.md §3 in order. A form the shop's
//! memory can refuse is refused without the database; otherwise one read
//! finds a form submitted before, or the basket with its prices and what is
//! left; then one transaction holds every line and writes the pending
//! order; then, outside any lock, the provider's page; then the payment
//! phase. A failure after the hold gives the units back at once.
//!
//! The shop's form handler parses and renders around [`begin`]; the JSON
//! API calls the same function, so both sell by the same rules. [`begin`]
//! reads as those steps; each concern is a file beside this one: what a
//! checkout starts from ([`request`]) and where it ends ([`begun`]), the
//! memory's refusal ([`memory`]), a form submitted again ([`replay`]), who
//! takes the money ([`provider`]), who buys and a party's phone
//! ([`phone`]), the voucher typed ([`voucher`]), what the engine refused
//! ([`refused`]), and the way to pay ([`pay`], [`page`]).

mod begun;
mod memory;
mod page;
mod pay;
mod phone;
mod provider;
mod refused;
mod replay;
mod request;
mod voucher;

pub use begun::Begun;
pub use memory::api_lines_refused;
pub use page::open_page;
pub use request::{BeginRequest, Desk};

use super::{
    CheckoutRead, CheckoutStart, Result, StartLimits, StartOutcome, WantedLine, codes,
    order_by_checkout_key, read_checkout,
};
use crate::inventory::{AccountId, InvalidInput};
use crate::limits::TooFast;
use crate::retry::{Bound, retry};

/// Run one checkout.
pub async fn begin(desk: Desk<'_>, request: BeginRequest) -> Result<Begun> {
    // the sold-out crowd is answered from memory and writes nothing
    if request.basket_id.is_some()
        && let Some(refused) = memory::refused_from_memory(desk, &request)
    {
        return Ok(refused);
    }
    // every change committed before this moment is in the reads below
    let read_at = chrono::Utc::now();
    let (read, taken) = read_and_take(desk, &request).await?;
    // a double submit goes where the first one went, once it knows
    if let Some(again) = replay::again(desk.pool, read.existing).await? {
        return Ok(again);
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
        } => pay::pay(desk, order, &lines, resource, basket_id, request.pay_method).await,
        refused => refused::not_started(desk, &request, read_at, &read, &start, refused).await,
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
            Some(basket) => read_checkout(desk.pool, key, basket).await?,
            None => CheckoutRead {
                existing: order_by_checkout_key(desk.pool, key)
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
    let Some(provider) = provider::chosen(desk, request) else {
        return Ok(Err(Begun::UnknownProvider));
    };
    let customer = match phone::customer(request, read) {
        Ok(customer) => customer,
        Err(reason) => return Ok(Err(Begun::BadCustomer { reason })),
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
    // a bank debit whose money may come after the first item starts
    if let Some(method) = request.pay_method.filter(|m| m.settles_later()) {
        let terms = retry("pay_methods_read", Bound::Shopper, || {
            desk.live.settle_terms()
        })
        .await?;
        let starts = read.lines.iter().filter_map(|l| l.starts_at).min();
        if let Some(slow) = terms.too_slow(provider, method, starts, chrono::Utc::now()) {
            return Ok(Err(Begun::TooSlowToPay {
                reason: slow.words(),
            }));
        }
    }
    let voucher = match voucher::typed(desk, request, read, &customer).await? {
        Ok(voucher) => voucher,
        Err(refused) => return Ok(Err(refused)),
    };
    let lines = wanted(read)?;
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

/// The basket's lines as the shopper chose them: each row read as its
/// kind reads a line's fields.
fn wanted(read: &CheckoutRead) -> std::result::Result<Vec<WantedLine>, InvalidInput> {
    read.lines
        .iter()
        .map(|line| {
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
        .collect()
}
