//! `POST /checkout`: the form parsed, the checkout run
//! ([`checkout::begin`]), and where it ended said to the shopper.

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use serde::Deserialize;

use super::basket::{Problem, Told, basket_page, basket_page_of};
use super::{basket_id, message, pending_note, too_fast};
use crate::catalogue;
use crate::catalogue::Sale;
use crate::checkout::{self, OrderState, ShortLine};
use crate::checkout::{BeginRequest, Begun, basket::FormLines};
use crate::inventory::IdempotencyKey;
use crate::retry::{Bound, retry};
use crate::routes::ShopError;
use crate::routes::errors::{ErrorCode, checkout_code};
use crate::routes::render::see_other;
use crate::state::Shop;

#[derive(Deserialize)]
pub struct CheckoutForm {
    checkout_key: String,
    name: String,
    email: String,
    /// A booking's guest's phone.
    #[serde(default)]
    phone: Option<String>,
    /// `stripe` or `razorpay`; the shop's default when absent.
    provider: Option<String>,
    /// The way of paying the shopper chose (`card`, `sepa_debit` …): the
    /// provider the owner chose for it serves it.
    #[serde(default)]
    method: Option<String>,
    /// The basket as the page showed it ([`FormLines`]): lets a sold-out
    /// answer come from memory. Absent or unreadable, the database answers.
    lines: Option<String>,
    /// A voucher code, if the shopper has one.
    #[serde(default)]
    pub(super) voucher: Option<String>,
}

