//! Refunding an order from its page, in two steps that need no script:
//! the form's "Review refund" answers a page that states what the units
//! chosen give back ("2 × General: €40.00 of the €120.00 left"), and only
//! its "Refund €40.00" refunds, and only that amount: when the numbers
//! were changed after the review, the review comes again. The form starts
//! from what is left to refund; with a script (`static/admin.js`) it says
//! the amount as the numbers change. A line of seats is refunded by its
//! seats, each a box to tick, so staff say which seat goes back. A mistake
//! (too many units, no reason, a seat no longer on the order) is said on
//! the review, with what was typed kept.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, web};
use askama::Template;

use super::form::refusal;
use super::notices::NoticeQuery;
use super::pages::{Nav, Plain, money, nav, parse_id, render, see_other};
use crate::routes::ShopError;
use crate::staff::Session;
use crate::staff::refunds::{self, Picked, RefundOutcome, RefundRequest};
use crate::staff::views::{self, RefundableLine, RefundableSeat};
use crate::state::Shop;

/// One line of the refund form: what is left of it and how many of its
/// units are chosen; a line of seats, which seats.
pub(super) struct RefundChoice {
    pub(super) line: RefundableLine,
    pub(super) chosen: i32,
    /// Its seats left to refund, each with whether it is chosen; empty: a
    /// line of units alike, chosen by number.
    pub(super) seats: Vec<(RefundableSeat, bool)>,
}

impl RefundChoice {
    /// What the chosen units give back (none when more than is left are
    /// chosen: the review says so).
    pub(super) fn amount_minor(&self) -> i64 {
        if (0..=self.line.left()).contains(&self.chosen) {
            crate::vouchers::refund_share(
                self.line.paid_minor,
                self.line.qty,
                self.line.refunded_qty,
                self.chosen,
            )
        } else {
            0
        }
    }

    /// The line's name; a line of seats without the seats its name lists
    /// (each is a box of its own).
    pub(super) fn title(&self) -> &str {
        match self.seats.is_empty() {
            true => &self.line.name,
            false => self
                .line
                .name
                .rsplit_once(" — ")
                .map_or(self.line.name.as_str(), |(name, _)| name),
        }
    }

    /// Whether each unit gave the same (no voucher shared over them).
    pub(super) fn at_unit_price(&self) -> bool {
        self.line.paid_minor == self.line.unit_price_minor * i64::from(self.line.qty)
    }
}

/// The refund form as a page shows it: the order's page (everything left
/// chosen) or the review (what was typed).
pub(super) struct RefundForm {
    pub(super) lines: Vec<RefundChoice>,
    pub(super) reason: String,
    pub(super) restock: bool,
    pub(super) override_redeemed: bool,
    /// The form's one-time key: a double submit is one refund.
    pub(super) key: String,
    pub(super) currency: String,
    /// What the order's units were refunded already.
    pub(super) refunded_minor: i64,
}

impl RefundForm {
    /// The order's form: every unit left chosen.
    pub(super) fn whole(
        lines: Vec<RefundableLine>,
        seats: Vec<RefundableSeat>,
        o: &views::OrderRow,
    ) -> Self {
        Self {
            lines: lines
                .into_iter()
                .filter(|l| l.left() > 0)
                .map(|line| RefundChoice {
                    chosen: line.left(),
                    seats: seats
                        .iter()
                        .filter(|seat| seat.product_id == line.product_id)
                        .map(|seat| (seat.clone(), true))
                        .collect(),
                    line,
                })
                .collect(),
            reason: String::new(),
            restock: true,
            override_redeemed: false,
            key: crate::checkout::codes::order_token(),
            currency: o.currency.clone(),
            refunded_minor: o.refunded_minor,
        }
    }

    pub(super) fn money(&self, minor: impl Plain<i64>) -> String {
        money(minor.plain(), &self.currency)
    }

    /// What the chosen units give back.
    pub(super) fn chosen_minor(&self) -> i64 {
        self.lines.iter().map(RefundChoice::amount_minor).sum()
    }

    /// What refunding every unit left gives back.
    pub(super) fn left_minor(&self) -> i64 {
        self.lines.iter().map(|c| c.line.left_minor()).sum()
    }

    /// The units chosen, in words: "2 × General, 1 × VIP", a line of
    /// seats by its seats ("Stalls: seat C-5").
    pub(super) fn chosen_words(&self) -> String {
        let words: Vec<String> = self
            .lines
            .iter()
            .filter(|c| c.chosen > 0)
            .map(|c| {
                let seats: Vec<&str> = c
                    .seats
                    .iter()
                    .filter(|(_, chosen)| *chosen)
                    .map(|(seat, _)| seat.seat.as_str())
                    .collect();
                match seats.as_slice() {
                    [] => format!("{} × {}", c.chosen, c.line.name),
                    [one] => format!("{}: seat {one}", c.title()),
                    many => format!("{}: seats {}", c.title(), many.join(", ")),
                }
            })
            .collect();
        words.join(", ")
    }

