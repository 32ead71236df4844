//! A schedule: units of a kind a schedule can make (a bakery's pickup
//! slots; any kind whose sheet names its scheduled units), with the
//! weekdays and hours, a unit's length, how many a unit takes, how many
//! days ahead units are published, and the days it is closed. The worker
//! publishes the rolling
//! window ([`publish`]): one product and resource per slot, created when it
//! comes into the window, changed with the schedule while it has no
//! orders, taken off sale when the schedule no longer has it and it has no
//! orders, and otherwise never touched, because a slot with orders is a
//! promise to the people who made them.

use chrono::{DateTime, Datelike, Duration, NaiveDate, NaiveTime, Utc};
use serde::{Deserialize, Serialize};
use sqlx::{PgConnection, PgPool};

use super::ProductKind;
use super::edit::{
    CollectionEdit, ProductEdit, archive_product_in, check_slug, put_collection_in, put_product_in,
};
use crate::clock::ShopZone;
use crate::inventory::InvalidInput;

/// A schedule as it is written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Schedule {
    /// The collection its slots are shown under (`bakery`).
    pub collection: String,
    /// What it makes: a kind a schedule can make (pickup slots when the
    /// catalogue file does not say).
    #[serde(
        default = "ProductKind::made_by_default",
        skip_serializing_if = "ProductKind::is_made_by_default"
    )]
    pub kind: ProductKind,
    /// The collection's title and lede on the shop's pages.
    pub title: String,
    #[serde(default)]
    pub lede: String,
    /// What a slot sells ("Sourdough box"), and its description.
    pub name: String,
    #[serde(default)]
    pub description: String,
    pub price_minor: i64,
    pub currency: String,
    /// Boxes a slot takes.
    pub capacity: i32,
    #[serde(default = "ten")]
    pub max_per_order: i32,
    /// ISO weekdays the counter is open (1 Monday … 7 Sunday).
    pub weekdays: Vec<i32>,
    /// The counter's hours, wall-clock in the shop's zone (`08:00`).
    pub opens: NaiveTime,
    pub closes: NaiveTime,
    pub slot_minutes: i32,
    /// Slots are published for today and this many days ahead.
    pub days_ahead: i32,
    /// Days the counter is closed (a holiday).
    #[serde(default)]
    pub closed_days: Vec<NaiveDate>,
}

fn ten() -> i32 {
    super::edit::DEFAULT_MAX_PER_ORDER
}

impl Schedule {
    pub fn check(&self) -> Result<(), InvalidInput> {
        let bad = |m: String| Err(InvalidInput(m));
        check_slug("a schedule's collection", &self.collection, 100)?;
        if !self.kind.scheduled() {
            return bad(format!(
                "a schedule makes {}, not {}s",
                ProductKind::made_by_schedules()
                    .map(|k| format!("{}s", k.sheet().noun))
                    .collect::<Vec<_>>()
                    .join(" or "),
                self.kind.sheet().noun
            ));
        }
        if self.weekdays.is_empty() || self.weekdays.iter().any(|d| !(1..=7).contains(d)) {
            return bad("the weekdays are 1 (Monday) to 7 (Sunday), at least one".into());
        }
        if self.opens >= self.closes {
            return bad("the counter opens before it closes".into());
        }
        if !(5..=1440).contains(&self.slot_minutes) {
            return bad("a slot is 5 to 1,440 minutes (a day)".into());
        }
        if !(0..=366).contains(&self.days_ahead) {
            return bad("slots are published 0 to 366 days ahead".into());
        }
        if !(0..=1_000_000).contains(&self.capacity) {
            return bad("a slot takes 0 to 1,000,000 boxes".into());
        }
        self.slot_edit("x", None, ShopZone::UTC).check()?;
        Ok(())
    }

    /// Every slot's start from `today` to `today + days_ahead` (in `zone`),
    /// closed days left out; a moment a clock change skips is left out.
    pub fn slots(&self, zone: ShopZone, today: NaiveDate) -> Vec<DateTime<Utc>> {
        let mut slots = Vec::new();
        for ahead in 0..=i64::from(self.days_ahead) {
            let Some(day) = today.checked_add_signed(Duration::days(ahead)) else {
                break;
            };
            let weekday = day.weekday().number_from_monday() as i32;
            if !self.weekdays.contains(&weekday) || self.closed_days.contains(&day) {
                continue;
            }
            let mut time = self.opens;
            while time < self.closes {
                if let Ok(at) = zone.at(day, time) {
                    slots.push(at);
                }
                let (next, wrapped) =
                    time.overflowing_add_signed(Duration::minutes(i64::from(self.slot_minutes)));
                if wrapped != 0 {
                    break;
                }
                time = next;
            }
        }
        slots
    }

