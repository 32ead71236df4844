//! A shopper's basket, identified by a random cookie. A basket line
//! reserves nothing: holding happens at checkout start.

use sqlx::PgPool;

use crate::catalogue::{Choice, ProductKind};

/// A basket line with what the basket page shows.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct BasketLine {
    pub product_id: String,
    pub name: String,
    pub qty: i32,
    pub price_minor: i64,
    pub currency: String,
    /// The code that let a hidden product in.
    #[sqlx(default)]
    pub unlocked_by: Option<String>,
    /// When it happens, for a kind whose name does not say ([`lines`]
    /// reads it; a checkout's read leaves it out).
    #[sqlx(default)]
    pub starts_at: Option<chrono::DateTime<chrono::Utc>>,
    /// The seats picked on the map, by label (a seat line's; none for
    /// the best available).
    #[sqlx(default)]
    pub seats: Option<Vec<String>>,
}

/// The basket's lines as its checkout form carries them: a JSON list of
/// `[product id, quantity]`. Only ever used to refuse a checkout from
/// memory and to show the refusal; the database reads the basket itself
/// for anything else, so a made-up list only changes its sender's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FormLines(Vec<(String, i32)>);

impl FormLines {
    /// The form field for these basket lines.
    pub fn of(rows: &[BasketLine]) -> String {
        let lines: Vec<(&str, i32)> = rows
            .iter()
            .map(|r| (r.product_id.as_str(), r.qty))
            .collect();
        serde_json::to_string(&lines).expect("strings and numbers serialise")
    }

    /// `None` for anything but 1 to 100 lines of 1 to 100 units of an id
    /// of at most 200 bytes.
    pub fn parse(text: &str) -> Option<Self> {
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

    /// (product id, quantity), as the page showed them.
    pub fn lines(&self) -> &[(String, i32)] {
        &self.0
    }
}

/// What the header counts in the basket: its units (tickets, seats,
/// jars), a party at a time as one booking whatever its size.
pub async fn count(pool: &PgPool, basket: &str) -> sqlx::Result<i64> {
    sqlx::query_scalar(
        "select coalesce(sum(case when exists (select 1 from dining_times t \
                                                where t.product_id = l.product_id) \
                                  then 1 else l.qty end), 0)::int8 \
           from basket_lines l where l.basket_id = $1",
    )
    .bind(basket)
    .fetch_one(pool)
    .await
}

/// What adding to a basket came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Added {
    /// The basket now has this many of the product.
    Added { qty: i32 },
    /// More than one order may take: the basket is as it was.
    TooMany { max_per_order: i32, in_basket: i32 },
    /// No such product is for sale.
    Unknown,
    /// The product's kind does not take a choice of that shape (seats for
    /// a jar, a party for a section): nothing was added.
    NotChosenThatWay { kind: ProductKind },
}

/// Add what a shopper chose of an active product (its units, up to its
/// most units per order). `add`
/// names this add, made once per request: run again after its commit's
/// answer was lost, it finds itself on the line and adds nothing more.
///
/// A hidden product goes in only with `code`, a voucher valid now (by the
/// database's clock) that unlocks it; the line remembers the code.
///
/// Seats chosen (named, or the best so many) replace the section's line
/// rather than add to it: a shopper picks a section's seats as a whole.
/// Units added to a seat line make it the best seats together.
pub async fn add(
    pool: &PgPool,
    basket: &str,
    product: &str,
    choice: &Choice,
    add: uuid::Uuid,
    code: Option<&str>,
) -> sqlx::Result<Added> {
    let qty = choice.qty().get();
    let (labels, best) = seat_columns(choice);
    // the kinds that take this choice: a product of another kind is not
    // added, and says why
    let takes: Vec<&str> = ProductKind::ALL
        .into_iter()
        .filter(|kind| kind.choice().takes_in_basket(choice))
        .map(ProductKind::as_str)
        .collect();
    let (max, in_basket, added, again, kind): (
        Option<i32>,
        Option<i32>,
        Option<i32>,
        bool,
        Option<ProductKind>,
    ) = sqlx::query_as(
        "with p as (select id, max_per_order, kind, \
                               case when hidden then $5 end as unlocked_by \
                          from products \
                         where id = $2 and active \
                           and (not hidden or exists ( \
                                select 1 from vouchers v \
                                 where v.code = $5 and products.id = any (v.unlocks) \
                                   and v.archived_at is null \
                                   and (v.valid_from is null or v.valid_from <= now()) \
                                   and (v.valid_until is null or now() < v.valid_until)))), \
                  had as (select qty, last_add from basket_lines \
                           where basket_id = $1 and product_id = $2), \
                  put as (insert into basket_lines (basket_id, product_id, qty, last_add, \
                                                    unlocked_by, seat_labels, seat_best) \
                          select $1, p.id, $3, $4, p.unlocked_by, $6, $7 from p \
                           where $3 <= p.max_per_order and p.kind = any ($9) \
                             and not exists (select 1 from had where had.last_add = $4) \
                          on conflict (basket_id, product_id) \
                          do update set qty = basket_lines.qty * (not $8)::int + excluded.qty, \
                                        last_add = excluded.last_add, \
                                        unlocked_by = coalesce(excluded.unlocked_by, \
                                                               basket_lines.unlocked_by), \
                                        seat_labels = excluded.seat_labels, \
                                        seat_best = excluded.seat_best \
                           where basket_lines.qty * (not $8)::int + excluded.qty \
                                 <= (select max_per_order from products \
                                      where id = excluded.product_id) \
                          returning qty) \
             select (select max_per_order from p), (select qty from had), (select qty from put), \
                    exists (select 1 from had where had.last_add = $4), (select kind from p)",
    )
    .bind(basket)
    .bind(product)
    .bind(qty)
    .bind(add)
    .bind(code)
    .bind(labels.as_deref())
    .bind(best)
    .bind(matches!(choice, Choice::Seats { .. }))
    .bind(&takes)
    .fetch_one(pool)
    .await?;
    if again && max.is_some() {
        return Ok(Added::Added {
            qty: in_basket.unwrap_or(qty),
        });
    }
    if let Some(kind) = kind.filter(|kind| !takes.contains(&kind.as_str())) {
        return Ok(Added::NotChosenThatWay { kind });
    }
    Ok(match (max, added) {
        (None, _) => Added::Unknown,
        (Some(_), Some(qty)) => Added::Added { qty },
        (Some(max_per_order), None) => Added::TooMany {
            max_per_order,
            in_basket: in_basket.unwrap_or(0),
        },
    })
}