    /// The seats chosen, by item id.
    pub(super) fn chosen_seats(&self) -> Vec<i64> {
        self.lines
            .iter()
            .flat_map(|c| c.seats.iter())
            .filter(|(_, chosen)| *chosen)
            .map(|(seat, _)| seat.id)
            .collect()
    }

    /// How the page's script writes an amount: the currency's words
    /// before and after "12.34".
    pub(super) fn money_parts(&self) -> (String, String) {
        let zero = money(0, &self.currency);
        let (before, after) = zero.split_once("0.00").unwrap_or(("", ""));
        (before.to_owned(), after.to_owned())
    }
}

#[derive(Template)]
#[template(path = "admin/refund_review.html")]
struct ReviewPage {
    nav: Nav,
    o: views::OrderRow,
    refund: RefundForm,
    /// What is wrong with what was typed, said before anything is sent.
    mistakes: Vec<String>,
    /// The units changed after the review: reviewed again.
    changed: bool,
}

/// The refund form's fields, as a browser sends them.
struct Typed {
    units: Vec<(String, String)>,
    /// The seats ticked (`item:<id>`), by item id as typed.
    items: Vec<String>,
    reason: String,
    restock: bool,
    override_redeemed: bool,
    key: Option<String>,
    step: String,
    amount_minor: Option<String>,
}

fn typed(form: &[(String, String)]) -> Typed {
    let field = |name: &str| {
        form.iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.to_owned())
    };
    Typed {
        units: form
            .iter()
            .filter_map(|(n, v)| Some((n.strip_prefix("units:")?.to_owned(), v.trim().to_owned())))
            .collect(),
        items: form
            .iter()
            .filter_map(|(n, _)| Some(n.strip_prefix("item:")?.to_owned()))
            .collect(),
        reason: field("reason").unwrap_or_default(),
        restock: field("restock").is_some(),
        override_redeemed: field("override_redeemed").is_some(),
        key: field("refund_key"),
        step: field("step").unwrap_or_default(),
        amount_minor: field("amount_minor"),
    }
}

/// The form as typed, over the order's lines: the form to show again,
/// the units as asked (for the domain, which decides for itself), what is
/// wrong with the input itself, and what the order's lines refuse.
fn reviewed(
    typed: &Typed,
    lines: Vec<RefundableLine>,
    seats: Vec<RefundableSeat>,
    o: &views::OrderRow,
) -> Reviewed {
    let mut form = RefundForm::whole(lines, seats, o);
    form.reason = typed.reason.clone();
    form.restock = typed.restock;
    form.override_redeemed = typed.override_redeemed;
    if let Some(key) = &typed.key {
        form.key = key.clone();
    }
    for choice in &mut form.lines {
        choice.chosen = 0;
        for (_, chosen) in &mut choice.seats {
            *chosen = false;
        }
    }
    let mut reviewed = Reviewed {
        form,
        units: Vec::new(),
        input: Vec::new(),
        refused: Vec::new(),
    };
    for (product, value) in &typed.units {
        let line = reviewed
            .form
            .lines
            .iter_mut()
            .find(|c| c.line.product_id == *product);
        let n = if value.is_empty() {
            0
        } else if let Ok(n) = value.parse::<i32>() {
            n
        } else {
            let name = line.map_or(product.as_str(), |c| c.line.name.as_str());
            reviewed.input.push(format!(
                "{name}: units are whole numbers ({value:?} was typed)."
            ));
            continue;
        };
        reviewed.units.push((product.clone(), n));
        match line {
            None => reviewed.refused.push(
                "The order has no such line left to refund (it may have changed): look at \
                 it again."
                    .to_owned(),
            ),
            Some(c) if n > c.line.left() => reviewed.refused.push(format!(
                "{}: only {} left to refund ({n} were chosen).",
                c.line.name,
                c.line.left()
            )),
            Some(c) => c.chosen = n.max(0),
        }
    }
    for typed_id in &typed.items {
        let seat = typed_id.parse::<i64>().ok().and_then(|id| {
            reviewed
                .form
                .lines
                .iter_mut()
                .find_map(|c| c.seats.iter_mut().find(|(seat, _)| seat.id == id))
        });
        match seat {
            Some((_, chosen)) => *chosen = true,
            None => reviewed.refused.push(
                "A seat chosen is no longer on the order to refund (it may have changed): \
                 look at it again."
                    .to_owned(),
            ),
        }
    }
    for choice in &mut reviewed.form.lines {
        if !choice.seats.is_empty() {
            choice.chosen = choice.seats.iter().filter(|(_, chosen)| *chosen).count() as i32;
        }
    }
    if reviewed.form.lines.is_empty() {
        reviewed
            .refused
            .push("Everything on this order was refunded already.".to_owned());
    }
    reviewed
}

