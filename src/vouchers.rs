//! Vouchers: a code with a discount (a percentage, or an amount off the
//! order or off each unit), limited to some products, valid from and until
//! a moment, with a limited number of uses and optionally one use per buyer;
//! or an access code that unlocks products hidden from the catalogue, with
//! or without a discount.
//!
//! **A voucher's uses are capacity in the hold engine.** Its resource,
//! `voucher:<code>`, has as many units as the voucher has uses; a use is one
//! unit of it, held with the order's units in the same all-or-nothing basket
//! hold at checkout start, confirmed with the payment, and given back when
//! the order's holds expire or are released, and when the order is refunded
//! whole. Two shoppers never both take the last use, and an abandoned basket
//! never keeps one. One use per buyer is a resource of one unit per buyer
//! (`voucher:<code>:buyer:<digest of the normalised e-mail>`), held the same
//! way.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use sqlx::{PgConnection, PgExecutor, PgPool};

use crate::inventory::{Capacity, InvalidInput, ResourceId, UpsertOutcome};

/// A voucher's code as shoppers type it: trimmed and upper-cased, 3 to 40
/// letters, digits and hyphens.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(transparent)]
pub struct VoucherCode(String);

impl VoucherCode {
    pub fn parse(typed: &str) -> Result<Self, InvalidInput> {
        let code = typed.trim().to_ascii_uppercase();
        let ok = (3..=40).contains(&code.len())
            && code
                .bytes()
                .next()
                .is_some_and(|b| b.is_ascii_alphanumeric())
            && code
                .bytes()
                .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'-');
        if ok {
            Ok(Self(code))
        } else {
            Err(InvalidInput(format!(
                "{:?} is not a voucher code (3 to 40 letters, digits and hyphens)",
                typed.chars().take(60).collect::<String>()
            )))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The resource whose units are the voucher's uses.
    pub fn resource(&self) -> ResourceId {
        ResourceId::parse(&format!("voucher:{}", self.0)).expect("a code makes a resource id")
    }

    /// The resource of one buyer's one use (normalised e-mail, see
    /// [`crate::limits::email_key`]): a digest, so no address is kept in an
    /// id.
    pub fn buyer_resource(&self, email_key: &str) -> ResourceId {
        let digest = hex::encode(&Sha256::digest(email_key.as_bytes())[..8]);
        ResourceId::parse(&format!("voucher:{}:buyer:{digest}", self.0))
            .expect("a code and a digest make a resource id")
    }
}

impl std::fmt::Display for VoucherCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// What a voucher takes off.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "discount", rename_all = "snake_case")]
pub enum Discount {
    /// Nothing: an access code.
    None,
    /// This percentage of each eligible line.
    Percent { percent: i32 },
    /// This amount off the eligible lines of the order.
    PerOrder { minor: i64 },
    /// This amount off each eligible unit (never below zero).
    PerUnit { minor: i64 },
}

/// A voucher as it is stored, with its uses as the engine counts them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Voucher {
    pub code: VoucherCode,
    pub discount: Discount,
    /// The currency of an amount off.
    pub currency: Option<String>,
    /// The products it applies to; `None`: every product.
    pub products: Option<Vec<String>>,
    /// Hidden products it unlocks.
    pub unlocks: Vec<String>,
    pub valid_from: Option<DateTime<Utc>>,
    pub valid_until: Option<DateTime<Utc>>,
    pub per_buyer: bool,
    /// Uses in all, held now, and used (sold with a paid order).
    pub uses: i32,
    pub held: i32,
    pub used: i32,
    pub archived: bool,
    pub created_by: String,
    pub created_at: DateTime<Utc>,
}

#[derive(sqlx::FromRow)]
struct Row {
    code: String,
    percent_off: Option<i32>,
    amount_off_minor: Option<i64>,
    per_unit: bool,
    currency: Option<String>,
    products: Option<Vec<String>>,
    unlocks: Vec<String>,
    valid_from: Option<DateTime<Utc>>,
    valid_until: Option<DateTime<Utc>>,
    per_buyer: bool,
    uses: i32,
    held: i32,
    used: i32,
    archived: bool,
    created_by: String,
    created_at: DateTime<Utc>,
}