/// How a basket line keeps a seat choice: the labels named, or whether the
/// best must be together (`together` / `split`); neither for units.
fn seat_columns(choice: &Choice) -> (Option<Vec<String>>, Option<&'static str>) {
    let Choice::Seats { pick } = choice else {
        return (None, None);
    };
    match pick.labels() {
        Some(labels) => (Some(labels.into_iter().map(str::to_owned).collect()), None),
        None if pick.together() => (None, Some("together")),
        None => (None, Some("split")),
    }
}

/// Change how many of a product the basket has: 0 takes it out; more
/// than one order may take leaves the line as it was.
pub async fn set_qty(pool: &PgPool, basket: &str, product: &str, qty: i32) -> sqlx::Result<Added> {
    if qty <= 0 {
        remove(pool, basket, &[product.to_owned()]).await?;
        return Ok(Added::Added { qty: 0 });
    }
    #[derive(sqlx::FromRow)]
    struct Row {
        max_per_order: Option<i32>,
        had: Option<i32>,
        put: Option<i32>,
    }
    let row: Row = sqlx::query_as(
        "with p as (select id, max_per_order from products where id = $2), \
              put as (update basket_lines b set qty = $3, \
                             seat_labels = case when cardinality(b.seat_labels) = $3 \
                                                then b.seat_labels end \
                        from p \
                       where b.basket_id = $1 and b.product_id = p.id \
                         and $3 <= p.max_per_order \
                      returning b.qty) \
         select (select max_per_order from p) as max_per_order, \
                (select qty from basket_lines where basket_id = $1 and product_id = $2) as had, \
                (select qty from put) as put",
    )
    .bind(basket)
    .bind(product)
    .bind(qty.min(100))
    .fetch_one(pool)
    .await?;
    Ok(match row {
        Row {
            max_per_order: None,
            ..
        }
        | Row { had: None, .. } => Added::Unknown,
        Row { put: Some(qty), .. } => Added::Added { qty },
        Row {
            max_per_order: Some(max_per_order),
            had: Some(in_basket),
            put: None,
        } => Added::TooMany {
            max_per_order,
            in_basket,
        },
    })
}

/// Put a left checkout's lines back into the basket (a line already
/// there keeps the larger quantity): leaving checkout gives the basket
/// back, not an empty one.
pub async fn restore(pool: &PgPool, basket: &str, order: uuid::Uuid) -> sqlx::Result<()> {
    sqlx::query(
        "insert into basket_lines (basket_id, product_id, qty, unlocked_by) \
         select $1, l.product_id, least(l.qty, 100), \
                case when p.hidden then o.voucher_code end \
           from order_lines l join orders o on o.id = l.order_id \
           join products p on p.id = l.product_id \
          where l.order_id = $2 and p.active \
         on conflict (basket_id, product_id) \
         do update set qty = greatest(basket_lines.qty, excluded.qty), \
                       seat_labels = case when cardinality(basket_lines.seat_labels) \
                                               = greatest(basket_lines.qty, excluded.qty) \
                                          then basket_lines.seat_labels end",
    )
    .bind(basket)
    .bind(order)
    .execute(pool)
    .await?;
    Ok(())
}

/// Take products out of the basket.
pub async fn remove(pool: &PgPool, basket: &str, products: &[String]) -> sqlx::Result<()> {
    sqlx::query("delete from basket_lines where basket_id = $1 and product_id = any($2)")
        .bind(basket)
        .bind(products)
        .execute(pool)
        .await?;
    Ok(())
}