    /// The product a slot at `starts` is (its id is the collection and the
    /// moment in UTC, as slots have always been named), named as its kind
    /// names its units, ending a slot's length later.
    fn slot_edit(&self, id: &str, starts: Option<DateTime<Utc>>, zone: ShopZone) -> ProductEdit {
        ProductEdit {
            id: id.to_owned(),
            collection: self.collection.clone(),
            kind: self.kind,
            name: match starts {
                Some(at) => self.kind.unit_name(&self.name, at, zone),
                None => self.name.clone(),
            },
            ends_at: starts.map(|at| at + Duration::minutes(i64::from(self.slot_minutes))),
            description: self.description.clone(),
            price_minor: self.price_minor,
            currency: self.currency.clone(),
            capacity: i64::from(self.capacity),
            starts_at: starts,
            max_per_order: self.max_per_order,
            sale_opens_at: None,
            sale_closes_at: None,
            hidden: false,
            position: None,
        }
    }
}

/// A slot's product id.
pub fn slot_id(collection: &str, starts: DateTime<Utc>) -> String {
    format!("{collection}-{}", starts.format("%Y-%m-%d-%H%M"))
}

/// Create or change a schedule (its collection too); its slots follow at
/// the next [`publish`].
pub async fn put_schedule(pool: &PgPool, schedule: &Schedule) -> anyhow::Result<()> {
    let mut tx = pool.begin().await?;
    put_schedule_in(&mut tx, schedule).await?;
    tx.commit().await?;
    Ok(())
}