const COLUMNS: &str = "v.code, v.percent_off, v.amount_off_minor, v.per_unit, v.currency, \
     v.products, v.unlocks, v.valid_from, v.valid_until, v.per_buyer, r.total as uses, \
     r.held, r.sold as used, v.archived_at is not null as archived, v.created_by, v.created_at";

impl From<Row> for Voucher {
    fn from(row: Row) -> Self {
        let discount = match (row.percent_off, row.amount_off_minor, row.per_unit) {
            (Some(percent), _, _) => Discount::Percent { percent },
            (None, Some(minor), false) => Discount::PerOrder { minor },
            (None, Some(minor), true) => Discount::PerUnit { minor },
            (None, None, _) => Discount::None,
        };
        Self {
            code: VoucherCode(row.code),
            discount,
            currency: row.currency,
            products: row.products,
            unlocks: row.unlocks,
            valid_from: row.valid_from,
            valid_until: row.valid_until,
            per_buyer: row.per_buyer,
            uses: row.uses,
            held: row.held,
            used: row.used,
            archived: row.archived,
            created_by: row.created_by,
            created_at: row.created_at,
        }
    }
}

/// A voucher to create.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct NewVoucher {
    pub code: String,
    #[serde(default)]
    pub percent_off: Option<i32>,
    #[serde(default)]
    pub amount_off_minor: Option<i64>,
    #[serde(default)]
    pub per_unit: bool,
    /// The currency of an amount off (the shop's, when not given).
    #[serde(default)]
    pub currency: Option<String>,
    pub uses: i64,
    #[serde(default)]
    pub products: Option<Vec<String>>,
    #[serde(default)]
    pub unlocks: Vec<String>,
    #[serde(default)]
    pub valid_from: Option<DateTime<Utc>>,
    #[serde(default)]
    pub valid_until: Option<DateTime<Utc>>,
    #[serde(default)]
    pub per_buyer: bool,
}

/// What creating a voucher came to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Created {
    Created {
        code: String,
    },
    /// A voucher of that code exists: nothing was changed.
    Exists {
        code: String,
    },
    /// Products it names that the shop does not have.
    UnknownProducts {
        ids: Vec<String>,
    },
}

impl NewVoucher {
    /// Everything the database would refuse, in words; the normalised code.
    pub fn check(&self) -> Result<VoucherCode, InvalidInput> {
        let code = VoucherCode::parse(&self.code)?;
        let bad = |m: &str| Err(InvalidInput(m.to_owned()));
        if self.percent_off.is_some() && self.amount_off_minor.is_some() {
            return bad("a voucher takes off a percentage or an amount, not both");
        }
        if let Some(percent) = self.percent_off
            && !(1..=100).contains(&percent)
        {
            return bad("a percentage off is 1 to 100");
        }
        if self.amount_off_minor.is_some_and(|a| a <= 0) {
            return bad("an amount off is more than zero");
        }
        if self.per_unit && self.amount_off_minor.is_none() {
            return bad("only an amount can be taken off each unit");
        }
        if self.percent_off.is_none() && self.amount_off_minor.is_none() && self.unlocks.is_empty()
        {
            return bad(
                "a voucher takes something off, unlocks a hidden product, or both: give \
                 --percent, --amount-off or --unlocks",
            );
        }
        if !(1..=1_000_000).contains(&self.uses) {
            return bad("a voucher has 1 to 1,000,000 uses");
        }
        if let (Some(from), Some(until)) = (self.valid_from, self.valid_until)
            && from >= until
        {
            return bad("a voucher is valid from a moment before it is valid until");
        }
        Ok(code)
    }
}

