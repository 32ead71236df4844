//! The attendees export: one line per code (a ticket, or an order's pickup
//! code), with who holds it and whether it was redeemed or refunded. The
//! door's list reads the same rows.

use chrono::{DateTime, Utc};
use sqlx::{FromRow, PgPool};
use uuid::Uuid;

use super::ExportError;
use super::csv::{CsvExport, CsvRow, Exports, export, moment, yes};
use super::filter::ExportFilter;
use crate::audit::Actor;
use crate::clock::ShopZone;

/// One code: a ticket (one person, once) or a pickup code (one order's
/// slots, once), with who holds it and what became of it.
#[derive(Debug, Clone, FromRow)]
pub struct AttendeeLine {
    pub code: String,
    /// `ticket` or `pickup`
    pub kind: String,
    /// What it lets in now: a ticket's product; a pickup code's slots with
    /// the units not refunded (all of them, once everything was).
    pub admits: Option<String>,
    /// The ticket's product; a pickup code's slots, separated by spaces.
    pub product_id: Option<String>,
    pub starts_at: Option<DateTime<Utc>>,
    pub order_id: Uuid,
    pub order_state: String,
    pub customer_name: String,
    pub customer_email: String,
    pub paid_at: Option<DateTime<Utc>>,
    /// It no longer lets anyone in: its unit, or its whole order, was
    /// refunded (the door's `refunded`).
    pub refunded: bool,
    pub redeemed_at: Option<DateTime<Utc>>,
    pub redeemed_by: Option<String>,
    pub place: Option<String>,
}

impl CsvRow for AttendeeLine {
    const SQL: &'static str = ATTENDEES_SQL;
    const ACTION: &'static str = "export_attendees";
    const FILE: &'static str = "attendees";
    const COLUMNS: &'static [&'static str] = &[
        "code",
        "kind",
        "admits",
        "product_id",
        "starts_at",
        "customer_name",
        "customer_email",
        "order_id",
        "order_state",
        "paid_at",
        "redeemed",
        "redeemed_at",
        "redeemed_by",
        "redeemed_where",
        "refunded",
    ];

    fn cells(&self, zone: ShopZone) -> Vec<String> {
        vec![
            self.code.clone(),
            self.kind.clone(),
            self.admits.clone().unwrap_or_default(),
            self.product_id.clone().unwrap_or_default(),
            moment(zone, self.starts_at),
            self.customer_name.clone(),
            self.customer_email.clone(),
            self.order_id.to_string(),
            self.order_state.clone(),
            moment(zone, self.paid_at),
            yes(self.redeemed_at.is_some()).to_owned(),
            moment(zone, self.redeemed_at),
            self.redeemed_by.clone().unwrap_or_default(),
            self.place.clone().unwrap_or_default(),
            yes(self.refunded).to_owned(),
        ]
    }
}

/// Every code the filter covers, by the holder's name. A ticket is in when
/// its product is; a pickup code when any of its order's slots is. What is
/// "refunded" is what the door (`hf_redeem`) refuses as refunded.
const ATTENDEES_SQL: &str = "-- holdfast export: attendees
with codes as (
    -- a ticket: one code per unit
    -- (a seat's ticket admits to its seat: \"Stalls, seat C-12\")
    select c.code, 'ticket' as kind, c.order_id,
           p.name || coalesce(', seat ' || st.label, '') as admits, p.id as product_id,
           p.starts_at, c.refunded_at is not null as unit_refunded
      from order_codes c
      join products p on p.id = c.product_id
      left join seats st on st.id = c.seat_id
     where ($4::text is null or p.id = $4)
       and ($5::text is null or p.collection = $5)
       and ($6::timestamptz is null or p.starts_at >= $6)
       and ($7::timestamptz is null or p.starts_at < $7)
    union all
    -- a pickup code: one per order, for all its slots
    select o.pickup_code, 'pickup', o.id, s.admits, s.product_id, s.starts_at, s.all_refunded
      from orders o
     cross join lateral (
            select coalesce(
                       string_agg(l.name || ' × ' || (l.qty - l.refunded_qty), '; '
                                  order by p.starts_at, l.name)
                         filter (where l.refunded_qty < l.qty),
                       string_agg(l.name || ' × ' || l.qty, '; ' order by p.starts_at, l.name)
                   ) as admits,
                   string_agg(p.id, ' ' order by p.starts_at, p.id) as product_id,
                   min(p.starts_at) as starts_at,
                   bool_and(l.refunded_qty = l.qty) as all_refunded,
                   bool_or(($4::text is null or p.id = $4)
                           and ($5::text is null or p.collection = $5)
                           and ($6::timestamptz is null or p.starts_at >= $6)
                           and ($7::timestamptz is null or p.starts_at < $7)) as wanted
              from order_lines l
              join products p on p.id = l.product_id
              join product_kinds k on k.kind = p.kind
             where l.order_id = o.id and k.code = 'pickup'
           ) s
     where o.pickup_code is not null and s.wanted
)
select x.code, x.kind, x.admits, x.product_id, x.starts_at, o.id as order_id,
       o.state as order_state, o.customer_name, o.customer_email, o.paid_at,
       (x.unit_refunded or o.state in ('refund_pending', 'refunded')) as refunded,
       r.redeemed_at, r.redeemed_by, r.place
  from codes x
  join orders o on o.id = x.order_id
  left join redemptions r on r.code = x.code
 where ($1::text is null or o.state = $1)
   and ($2::timestamptz is null or o.paid_at >= $2)
   and ($3::timestamptz is null or o.paid_at < $3)
 order by lower(o.customer_name), o.customer_name, o.id, x.kind, x.code";

/// The codes a filter covers, as CSV; recorded in Activity as
/// `export_attendees`.
pub async fn attendees_csv(
    pool: &PgPool,
    exports: &Exports,
    by: Actor<'_>,
    filter: &ExportFilter,
    zone: ShopZone,
) -> Result<CsvExport, ExportError> {
    export::<AttendeeLine>(pool, exports, by, filter, zone).await
}
