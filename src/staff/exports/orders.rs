//! The orders export: one line per order with a line the filter wants,
//! what was bought, what was paid after its voucher, what was given back.

use chrono::{DateTime, Utc};
use sqlx::FromRow;
use uuid::Uuid;

use super::csv::{CsvRow, moment};
use crate::clock::ShopZone;

/// One order: what was bought, what was paid for it after its voucher, what
/// was given back.
#[derive(Debug, Clone, FromRow)]
pub(super) struct OrderLine {
    id: Uuid,
    created_at: DateTime<Utc>,
    paid_at: Option<DateTime<Utc>>,
    state: String,
    flag: Option<String>,
    customer_name: String,
    customer_email: String,
    /// The order's lines, by name: quantity, name, and what was paid for
    /// the line (its price times its quantity, less its share of a
    /// voucher's discount).
    line_qtys: Vec<i32>,
    line_names: Vec<String>,
    line_paid: Vec<i64>,
    units_refunded: i64,
    currency: String,
    /// At the products' prices, before any discount.
    subtotal_minor: i64,
    voucher_code: Option<String>,
    /// What was paid: the lines' paid amounts summed.
    paid_minor: i64,
    refunded_minor: i64,
    provider: String,
    payment_ref: Option<String>,
    /// Its items' codes (each once), those refunded or cancelled left out.
    codes: Option<String>,
}

impl OrderLine {
    /// `2 × Harbour Lights — General admission (€70.00); 1 × Harbour Lights
    /// — VIP (€81.00)`: each line with what was paid for it
    fn lines(&self) -> String {
        let mut words = String::new();
        for ((qty, name), paid) in self
            .line_qtys
            .iter()
            .zip(&self.line_names)
            .zip(&self.line_paid)
        {
            if !words.is_empty() {
                words.push_str("; ");
            }
            words.push_str(&format!(
                "{qty} × {name} ({})",
                crate::money::format(*paid, &self.currency)
            ));
        }
        words
    }
}

impl CsvRow for OrderLine {
    const SQL: &'static str = ORDERS_SQL;
    const ACTION: &'static str = "export_orders";
    const FILE: &'static str = "orders";
    const COLUMNS: &'static [&'static str] = &[
        "order_id",
        "placed_at",
        "paid_at",
        "state",
        "flag",
        "customer_name",
        "customer_email",
        "lines",
        "units",
        "units_refunded",
        "currency",
        "subtotal_minor",
        "voucher",
        "discount_minor",
        "discount",
        "amount_minor",
        "amount",
        "refunded_minor",
        "refunded",
        "provider",
        "payment_ref",
        "codes",
    ];

    fn cells(&self, zone: ShopZone) -> Vec<String> {
        let money = |minor: i64| crate::money::format(minor, &self.currency);
        let discount = self.subtotal_minor - self.paid_minor;
        let units: i64 = self.line_qtys.iter().map(|q| i64::from(*q)).sum();
        vec![
            self.id.to_string(),
            moment(zone, Some(self.created_at)),
            moment(zone, self.paid_at),
            self.state.clone(),
            self.flag.clone().unwrap_or_default(),
            self.customer_name.clone(),
            self.customer_email.clone(),
            self.lines(),
            units.to_string(),
            self.units_refunded.to_string(),
            self.currency.to_uppercase(),
            self.subtotal_minor.to_string(),
            self.voucher_code.clone().unwrap_or_default(),
            discount.to_string(),
            money(discount),
            self.paid_minor.to_string(),
            money(self.paid_minor),
            self.refunded_minor.to_string(),
            money(self.refunded_minor),
            self.provider.clone(),
            self.payment_ref.clone().unwrap_or_default(),
            self.codes.clone().unwrap_or_default(),
        ]
    }
}

/// One line per order with a line the filter wants (the whole order, all
/// its lines and its whole amount, even when only one line matched), in
/// the order they were placed. What a line paid is `paid_minor` (written
/// at checkout, less its share of a voucher); a line written before
/// vouchers has paid its price.
const ORDERS_SQL: &str = "-- holdfast export: orders
select o.id, o.created_at, o.paid_at, o.state, o.flag, o.customer_name, o.customer_email,
       l.line_qtys, l.line_names, l.line_paid, l.units_refunded, o.currency, l.subtotal_minor,
       o.voucher_code, l.paid_minor, o.refunded_minor, o.provider, o.payment_ref,
       (select string_agg(distinct i.code, ' ') from order_items i
         where i.order_id = o.id and i.state in ('valid', 'used')) as codes
  from orders o
 cross join lateral (
        select array_agg(ol.qty order by ol.name, ol.product_id) as line_qtys,
               array_agg(ol.name order by ol.name, ol.product_id) as line_names,
               array_agg(coalesce(ol.paid_minor, ol.unit_price_minor * ol.qty)
                         order by ol.name, ol.product_id) as line_paid,
               coalesce(sum(ol.refunded_qty), 0)::int8 as units_refunded,
               coalesce(sum(ol.unit_price_minor * ol.qty), 0)::int8 as subtotal_minor,
               coalesce(sum(coalesce(ol.paid_minor, ol.unit_price_minor * ol.qty)), 0)::int8
                   as paid_minor,
               -- the order is in when any of its lines is
               bool_or(($4::text is null or p.id = $4)
                       and ($5::text is null or p.collection = $5)
                       and ($6::timestamptz is null or p.starts_at >= $6)
                       and ($7::timestamptz is null or p.starts_at < $7)) as wanted
          from order_lines ol
          join products p on p.id = ol.product_id
         where ol.order_id = o.id
       ) l
 where l.wanted
   and ($1::text is null or o.state = $1)
   and ($2::timestamptz is null or o.paid_at >= $2)
   and ($3::timestamptz is null or o.paid_at < $3)
 order by o.created_at, o.id";