/// Create a voucher and the resource of its uses, in one transaction.
pub async fn create(
    pool: &PgPool,
    voucher: &NewVoucher,
    shop_currency: &str,
    by: &str,
) -> anyhow::Result<Created> {
    let mut tx = pool.begin().await?;
    let created = create_in(&mut tx, voucher, shop_currency, by).await?;
    if let Created::Created { .. } = created {
        tx.commit().await?;
    }
    Ok(created)
}

/// [`create`], in the caller's transaction (which the caller rolls back
/// unless it was [`Created::Created`]).
pub async fn create_in(
    conn: &mut PgConnection,
    voucher: &NewVoucher,
    shop_currency: &str,
    by: &str,
) -> anyhow::Result<Created> {
    let code = voucher.check()?;
    let named: Vec<String> = voucher
        .products
        .iter()
        .flatten()
        .chain(&voucher.unlocks)
        .cloned()
        .collect();
    let known: Vec<String> = sqlx::query_scalar("select id from products where id = any($1)")
        .bind(&named)
        .fetch_all(&mut *conn)
        .await?;
    let unknown: Vec<String> = named.into_iter().filter(|id| !known.contains(id)).collect();
    if !unknown.is_empty() {
        return Ok(Created::UnknownProducts { ids: unknown });
    }
    let exists: bool = sqlx::query_scalar("select exists (select 1 from vouchers where code = $1)")
        .bind(code.as_str())
        .fetch_one(&mut *conn)
        .await?;
    if exists {
        return Ok(Created::Exists {
            code: code.to_string(),
        });
    }
    let uses = Capacity::parse(voucher.uses)?;
    if let UpsertOutcome::CapacityBelowCommitted { .. } =
        crate::inventory::upsert_resource(&mut *conn, &code.resource(), uses).await?
    {
        anyhow::bail!("the uses of {code} are held or used already");
    }
    let currency = voucher.amount_off_minor.map(|_| {
        voucher
            .currency
            .clone()
            .unwrap_or_else(|| shop_currency.to_owned())
    });
    // a voucher of that code made at the same moment (after the look
    // above) wins; this one is then `Exists`, and its caller rolls back
    let inserted = sqlx::query(
        "insert into vouchers (code, resource_id, percent_off, amount_off_minor, per_unit, \
                               currency, products, unlocks, valid_from, valid_until, per_buyer, \
                               created_by) \
         values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) \
         on conflict (code) do nothing",
    )
    .bind(code.as_str())
    .bind(code.resource().as_str())
    .bind(voucher.percent_off)
    .bind(voucher.amount_off_minor)
    .bind(voucher.per_unit)
    .bind(currency)
    .bind(&voucher.products)
    .bind(&voucher.unlocks)
    .bind(voucher.valid_from)
    .bind(voucher.valid_until)
    .bind(voucher.per_buyer)
    .bind(by)
    .execute(&mut *conn)
    .await?;
    if inserted.rows_affected() == 0 {
        return Ok(Created::Exists {
            code: code.to_string(),
        });
    }
    Ok(Created::Created {
        code: code.to_string(),
    })
}

/// Every voucher, newest first.
pub async fn list(pool: &PgPool) -> sqlx::Result<Vec<Voucher>> {
    let rows: Vec<Row> = sqlx::query_as(&format!(
        "select {COLUMNS} from vouchers v join resources r on r.id = v.resource_id \
          order by v.created_at desc, v.code"
    ))
    .fetch_all(pool)
    .await?;
    Ok(rows.into_iter().map(Voucher::from).collect())
}

/// One voucher by its code.
pub async fn find<'e>(
    executor: impl PgExecutor<'e>,
    code: &VoucherCode,
) -> sqlx::Result<Option<Voucher>> {
    let row: Option<Row> = sqlx::query_as(&format!(
        "select {COLUMNS} from vouchers v join resources r on r.id = v.resource_id \
          where v.code = $1"
    ))
    .bind(code.as_str())
    .fetch_optional(executor)
    .await?;
    Ok(row.map(Voucher::from))
}