/// [`put_schedule`], in the caller's transaction.
pub async fn put_schedule_in(conn: &mut PgConnection, schedule: &Schedule) -> anyhow::Result<()> {
    schedule.check()?;
    // its place on the page stays where the owner put it; a new one goes last
    let position: i32 = sqlx::query_scalar(
        "select coalesce((select position from collections where id = $1), \
                         (select coalesce(max(position) + 1, 0) from collections))",
    )
    .bind(&schedule.collection)
    .fetch_one(&mut *conn)
    .await?;
    put_collection_in(
        conn,
        &CollectionEdit {
            id: schedule.collection.clone(),
            kind: schedule.kind.collection(),
            title: schedule.title.clone(),
            lede: schedule.lede.clone(),
            starts_at: None,
            ends_at: None,
            doors_at: None,
            venue: String::new(),
            position,
        },
    )
    .await?;
    sqlx::query(
        "insert into schedules (collection, name, description, price_minor, currency, \
                                capacity, max_per_order, weekdays, opens, closes, \
                                slot_minutes, days_ahead, closed_days, kind) \
         values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14) \
         on conflict (collection) do update \
            set name = excluded.name, description = excluded.description, kind = excluded.kind, \
                price_minor = excluded.price_minor, currency = excluded.currency, \
                capacity = excluded.capacity, max_per_order = excluded.max_per_order, \
                weekdays = excluded.weekdays, opens = excluded.opens, closes = excluded.closes, \
                slot_minutes = excluded.slot_minutes, days_ahead = excluded.days_ahead, \
                closed_days = excluded.closed_days, archived_at = null, updated_at = now()",
    )
    .bind(&schedule.collection)
    .bind(&schedule.name)
    .bind(&schedule.description)
    .bind(schedule.price_minor)
    .bind(&schedule.currency)
    .bind(schedule.capacity)
    .bind(schedule.max_per_order)
    .bind(&schedule.weekdays)
    .bind(schedule.opens)
    .bind(schedule.closes)
    .bind(schedule.slot_minutes)
    .bind(schedule.days_ahead)
    .bind(&schedule.closed_days)
    .bind(schedule.kind)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

#[derive(sqlx::FromRow)]
struct ScheduleRow {
    collection: String,
    kind: ProductKind,
    title: String,
    lede: String,
    name: String,
    description: String,
    price_minor: i64,
    currency: String,
    capacity: i32,
    max_per_order: i32,
    weekdays: Vec<i32>,
    opens: NaiveTime,
    closes: NaiveTime,
    slot_minutes: i32,
    days_ahead: i32,
    closed_days: Vec<NaiveDate>,
}

const SCHEDULE_COLUMNS: &str = "select s.collection, s.kind, c.title, c.lede, s.name, \
     s.description, s.price_minor, s.currency, s.capacity, s.max_per_order, s.weekdays, s.opens, \
     s.closes, s.slot_minutes, s.days_ahead, s.closed_days \
     from schedules s join collections c on c.id = s.collection \
     where s.archived_at is null";

/// Every schedule in force, with its collection's words.
pub async fn schedules(pool: &PgPool) -> sqlx::Result<Vec<Schedule>> {
    let rows: Vec<ScheduleRow> = sqlx::query_as(&format!(
        "{SCHEDULE_COLUMNS} order by c.position, s.collection"
    ))
    .fetch_all(pool)
    .await?;
    Ok(rows.into_iter().map(Schedule::from).collect())
}

/// One schedule as it is now, its row locked until the caller's
/// transaction ends (an admin save of it waits, or is waited for).
async fn schedule_locked(
    conn: &mut PgConnection,
    collection: &str,
) -> sqlx::Result<Option<Schedule>> {
    let row: Option<ScheduleRow> = sqlx::query_as(&format!(
        "{SCHEDULE_COLUMNS} and s.collection = $1 for update of s"
    ))
    .bind(collection)
    .fetch_optional(conn)
    .await?;
    Ok(row.map(Schedule::from))
}

impl From<ScheduleRow> for Schedule {
    fn from(r: ScheduleRow) -> Self {
        Schedule {
            collection: r.collection,
            kind: r.kind,
            title: r.title,
            lede: r.lede,
            name: r.name,
            description: r.description,
            price_minor: r.price_minor,
            currency: r.currency,
            capacity: r.capacity,
            max_per_order: r.max_per_order,
            weekdays: r.weekdays,
            opens: r.opens,
            closes: r.closes,
            slot_minutes: r.slot_minutes,
            days_ahead: r.days_ahead,
            closed_days: r.closed_days,
        }
    }
}

/// What one pass of [`publish`] did.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize)]
pub struct Published {
    /// Slots that came into the window.
    pub created: usize,
    /// Slots without orders changed with their schedule.
    pub updated: usize,
    /// Slots without orders the schedule no longer has, taken off sale.
    pub withdrawn: usize,
    /// Slots the schedule would change or withdraw, left as they were
    /// because they have orders (or units held or sold).
    pub kept: usize,
}

/// Publish every schedule's rolling window at `now` in `zone`, each
/// schedule in a transaction of its own ([`publish_schedule`]).
pub async fn publish(
    pool: &PgPool,
    zone: ShopZone,
    now: DateTime<Utc>,
) -> anyhow::Result<Published> {
    let mut done = Published::default();
    for listed in schedules(pool).await? {
        let mut tx = pool.begin().await?;
        // the schedule as it is now, not as it was listed: a save since
        // then (a closed day) must not be undone by this pass
        let Some(schedule) = schedule_locked(&mut tx, &listed.collection).await? else {
            continue;
        };
        let one = publish_schedule(&mut tx, &schedule, zone, now).await?;
        tx.commit().await?;
        done.created += one.created;
        done.updated += one.updated;
        done.withdrawn += one.withdrawn;
        done.kept += one.kept;
    }
    Ok(done)
}

/// Publish one schedule's rolling window at `now` in `zone`, in the
/// caller's transaction. Its existing slots are decided under their
/// resources' locks (the lock a checkout's hold takes, `for no key
/// update`, all taken at once in id order, the engine's lock order, and
/// kept until the caller commits): a slot with orders, or with units held
/// or sold, is left as it is, and no checkout can take a unit of it
/// between that look and the change.
pub async fn publish_schedule(
    conn: &mut PgConnection,
    schedule: &Schedule,
    zone: ShopZone,
    now: DateTime<Utc>,
) -> anyhow::Result<Published> {
    let mut done = Published::default();
    // what the window should have, from now on
    let wanted: Vec<DateTime<Utc>> = schedule
        .slots(zone, zone.today(now))
        .into_iter()
        .filter(|at| *at > now)
        .collect();
    #[derive(sqlx::FromRow)]
    struct Slot {
        id: String,
        starts_at: Option<DateTime<Utc>>,
        ends_at: Option<DateTime<Utc>>,
        active: bool,
        name: String,
        price_minor: i64,
        total: i32,
        max_per_order: i32,
        description: String,
        promised: bool,
    }
    let existing: Vec<Slot> = sqlx::query_as(
        "with locked as ( \
             select r.id, r.total, r.held, r.sold from resources r \
              where r.id in (select p.resource_id from products p \
                              where p.collection = $1 and p.kind = $3 \
                                and (p.starts_at is null or p.starts_at > $2)) \
              order by r.id for no key update) \
         select p.id, p.starts_at, p.ends_at, p.archived_at is null as active, p.name, p.price_minor, p.max_per_order, \
                p.description, l.total, \
                (l.held > 0 or l.sold > 0 \
                 or exists (select 1 from order_lines ol join orders o on o.id = ol.order_id \
                             where ol.product_id = p.id \
                               and o.state in ('pending', 'paid', 'refund_pending', 'refunded'))) \
                  as promised \
           from products p join locked l on l.id = p.resource_id \
          where p.collection = $1 and p.kind = $3 \
          order by p.id",
    )
    .bind(&schedule.collection)
    .bind(now)
    .bind(schedule.kind)
    .fetch_all(&mut *conn)
    .await?;
    for at in &wanted {
        let id = slot_id(&schedule.collection, *at);
        let edit = schedule.slot_edit(&id, Some(*at), zone);
        match existing.iter().find(|s| s.id == id) {
            None => {
                put_product_in(conn, &edit).await?;
                done.created += 1;
            }
            Some(slot) => {
                let same = slot.active
                    && slot.name == edit.name
                    && slot.price_minor == edit.price_minor
                    && i64::from(slot.total) == edit.capacity
                    && slot.max_per_order == edit.max_per_order
                    && slot.description == edit.description
                    && slot.starts_at == edit.starts_at
                    && slot.ends_at == edit.ends_at;
                if same {
                    continue;
                }
                if slot.promised {
                    done.kept += 1;
                } else {
                    put_product_in(conn, &edit).await?;
                    done.updated += 1;
                }
            }
        }
    }
    for slot in &existing {
        let still = wanted
            .iter()
            .any(|at| slot_id(&schedule.collection, *at) == slot.id);
        if still || !slot.active {
            continue;
        }
        if slot.promised {
            done.kept += 1;
        } else if archive_product_in(conn, &slot.id).await? {
            done.withdrawn += 1;
        }
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bakery() -> Schedule {
        Schedule {
            collection: "bakery".into(),
            kind: ProductKind::PickupSlot,
            title: "Bakery pickup".into(),
            lede: String::new(),
            name: "Sourdough box".into(),
            description: String::new(),
            price_minor: 1800,
            currency: "eur".into(),
            capacity: 8,
            max_per_order: 10,
            weekdays: vec![2, 3, 4, 5, 6],
            opens: NaiveTime::from_hms_opt(8, 0, 0).unwrap(),
            closes: NaiveTime::from_hms_opt(10, 0, 0).unwrap(),
            slot_minutes: 30,
            days_ahead: 6,
            closed_days: vec![NaiveDate::from_ymd_opt(2026, 12, 25).unwrap()],
        }
    }

    #[test]
    fn slots_follow_the_weekdays_the_hours_and_the_closed_days() {
        // Monday 21 December 2026, a week ahead: Tuesday to Saturday, but
        // Friday the 25th is closed; four slots a day
        let today = NaiveDate::from_ymd_opt(2026, 12, 21).unwrap();
        let zone = ShopZone::parse("Europe/Berlin").unwrap();
        let slots = bakery().slots(zone, today);
        assert_eq!(slots.len(), 4 * 4);
        let days: std::collections::BTreeSet<_> = slots
            .iter()
            .map(|at| zone.local(*at).date_naive())
            .collect();
        assert!(!days.contains(&NaiveDate::from_ymd_opt(2026, 12, 25).unwrap()));
        assert!(
            !days.contains(&today),
            "Monday is not a weekday of the counter"
        );
        assert_eq!(zone.time(slots[0]), "08:00 CET");
        assert_eq!(zone.time(slots[3]), "09:30 CET");
        assert!(bakery().check().is_ok());
        assert!(
            Schedule {
                weekdays: vec![8],
                ..bakery()
            }
            .check()
            .is_err()
        );
        assert!(
            Schedule {
                opens: NaiveTime::from_hms_opt(12, 0, 0).unwrap(),
                ..bakery()
            }
            .check()
            .is_err()
        );
    }
}