/// Empty the basket (its checkout reached the provider).
pub async fn clear(pool: &PgPool, basket: &str) -> sqlx::Result<()> {
    sqlx::query("delete from basket_lines where basket_id = $1")
        .bind(basket)
        .execute(pool)
        .await?;
    Ok(())
}

/// The basket's lines, in the order they were added.
pub async fn lines(pool: &PgPool, basket: &str) -> sqlx::Result<Vec<BasketLine>> {
    #[derive(sqlx::FromRow)]
    struct Row {
        #[sqlx(flatten)]
        line: BasketLine,
        kind: crate::catalogue::ProductKind,
        collection_title: String,
    }
    // a party below its table time's deposit size pays nothing, as the
    // checkout prices it
    let rows: Vec<Row> = sqlx::query_as(
        "select b.product_id, p.name, b.qty, \
                case when b.qty < coalesce(pe.deposit_from_party, 0) then 0 \
                     else p.price_minor end as price_minor, \
                p.currency, b.unlocked_by, p.kind, b.seat_labels as seats, \
                c.title as collection_title, coalesce(p.starts_at, c.starts_at) as starts_at \
           from basket_lines b join products p on p.id = b.product_id \
           join collections c on c.id = p.collection \
           left join dining_times t on t.product_id = p.id \
           left join dining_periods pe on pe.room = t.room and pe.name = t.period \
          where b.basket_id = $1 order by b.added_at, b.product_id",
    )
    .bind(basket)
    .fetch_all(pool)
    .await?;
    // named as the order's lines will be: "Winter Jazz — General"
    Ok(rows
        .into_iter()
        .map(
            |Row {
                 mut line,
                 kind,
                 collection_title,
             }| {
                line.name = kind.line_name(&line.name, &collection_title);
                // a slot's name says when already; an event's tier does not
                line.starts_at = line.starts_at.filter(|_| kind.shows_time());
                line
            },
        )
        .collect())
}

/// A voucher applied in the basket, before paying: the code and what it
/// takes off these lines, judged by the database's clock as checkout
/// judges it (the same [`Voucher::judge`](crate::vouchers::Voucher::judge)
/// and [`take_off`](crate::vouchers::Voucher::take_off)), so the total the
/// basket shows is the total the provider is asked for. A use per buyer is
/// only known with the buyer's e-mail, at checkout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    pub code: crate::vouchers::VoucherCode,
    /// What it takes off, in all.
    pub off_minor: i64,
}

/// A voucher as typed, found and valid for a basket: its code, itself,
/// and the basket's lines as a voucher is judged against them.
#[derive(Debug, Clone)]
pub struct JudgedVoucher {
    pub code: crate::vouchers::VoucherCode,
    pub voucher: crate::vouchers::Voucher,
    pub priced: Vec<crate::vouchers::PricedLine>,
}

/// The voucher `typed` for a basket of `lines`, judged by the database's
/// clock ([`Voucher::judge`](crate::vouchers::Voucher::judge): valid now,
/// for these products, in their currency); or the code as typed and why it
/// cannot be used. What is left of its uses is the caller's to judge: the
/// basket's page counts it, checkout leaves it to the engine.
pub async fn judge_voucher(
    pool: &PgPool,
    typed: &str,
    lines: &[BasketLine],
) -> sqlx::Result<Result<JudgedVoucher, (String, crate::vouchers::Refusal)>> {
    use crate::vouchers::{PricedLine, Refusal, VoucherCode};
    let Ok(code) = VoucherCode::parse(typed) else {
        return Ok(Err((
            typed.trim().chars().take(40).collect(),
            Refusal::Unknown,
        )));
    };
    let (found, now) = crate::vouchers::find_now(pool, &code).await?;
    let Some(voucher) = found else {
        return Ok(Err((code.to_string(), Refusal::Unknown)));
    };
    let priced: Vec<PricedLine> = lines
        .iter()
        .map(|l| PricedLine {
            product_id: l.product_id.clone(),
            unit_price_minor: l.price_minor,
            qty: l.qty,
        })
        .collect();
    let currency = lines.first().map_or("", |l| l.currency.as_str());
    if let Err(refusal) = voucher.judge(now, &priced, currency) {
        return Ok(Err((code.to_string(), refusal)));
    }
    Ok(Ok(JudgedVoucher {
        code,
        voucher,
        priced,
    }))
}

/// The voucher `typed` for the basket's `lines`, or the code as typed and
/// why it cannot be used: [`judge_voucher`], and a use left now.
pub async fn apply_voucher(
    pool: &PgPool,
    typed: &str,
    lines: &[BasketLine],
) -> sqlx::Result<Result<Applied, (String, crate::vouchers::Refusal)>> {
    let judged = match judge_voucher(pool, typed, lines).await? {
        Ok(judged) => judged,
        Err(refused) => return Ok(Err(refused)),
    };
    let JudgedVoucher {
        code,
        voucher,
        priced,
    } = judged;
    if voucher.held + voucher.used >= voucher.uses {
        return Ok(Err((code.to_string(), crate::vouchers::Refusal::UsedUp)));
    }
    Ok(Ok(Applied {
        off_minor: voucher.take_off(&priced).iter().sum(),
        code,
    }))
}