/// One voucher by its code, and the database's clock at the read (a
/// voucher is judged by it, the same for every process).
pub async fn find_now(
    pool: &PgPool,
    code: &VoucherCode,
) -> sqlx::Result<(Option<Voucher>, DateTime<Utc>)> {
    let now: DateTime<Utc> = sqlx::query_scalar("select now()").fetch_one(pool).await?;
    Ok((find(pool, code).await?, now))
}

/// Make sure a buyer's one use exists (a resource of one unit), outside
/// any checkout's transaction, so that the checkout only holds it.
pub async fn ensure_buyer_use(pool: &PgPool, resource: &ResourceId) -> anyhow::Result<()> {
    crate::inventory::upsert_resource(pool, resource, Capacity::parse(1)?).await?;
    Ok(())
}

/// Stop a voucher: no checkout may start with it again; uses held run
/// their course. False when there was no such voucher in use.
pub async fn archive(pool: &PgPool, code: &VoucherCode) -> sqlx::Result<bool> {
    archive_in(pool, code).await
}

/// [`archive`], on any connection (the caller's transaction).
pub async fn archive_in<'e>(
    executor: impl PgExecutor<'e>,
    code: &VoucherCode,
) -> sqlx::Result<bool> {
    let done = sqlx::query(
        "update vouchers set archived_at = now() where code = $1 and archived_at is null",
    )
    .bind(code.as_str())
    .execute(executor)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Bring an archived voucher back: checkouts may start with it again, its
/// uses as they were. False when there was no such archived voucher.
pub async fn restore_in<'e>(
    executor: impl PgExecutor<'e>,
    code: &VoucherCode,
) -> sqlx::Result<bool> {
    let done = sqlx::query(
        "update vouchers set archived_at = null where code = $1 and archived_at is not null",
    )
    .bind(code.as_str())
    .execute(executor)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Why a code cannot be used for a basket now (the shopper is told which).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "refused", rename_all = "snake_case")]
pub enum Refusal {
    /// No voucher has that code.
    Unknown,
    /// Not valid yet: from then.
    NotYet { from: DateTime<Utc> },
    /// No longer valid: it ended then (or was withdrawn).
    Expired { until: Option<DateTime<Utc>> },
    /// Every use is taken (held by shoppers paying, or used).
    UsedUp,
    /// This buyer used it already.
    UsedByYou,
    /// None of the basket's products is one it is for.
    NotForThese,
    /// An amount off in another currency than the basket's.
    OtherCurrency,
}

/// A basket line as a voucher is judged against it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PricedLine {
    pub product_id: String,
    pub unit_price_minor: i64,
    pub qty: i32,
}

impl Voucher {
    /// Whether it applies to a product (for a discount).
    pub fn covers(&self, product_id: &str) -> bool {
        self.products
            .as_ref()
            .is_none_or(|ids| ids.iter().any(|id| id == product_id))
    }

    /// Whether it is valid at `now` (the database's clock) for a basket of
    /// `lines` in `currency`; the use itself is the engine's to grant.
    pub fn judge(
        &self,
        now: DateTime<Utc>,
        lines: &[PricedLine],
        currency: &str,
    ) -> Result<(), Refusal> {
        if self.archived {
            return Err(Refusal::Expired { until: None });
        }
        if let Some(from) = self.valid_from
            && now < from
        {
            return Err(Refusal::NotYet { from });
        }
        if let Some(until) = self.valid_until
            && now >= until
        {
            return Err(Refusal::Expired { until: Some(until) });
        }
        let unlocking = lines.iter().any(|l| self.unlocks.contains(&l.product_id));
        if self.discount != Discount::None
            && !unlocking
            && !lines.iter().any(|l| self.covers(&l.product_id))
        {
            return Err(Refusal::NotForThese);
        }
        if self.discount == Discount::None && !unlocking {
            return Err(Refusal::NotForThese);
        }
        if self
            .currency
            .as_deref()
            .is_some_and(|c| c != currency && self.discount != Discount::None)
        {
            return Err(Refusal::OtherCurrency);
        }
        Ok(())
    }