impl CheckoutForm {
    /// The form as typed, to fill the basket's form in with again.
    fn refilled(&self) -> Told {
        Told {
            phone: self.phone.clone().unwrap_or_default(),
            ..Told::refilled(&self.name, &self.email)
        }
    }
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

/// A party no table seats at its time is offered the nearest times that
/// can seat it (memory's room, `tables::around`), in the time's order:
/// "Times that can seat 4 that day: 19:00, 19:15, 19:30."
async fn offer_other_times(
    shop: &Shop,
    lines: &[ShortLine],
    problems: &mut [Problem],
) -> Result<(), ShopError> {
    // only a party has times to offer; memory says which lines are
    let ids: Vec<String> = lines.iter().map(|l| l.product_id.clone()).collect();
    let parties = crate::routes::tables::book::party_products(shop, &ids).await?;
    for (line, problem) in lines.iter().zip(problems.iter_mut()) {
        if !parties.contains(&line.product_id) {
            continue;
        }
        let party = line.requested;
        let mut offered = crate::retry::retry("dining_read", crate::retry::Bound::Shopper, || {
            crate::routes::tables::around::nearest(
                &shop.live,
                &shop.pool,
                &line.product_id,
                party,
                3,
            )
        })
        .await?;
        if offered.is_empty() {
            continue;
        }
        offered.sort_by_key(|t| t.starts_at);
        let times: Vec<String> = offered
            .iter()
            .map(|t| shop.zone().local(t.starts_at).format("%H:%M").to_string())
            .collect();
        problem.note = format!(
            "No table for {party} then. Times that can seat {party} that day: {}.",
            times.join(", ")
        );
    }
    Ok(())
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

/// `POST /checkout`: docs/contract.md §3 in order, through
/// [`checkout::begin`]. One transaction holds every line and writes the
/// pending order; then, outside any lock, the provider's page; then the
/// payment phase; then a 303 to the provider.
pub async fn start_checkout(
    shop: web::Data<Shop>,
    request: HttpRequest,
    form: web::Form<CheckoutForm>,
) -> Result<HttpResponse, ShopError> {
    let key = IdempotencyKey::parse(&form.checkout_key).map_err(|_| {
        ShopError::bad_request("the checkout form is out of date; please try again")
    })?;
    let address = shop.fairness.address(&request);
    let (provider, pay_method) = match form.method.as_deref() {
        None | Some("") => (form.provider.clone(), None),
        Some(name) => {
            let kind = way_to_pay(&shop, name).await?;
            (Some(kind.0.as_str().to_owned()), Some(kind.1))
        }
    };
    let begun = checkout::begin(
        shop.desk(),
        BeginRequest {
            checkout_key: key,
            basket_id: basket_id(&request),
            name: form.name.clone(),
            email: form.email.clone(),
            phone: form.phone.clone(),
            provider,
            pay_method,
            form_lines: form.lines.as_deref().and_then(FormLines::parse),
            address: address.clone(),
            voucher: form.voucher.clone(),
        },
    )
    .await?;
    tell(&shop, &request, &form, &address, begun).await
}

/// The provider that serves a way of paying in this shop, as its owner
/// chose (`crate::payments::methods`); a way not offered is refused.
async fn way_to_pay(
    shop: &Shop,
    name: &str,
) -> Result<
    (
        crate::payments::ProviderKind,
        crate::payments::methods::PayMethod,
    ),
    ShopError,
> {
    let not_offered =
        || ShopError::bad_request("That way of paying is not offered. Choose another one.");
    let (currency, ways) = retry("pay_methods_read", Bound::Shopper, || {
        shop.live.ways_to_pay()
    })
    .await?;
    ways.serving(&shop.payments, &currency, name)
        .ok_or_else(not_offered)
}

/// The basket as it was read, with the lines that refused its checkout.
async fn refused_lines(
    shop: &Shop,
    form: &CheckoutForm,
    status: StatusCode,
    basket: Vec<crate::checkout::basket::BasketLine>,
    problems: Vec<Problem>,
) -> Result<HttpResponse, ShopError> {
    let told = Told::problems(problems, &form.name, &form.email);
    basket_page_of(shop, basket, form.voucher.clone(), status, told).await
}

/// Where a checkout ended, said to the shopper: the provider's page, or
/// the basket (or a message) with what refused it, under the status of
/// its code in the one table.
async fn tell(
    shop: &Shop,
    request: &HttpRequest,
    form: &CheckoutForm,
    address: &str,
    begun: Begun,
) -> Result<HttpResponse, ShopError> {
    // the status of where it ended: the one table's, as the API's
    let status = checkout_code(&begun).map_or(StatusCode::OK, ErrorCode::page_status);
    let back = |headline: &str, explanation: &str| {
        message(
            status,
            headline,
            explanation,
            "/basket",
            "Back to your basket",
        )
    };
    match begun {
        // the basket was emptied with the payment phase
        Begun::Pay { url } => Ok(see_other(&url)),
        Begun::Confirmed { order } | Begun::Again { order } => Ok(see_other(&redirect_for(&order))),
        Begun::EmptyBasket => Ok(see_other("/basket")),
        Begun::UnknownProvider => Err(ShopError::bad_request(
            "That way of paying is not offered here.",
        )),
        Begun::BadCustomer { reason } | Begun::TooSlowToPay { reason } => {
            let told = Told {
                error: reason,
                ..form.refilled()
            };
            basket_page(shop, request, status, told).await
        }
        Begun::TooFast(refused) => too_fast(address, refused),
        Begun::SoldOut {
            lines,
            basket,
            sold_out,
        } => {
            let mut problems = describe_short(&lines, &sold_out, shop.zone());
            offer_other_times(shop, &lines, &mut problems).await?;
            refused_lines(shop, form, status, basket, problems).await
        }
        Begun::NoTable { lines, basket } => {
            let mut problems = describe_short(&lines, &[], shop.zone());
            offer_other_times(shop, &lines, &mut problems).await?;
            refused_lines(shop, form, status, basket, problems).await
        }
        Begun::OverLimit { lines, basket } => {
            refused_lines(
                shop,
                form,
                status,
                basket,
                describe_limited(&lines)
                    .into_iter()
                    .map(Problem::plain)
                    .collect(),
            )
            .await
        }
        Begun::Withdrawn => {
            let problems = vec![Problem::plain(
                "Some items are no longer sold and were taken out of your basket.",
            )];
            basket_page(
                shop,
                request,
                status,
                Told::problems(problems, &form.name, &form.email),
            )
            .await
        }
        Begun::NotOnSale { lines, basket } => {
            let problems = lines
                .iter()
                .map(|line| {
                    Problem::plain(match line.sale {
                        Sale::Opens { at } => {
                            format!("{}: on sale from {}", line.name, shop.zone().long(at))
                        }
                        Sale::Closed { .. } | Sale::Open => {
                            format!("{}: sales have closed", line.name)
                        }
                    })
                })
                .collect();
            refused_lines(shop, form, status, basket, problems).await
        }
        Begun::SeatsRefused { refusal, basket } => {
            // the seats taken, and the nearest together instead
            let offer = refusal.offer_words();
            let problems = vec![Problem::plain(if offer.is_empty() {
                format!("{} Nothing was reserved.", refusal.words())
            } else {
                format!("{} {offer} Nothing was reserved.", refusal.words())
            })];
            refused_lines(shop, form, status, basket, problems).await
        }
        Begun::BadVoucher {
            code,
            refusal,
            basket,
        } => {
            let told = Told {
                voucher_problem: format!(
                    "The code {code} {}. Nothing was reserved or charged.",
                    refusal.words(shop.zone())
                ),
                voucher: code,
                ..Told::refilled(&form.name, &form.email)
            };
            basket_page_of(shop, basket, None, status, told).await
        }
        Begun::Locked { ids, basket } => {
            let names: Vec<String> = basket
                .iter()
                .filter(|line| ids.contains(&line.product_id))
                .map(|line| line.name.clone())
                .collect();
            let problems = vec![Problem::plain(format!(
                "{} can be bought only with the code that unlocks it: enter it as your voucher.",
                names.join(", ")
            ))];
            refused_lines(shop, form, status, basket, problems).await
        }
        Begun::ProviderFailed => back(
            "We could not reach the payment provider",
            "Nothing was charged and your items were put back. Please try again in a moment.",
        ),
        Begun::PaymentPhaseFailed => back(
            "We could not start your payment",
            "Nothing was charged and your items were put back. Please try again in a moment.",
        ),
        Begun::RanOut => back(
            "Your reservation ran out",
            "It took too long to reach the payment page, so your items went back on sale. Nothing was charged.",
        ),
    }
}

/// Where a started order's shopper should go now: its page once it is
/// paid (an order of nothing is, at once), else the provider's.
fn redirect_for(order: &checkout::Order) -> String {
    match (&order.provider_url, order.state) {
        (Some(url), OrderState::Pending) => url.clone(),
        _ => format!("/orders/{}", order.token),
    }
}
