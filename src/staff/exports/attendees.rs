//! The attendees export: one line per item ([`crate::items`]: a ticket, a
//! seat, a pickup, a booking, a jar to collect) with its code, who holds it
//! and whether it was redeemed, refunded or cancelled. The door's list
//! reads the same rows.

use chrono::{DateTime, Utc};
use sqlx::FromRow;
use uuid::Uuid;

use super::csv::{CsvRow, moment, yes};
use crate::clock::ShopZone;

/// One item with its code (a code two items share is on both lines), who
/// holds it and what became of it.
#[derive(Debug, Clone, FromRow)]
pub struct AttendeeLine {
    pub code: String,
    /// The code's noun: `ticket`, `pickup`, `booking`, `collection`.
    pub kind: String,
    /// What it lets in: its line's name with its seat, or with the units
    /// not refunded (all of them, once everything was).
    pub admits: Option<String>,
    pub product_id: Option<String>,
    pub starts_at: Option<DateTime<Utc>>,
    pub order_id: Uuid,
    pub order_state: String,
    pub customer_name: String,
    pub customer_email: String,
    pub paid_at: Option<DateTime<Utc>>,
    /// It no longer lets anyone in: it, or its whole order, was refunded
    /// or cancelled (the door's `refunded` and `cancelled`).
    pub refunded: bool,
    pub redeemed_at: Option<DateTime<Utc>>,
    pub redeemed_by: Option<String>,
    pub place: Option<String>,
    /// The item, and its state: valid, used, refunded, cancelled.
    pub item_id: i64,
    pub state: String,
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
        "item_id",
        "state",
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
            self.item_id.to_string(),
            self.state.clone(),
        ]
    }
}

/// Every item the filter covers, by the holder's name. What is "refunded"
/// is what the door (`hf_redeem`) refuses as refunded or cancelled.
const ATTENDEES_SQL: &str = "-- holdfast export: attendees
select i.code, k.code as kind,
       case when st.label is not null then p.name || ', seat ' || st.label
            when i.booking is not null or (l.qty > 1
                 and not exists (select 1 from order_items j
                                  where j.order_id = i.order_id and j.product_id = i.product_id
                                    and j.id <> i.id))
              then coalesce(l.name, p.name) || ' × '
                   || case when l.refunded_qty < l.qty then l.qty - l.refunded_qty else l.qty end
            else coalesce(l.name, p.name) end as admits,
       p.id as product_id, coalesce(b.starts_at, p.starts_at, co.starts_at) as starts_at,
       o.id as order_id, o.state as order_state, o.customer_name, o.customer_email, o.paid_at,
       (i.state in ('refunded', 'cancelled') or o.state in ('refund_pending', 'refunded'))
         as refunded,
       r.redeemed_at, r.redeemed_by, r.place, i.id as item_id, i.state
  from order_items i
  join orders o on o.id = i.order_id
  join products p on p.id = i.product_id
  join product_kinds k on k.kind = p.kind
  join collections co on co.id = p.collection
  left join order_lines l on l.order_id = i.order_id and l.product_id = i.product_id
  left join seats st on st.id = i.seat_id
  left join bookings b on b.hold_id = i.booking
  left join redemptions r on r.item_id = i.id
 where ($4::text is null or p.id = $4)
   and ($5::text is null or p.collection = $5)
   and ($6::timestamptz is null or p.starts_at >= $6)
   and ($7::timestamptz is null or p.starts_at < $7)
   and ($1::text is null or o.state = $1)
   and ($2::timestamptz is null or o.paid_at >= $2)
   and ($3::timestamptz is null or o.paid_at < $3)
 order by lower(o.customer_name), o.customer_name, o.id, k.code, i.code, i.id";