    /// What it takes off each line (in the lines' order): never more than
    /// a line costs, rounded so the shop gives no more than it says.
    pub fn take_off(&self, lines: &[PricedLine]) -> Vec<i64> {
        let total = |l: &PricedLine| l.unit_price_minor * i64::from(l.qty);
        match self.discount {
            Discount::None => vec![0; lines.len()],
            Discount::Percent { percent } => lines
                .iter()
                .map(|l| {
                    if self.covers(&l.product_id) {
                        total(l) * i64::from(percent) / 100
                    } else {
                        0
                    }
                })
                .collect(),
            Discount::PerUnit { minor } => lines
                .iter()
                .map(|l| {
                    if self.covers(&l.product_id) {
                        minor.min(l.unit_price_minor) * i64::from(l.qty)
                    } else {
                        0
                    }
                })
                .collect(),
            Discount::PerOrder { minor } => {
                let eligible: i64 = lines
                    .iter()
                    .filter(|l| self.covers(&l.product_id))
                    .map(total)
                    .sum();
                let off = minor.min(eligible);
                if eligible == 0 {
                    return vec![0; lines.len()];
                }
                // shared in proportion to each line's cost; what rounding
                // leaves goes to the last eligible line
                let mut shares: Vec<i64> = lines
                    .iter()
                    .map(|l| {
                        if self.covers(&l.product_id) {
                            off * total(l) / eligible
                        } else {
                            0
                        }
                    })
                    .collect();
                let given: i64 = shares.iter().sum();
                if let Some(last) = lines.iter().rposition(|l| self.covers(&l.product_id)) {
                    shares[last] += off - given;
                }
                shares
            }
        }
    }
}

/// What `units` of a line whose `qty` units were paid `paid` in all give
/// back, when `before` of them were refunded already: shares that add up to
/// what was paid, never more.
pub fn refund_share(paid: i64, qty: i32, before: i32, units: i32) -> i64 {
    let qty = i64::from(qty.max(1));
    let upto = |n: i32| paid * i64::from(n).min(qty) / qty;
    upto(before + units) - upto(before)
}

impl Refusal {
    /// What the shopper is told, after the code.
    pub fn words(&self, zone: crate::clock::ShopZone) -> String {
        match self {
            Refusal::Unknown => "is not a code of ours".into(),
            Refusal::NotYet { from } => format!("is valid from {}", zone.long(*from)),
            Refusal::Expired { until: Some(until) } => {
                format!("expired on {}", zone.long(*until))
            }
            Refusal::Expired { until: None } => "is no longer valid".into(),
            Refusal::UsedUp => "has been used as often as it may be".into(),
            Refusal::UsedByYou => "was used already with your e-mail address".into(),
            Refusal::NotForThese => "is not for the items in your basket".into(),
            Refusal::OtherCurrency => "is for another currency".into(),
        }
    }
}