/// What [`reviewed`] finds.
struct Reviewed {
    form: RefundForm,
    units: Vec<(String, i32)>,
    /// Mistakes in the input itself: never sent.
    input: Vec<String>,
    /// What the order's lines refuse as it is now: the review says it;
    /// a refund sent is refused by the domain, recorded.
    refused: Vec<String>,
}

/// `POST /admin/orders/{id}/refund`: fields `units:<product id>` per line,
/// `reason`, the checkboxes `restock` and `override_redeemed`, `step`
/// (`review`, or `refund`, with the reviewed `amount_minor`: when the
/// units chosen give another amount, the review comes again; a post that
/// names no amount is refunded as asked).
pub async fn refund_order(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    id: web::Path<String>,
    form: web::Form<Vec<(String, String)>>,
) -> Result<HttpResponse, ShopError> {
    let id = parse_id(&id, "order")?;
    let o = views::order(&shop.pool, id)
        .await?
        .ok_or_else(|| ShopError::not_found("no such order"))?;
    let typed = typed(&form);
    let lines = views::refundable_lines(&shop.pool, id).await?;
    let seats = views::refundable_seats(&shop.pool, id).await?;
    let Reviewed {
        form: refund,
        units,
        mut input,
        refused,
    } = reviewed(&typed, lines, seats, &o);
    let picked = Picked {
        items: refund.chosen_seats(),
        cancels: false,
    };
    // seats chosen: the lines of units say only what they add
    let units = if picked.items.is_empty() {
        units
    } else {
        units.into_iter().filter(|(_, n)| *n != 0).collect()
    };
    let request = RefundRequest {
        order_id: id,
        units,
        reason: typed.reason.clone(),
        restock: typed.restock,
        override_redeemed: typed.override_redeemed,
        by: session.staff.email.clone(),
        staff: Some(session.staff.clone()),
        key: typed.key.clone(),
    };
    if input.is_empty() {
        if request.units.iter().all(|(_, n)| *n == 0) && picked.items.is_empty() {
            input.push("Choose at least one unit to refund.".to_owned());
        } else if let Err(message) = refunds::check(&request) {
            input.push(refusal(&message).replace(" Nothing was changed.", ""));
        }
    }
    let mut changed = false;
    let (mistakes, status) = if typed.step == "refund" && input.is_empty() {
        // the amount reviewed must be the amount the numbers give now
        let as_reviewed = match typed.amount_minor.as_deref() {
            None => true,
            Some(stated) => stated.parse::<i64>().ok() == Some(refund.chosen_minor()),
        };
        if as_reviewed {
            return refund_now(&shop, &request, &picked).await;
        }
        changed = true;
        (refused, StatusCode::CONFLICT)
    } else {
        let mut mistakes = input;
        mistakes.extend(refused);
        let status = if mistakes.is_empty() {
            StatusCode::OK
        } else {
            StatusCode::BAD_REQUEST
        };
        (mistakes, status)
    };
    let page = ReviewPage {
        nav: nav(&shop, &session, &NoticeQuery::default()).await?,
        o,
        refund,
        mistakes,
        changed,
    };
    render(status, &page)
}

/// Send the refund; the order's page says what came of it.
async fn refund_now(
    shop: &Shop,
    request: &RefundRequest,
    picked: &Picked,
) -> Result<HttpResponse, ShopError> {
    let notice = match refunds::refund_picked(&shop.pool, request, None, picked).await? {
        RefundOutcome::Queued { whole: true, .. } => "staff_refund_whole",
        RefundOutcome::Queued { .. } => "staff_refund_queued",
        RefundOutcome::NotPaid { .. } => "refund_not_paid",
        RefundOutcome::NothingLeft => "refund_nothing_left",
        RefundOutcome::TooMany { .. } => "refund_too_many",
        RefundOutcome::NotInOrder { .. } => "refund_not_in_order",
        RefundOutcome::Redeemed { .. } => "refund_redeemed",
        RefundOutcome::NotFound => return Err(ShopError::not_found("no such order")),
    };
    Ok(see_other(&format!(
        "/admin/orders/{}?notice={notice}",
        request.order_id
    )))
}