/// What an order's voucher took off, as the order page and the mail say
/// it; empty when nothing was.
pub fn discount_words(voucher: Option<&str>, discount_minor: i64, currency: &str) -> String {
    match voucher {
        Some(code) if discount_minor > 0 => format!(
            "Voucher {code}: {} off",
            crate::money::format(discount_minor, currency)
        ),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn voucher(discount: Discount, products: Option<Vec<&str>>) -> Voucher {
        Voucher {
            code: VoucherCode::parse("FANS-10").unwrap(),
            discount,
            currency: Some("eur".into()),
            products: products.map(|p| p.into_iter().map(str::to_owned).collect()),
            unlocks: Vec::new(),
            valid_from: None,
            valid_until: None,
            per_buyer: false,
            uses: 10,
            held: 0,
            used: 0,
            archived: false,
            created_by: "test".into(),
            created_at: Utc::now(),
        }
    }

    fn line(product: &str, price: i64, qty: i32) -> PricedLine {
        PricedLine {
            product_id: product.into(),
            unit_price_minor: price,
            qty,
        }
    }

    #[test]
    fn codes_read_as_typed_and_make_their_resources() {
        let code = VoucherCode::parse("  fans-10 ").unwrap();
        assert_eq!(code.as_str(), "FANS-10");
        assert_eq!(code.resource().as_str(), "voucher:FANS-10");
        let a = code.buyer_resource("ada@example.com");
        assert!(a.as_str().starts_with("voucher:FANS-10:buyer:"));
        assert_ne!(a, code.buyer_resource("bo@example.com"));
        assert!(!a.as_str().contains("ada"));
        for bad in ["", "ab", "has space", "-lead", "é-code", &"X".repeat(41)] {
            assert!(VoucherCode::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn discounts_never_take_more_than_a_line_costs_and_add_up() {
        let lines = [line("a", 3500, 2), line("b", 1000, 1), line("c", 999, 3)];
        let ten = voucher(Discount::Percent { percent: 10 }, None);
        assert_eq!(ten.take_off(&lines), [700, 100, 299]);
        let only_a = voucher(Discount::Percent { percent: 10 }, Some(vec!["a"]));
        assert_eq!(only_a.take_off(&lines), [700, 0, 0]);
        let per_unit = voucher(Discount::PerUnit { minor: 1200 }, None);
        assert_eq!(per_unit.take_off(&lines), [2400, 1000, 2997]);
        let per_order = voucher(Discount::PerOrder { minor: 1001 }, None);
        let shares = per_order.take_off(&lines);
        assert_eq!(shares.iter().sum::<i64>(), 1001);
        assert!(
            shares
                .iter()
                .zip(&lines)
                .all(|(s, l)| *s <= l.unit_price_minor * i64::from(l.qty))
        );
        let more_than_all = voucher(Discount::PerOrder { minor: 1_000_000 }, Some(vec!["b"]));
        assert_eq!(more_than_all.take_off(&lines), [0, 1000, 0]);
    }

    #[test]
    fn refund_shares_add_up_to_what_was_paid() {
        // 3 units paid 1000 together: 333, 333, 334 in any grouping
        let one_by_one: Vec<i64> = (0..3).map(|i| refund_share(1000, 3, i, 1)).collect();
        assert_eq!(one_by_one.iter().sum::<i64>(), 1000);
        assert!(one_by_one.iter().all(|s| *s <= 334));
        assert_eq!(
            refund_share(1000, 3, 0, 2) + refund_share(1000, 3, 2, 1),
            1000
        );
        assert_eq!(refund_share(1000, 3, 3, 1), 0, "nothing beyond the line");
    }

    #[test]
    fn a_voucher_is_judged_by_the_moment_the_products_and_the_currency() {
        let now = Utc::now();
        let lines = [line("a", 100, 1)];
        let mut v = voucher(Discount::Percent { percent: 10 }, Some(vec!["a"]));
        assert_eq!(v.judge(now, &lines, "eur"), Ok(()));
        assert_eq!(
            v.judge(now, &[line("b", 100, 1)], "eur"),
            Err(Refusal::NotForThese)
        );
        v.valid_from = Some(now + chrono::Duration::hours(1));
        assert!(matches!(
            v.judge(now, &lines, "eur"),
            Err(Refusal::NotYet { .. })
        ));
        v.valid_from = None;
        v.valid_until = Some(now);
        assert!(matches!(
            v.judge(now, &lines, "eur"),
            Err(Refusal::Expired { .. })
        ));
        v.valid_until = None;
        let amount = voucher(Discount::PerOrder { minor: 50 }, None);
        assert_eq!(
            amount.judge(now, &lines, "inr"),
            Err(Refusal::OtherCurrency)
        );
    }
}
