//! The catalogue file: what is sold, as JSON, for automation. `holdfast
//! catalogue load` writes it through the same changes the admin makes
//! ([`super::edit`]), and `holdfast catalogue export` writes what the admin
//! made, with absolute times, so that loading an export gives the same
//! catalogue. `fixtures/catalogue.json` is the demo.
//!
//! Times are absolute (ISO 8601 with an offset, `2027-03-20T19:30:00+01:00`)
//! or, for a demo that never goes stale, relative: `days_ahead` days from
//! today at `time` (wall-clock in the shop's zone) or `time_utc`.

use std::path::Path;

use anyhow::Context;
use chrono::{DateTime, Duration, FixedOffset, NaiveTime, Utc};
use serde::{Deserialize, Serialize};
use sqlx::PgPool;

use super::ProductKind;
use super::edit::{CollectionEdit, DEFAULT_MAX_PER_ORDER, ProductEdit, PutProduct};
use super::kinds::{CollectionKind, InFile};
use super::schedules::{self, Schedule};
use super::seats::{self, SeatingSpec};
use super::tables::{self, RoomSpec};
use crate::clock::ShopZone;
use crate::vouchers::{self, NewVoucher};

fn default_max_per_order() -> i32 {
    DEFAULT_MAX_PER_ORDER
}

fn is_default_max(max: &i32) -> bool {
    *max == DEFAULT_MAX_PER_ORDER
}

fn thirty() -> i64 {
    30
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct CatalogueFile {
    pub currency: String,
    /// Shelves and other collections with their words (events and
    /// schedules name their own).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub collections: Vec<CollectionEdit>,
    /// Pickup schedules, published on a rolling window by the worker.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub schedules: Vec<Schedule>,
    /// Events, each with its tiers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<EventSpec>,
    /// A bakery's fixed slots (the demo's: days ahead at set times).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pickup_slots: Option<PickupSlots>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub products: Vec<ProductSpec>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub vouchers: Vec<NewVoucher>,
    /// Restaurants, each whole: its tables, joins, service periods and
    /// turns; its times are published from it (`days_ahead` days).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dining_rooms: Vec<RoomSpec>,
}

/// When something happens: an absolute moment, or days ahead at a time.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct When {
    /// ISO 8601 with an offset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub starts_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub days_ahead: Option<i64>,
    /// Wall-clock in the shop's zone (`time`) or in UTC (`time_utc`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_utc: Option<String>,
}

impl When {
    fn absolute(at: Option<DateTime<Utc>>, zone: ShopZone) -> Self {
        Self {
            starts_at: at.map(|at| iso(at, zone)),
            ..Self::default()
        }
    }

    fn resolve(
        &self,
        what: &str,
        now: DateTime<Utc>,
        zone: ShopZone,
    ) -> anyhow::Result<Option<DateTime<Utc>>> {
        match (&self.starts_at, self.days_ahead, &self.time, &self.time_utc) {
            (Some(at), None, None, None) => Ok(Some(moment(what, at)?)),
            (None, Some(days), Some(time), None) => Ok(Some(at(now, zone, days, time)?)),
            (None, Some(days), None, Some(time)) => Ok(Some(at(now, ShopZone::UTC, days, time)?)),
            (None, None, None, None) => Ok(None),
            _ => anyhow::bail!(
                "{what}: give starts_at (ISO 8601 with an offset), or days_ahead with time or \
                 time_utc, not a mix"
            ),
        }
    }
}

/// A moment as the file writes it: ISO 8601 in the shop's zone's offset.
fn iso(at: DateTime<Utc>, zone: ShopZone) -> String {
    zone.local(at).to_rfc3339()
}

/// A moment the file gives: ISO 8601 with an offset.
pub fn moment(what: &str, text: &str) -> anyhow::Result<DateTime<Utc>> {
    DateTime::<FixedOffset>::parse_from_rfc3339(text.trim())
        .map(|at| at.with_timezone(&Utc))
        .with_context(|| format!("{what}: {text:?} is not a moment like 2027-03-20T19:30:00+01:00"))
}

fn optional_moment(what: &str, text: &Option<String>) -> anyhow::Result<Option<DateTime<Utc>>> {
    text.as_deref().map(|t| moment(what, t)).transpose()
}

/// An event and its tiers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventSpec {
    /// Its collection's id (`harbour-lights`).
    pub id: String,
    pub title: String,
    #[serde(default)]
    pub lede: String,
    #[serde(flatten)]
    pub when: When,
    /// When the doors open (ISO 8601 with an offset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub doors_at: Option<String>,
    /// When it ends: `ends_at` (ISO 8601 with an offset), or `lasts_minutes`
    /// after it starts (for a demo with relative times).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ends_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lasts_minutes: Option<i64>,
    #[serde(default)]
    pub venue: String,
    pub tiers: Vec<TierSpec>,
    /// Reserved seating: price categories and sections of seats, beside
    /// the tiers (general admission).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seating: Option<SeatingSpec>,
}

impl EventSpec {
    /// When it ends, given when it starts.
    fn ends(&self, starts: Option<DateTime<Utc>>) -> anyhow::Result<Option<DateTime<Utc>>> {
        let what = format!("event {:?}", self.id);
        match (&self.ends_at, self.lasts_minutes, starts) {
            (Some(_), Some(_), _) => {
                anyhow::bail!("{what}: give ends_at or lasts_minutes, not both")
            }
            (Some(at), None, _) => Ok(Some(moment(&format!("{what} ends_at"), at)?)),
            (None, Some(minutes), Some(starts)) if (1..=100_000).contains(&minutes) => {
                Ok(Some(starts + Duration::minutes(minutes)))
            }
            (None, Some(_), _) => {
                anyhow::bail!("{what}: lasts_minutes is 1 to 100,000, after a start")
            }
            (None, None, _) => Ok(None),
        }
    }
}

/// One tier of an event: its own price, capacity, most per order and sale
/// window.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TierSpec {
    pub id: String,
    pub name: String,
    #[serde(default)]
    pub description: String,
    pub price_minor: i64,
    pub capacity: i64,
    #[serde(
        default = "default_max_per_order",
        skip_serializing_if = "is_default_max"
    )]
    pub max_per_order: i32,
    #[serde(flatten)]
    pub sale: SaleWindow,
}

/// When a product's sale opens and closes, and whether it is hidden.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SaleWindow {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sale_opens_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sale_closes_at: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub hidden: bool,
}

impl SaleWindow {
    fn of(
        opens: Option<DateTime<Utc>>,
        closes: Option<DateTime<Utc>>,
        hidden: bool,
        zone: ShopZone,
    ) -> Self {
        Self {
            sale_opens_at: opens.map(|at| iso(at, zone)),
            sale_closes_at: closes.map(|at| iso(at, zone)),
            hidden,
        }
    }
}

/// A bakery's slots: the same product at each of `times` (wall-clock
/// times in the shop's zone, `HOLDFAST_TIME_ZONE`) on each day ahead.
/// `times_utc` gives them in UTC instead. Pickup slots of 30 minutes,
/// unless `kind` names another kind a schedule makes and `slot_minutes`
/// another length.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PickupSlots {
    pub collection: String,
    #[serde(default = "ProductKind::made_by_default")]
    pub kind: ProductKind,
    #[serde(default = "thirty")]
    pub slot_minutes: i64,
    pub name: String,
    pub description: String,
    pub price_minor: i64,
    pub capacity: i64,
    pub days_ahead: Vec<i64>,
    #[serde(default)]
    pub times: Vec<String>,
    #[serde(default)]
    pub times_utc: Vec<String>,
    /// Most boxes one order may take (default 10).
    #[serde(default = "default_max_per_order")]
    pub max_per_order: i32,
}

impl PickupSlots {
    /// The file's pickup slots as products: one per day ahead and time,
    /// named and timed in the shop's zone.
    fn products(
        &self,
        now: DateTime<Utc>,
        zone: ShopZone,
        currency: &str,
    ) -> anyhow::Result<Vec<ProductEdit>> {
        let mut products = Vec::new();
        if !self.kind.scheduled() || !(5..=1440).contains(&self.slot_minutes) {
            anyhow::bail!("pickup_slots: a kind a schedule makes, in slots of 5 to 1,440 minutes");
        }
        let times: Vec<(&String, ShopZone)> = self
            .times
            .iter()
            .map(|t| (t, zone))
            .chain(self.times_utc.iter().map(|t| (t, ShopZone::UTC)))
            .collect();
        for day in &self.days_ahead {
            for (time, in_zone) in &times {
                let starts = at(now, *in_zone, *day, time)?;
                products.push(ProductEdit {
                    id: schedules::slot_id(&self.collection, starts),
                    collection: self.collection.clone(),
                    kind: self.kind,
                    name: self.kind.unit_name(&self.name, starts, zone),
                    description: self.description.clone(),
                    price_minor: self.price_minor,
                    currency: currency.to_owned(),
                    capacity: self.capacity,
                    starts_at: Some(starts),
                    ends_at: Some(starts + Duration::minutes(self.slot_minutes)),
                    max_per_order: self.max_per_order,
                    sale_opens_at: None,
                    sale_closes_at: None,
                    hidden: false,
                    position: None,
                });
            }
        }
        Ok(products)
    }
}

/// A product on its own (stock on a shelf; or anything, absolute).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProductSpec {
    pub id: String,
    pub collection: String,
    pub kind: ProductKind,
    pub name: String,
    #[serde(default)]
    pub description: String,
    pub price_minor: i64,
    pub capacity: i64,
    /// When it happens (an event's time, a slot's), if it does.
    #[serde(flatten)]
    pub when: When,
    /// When it is over (ISO 8601 with an offset), if it says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ends_at: Option<String>,
    /// Most units one order may take (default 10).
    #[serde(
        default = "default_max_per_order",
        skip_serializing_if = "is_default_max"
    )]
    pub max_per_order: i32,
    #[serde(flatten)]
    pub sale: SaleWindow,
}

/// What loading changed.
#[derive(Debug, Default, Serialize)]
pub struct LoadReport {
    pub products: usize,
    pub resources_created: usize,
    /// Resources whose capacity could not shrink below what is committed.
    pub capacity_kept: Vec<String>,
    pub schedules: usize,
    pub vouchers_created: usize,
    /// Slots the schedules published.
    pub slots_published: usize,
    /// Bookable times the dining rooms published.
    pub times_published: usize,
}

/// `time` on the day `days_ahead` from `now`'s date, both in `zone`.
fn at(
    now: DateTime<Utc>,
    zone: ShopZone,
    days_ahead: i64,
    time: &str,
) -> anyhow::Result<DateTime<Utc>> {
    let time = NaiveTime::parse_from_str(time, "%H:%M")
        .with_context(|| format!("{time:?} is not a time like 12:30"))?;
    let day = zone
        .today(now)
        .checked_add_signed(Duration::days(days_ahead))
        .with_context(|| format!("{days_ahead} days ahead is out of range"))?;
    zone.at(day, time).map_err(|e| anyhow::anyhow!(e))
}

/// Everything a file asks for, resolved and checked before anything is
/// written.
struct Plan {
    collections: Vec<CollectionEdit>,
    schedules: Vec<Schedule>,
    products: Vec<ProductEdit>,
}

impl CatalogueFile {
    pub fn read(path: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        serde_json::from_str(&text)
            .with_context(|| format!("{} is not a catalogue", path.display()))
    }

    /// Every collection, schedule and product the file asks for, times
    /// resolved at `now` in `zone`, each checked.
    fn plan(&self, now: DateTime<Utc>, zone: ShopZone) -> anyhow::Result<Plan> {
        let currency = self.currency.trim().to_ascii_lowercase();
        let mut collections: Vec<CollectionEdit> = self.collections.clone();
        let mut products = Vec::new();
        let mut schedules = Vec::new();
        for schedule in &self.schedules {
            schedule
                .check()
                .with_context(|| format!("schedule {:?}", schedule.collection))?;
            schedules.push(schedule.clone());
        }
        for event in &self.events {
            let starts = event
                .when
                .resolve(&format!("event {:?}", event.id), now, zone)?;
            let ends = event.ends(starts)?;
            collections.push(CollectionEdit {
                id: event.id.clone(),
                kind: CollectionKind::Event,
                title: event.title.clone(),
                lede: event.lede.clone(),
                starts_at: starts,
                ends_at: ends,
                doors_at: optional_moment(
                    &format!("event {:?} doors_at", event.id),
                    &event.doors_at,
                )?,
                venue: event.venue.clone(),
                position: 0,
            });
            for tier in &event.tiers {
                let what = format!("tier {:?}", tier.id);
                products.push(ProductEdit {
                    id: tier.id.clone(),
                    collection: event.id.clone(),
                    kind: ProductKind::Ticket,
                    name: tier.name.clone(),
                    description: tier.description.clone(),
                    price_minor: tier.price_minor,
                    currency: currency.clone(),
                    capacity: tier.capacity,
                    starts_at: starts,
                    ends_at: ends,
                    max_per_order: tier.max_per_order,
                    sale_opens_at: optional_moment(&what, &tier.sale.sale_opens_at)?,
                    sale_closes_at: optional_moment(&what, &tier.sale.sale_closes_at)?,
                    hidden: tier.sale.hidden,
                    position: None,
                });
            }
            if let Some(seating) = &event.seating {
                seating
                    .check()
                    .map_err(anyhow::Error::msg)
                    .with_context(|| format!("event {:?} seating", event.id))?;
                products.extend(seating.products(&event.id, starts, ends, &currency));
            }
        }
        if let Some(slots) = &self.pickup_slots {
            products.extend(slots.products(now, zone, &currency)?);
        }
        for spec in &self.products {
            let what = format!("product {:?}", spec.id);
            products.push(ProductEdit {
                id: spec.id.clone(),
                collection: spec.collection.clone(),
                kind: spec.kind,
                name: spec.name.clone(),
                description: spec.description.clone(),
                price_minor: spec.price_minor,
                currency: currency.clone(),
                capacity: spec.capacity,
                starts_at: spec.when.resolve(&what, now, zone)?,
                ends_at: optional_moment(&what, &spec.ends_at)?,
                max_per_order: spec.max_per_order,
                sale_opens_at: optional_moment(&what, &spec.sale.sale_opens_at)?,
                sale_closes_at: optional_moment(&what, &spec.sale.sale_closes_at)?,
                hidden: spec.sale.hidden,
                position: None,
            });
        }
        // every product's collection is known: a shelf of that name unless
        // the file says what it is
        for product in &products {
            if !collections.iter().any(|c| c.id == product.collection)
                && !schedules.iter().any(|s| s.collection == product.collection)
            {
                collections.push(CollectionEdit {
                    id: product.collection.clone(),
                    kind: product.kind.collection(),
                    title: product.collection.clone(),
                    lede: String::new(),
                    starts_at: None,
                    ends_at: None,
                    doors_at: None,
                    venue: String::new(),
                    position: 0,
                });
            }
        }
        for collection in &collections {
            collection
                .check()
                .with_context(|| format!("collection {:?}", collection.id))?;
        }
        for (position, product) in products.iter_mut().enumerate() {
            product.position = Some(position as i32);
            product
                .check()
                .with_context(|| format!("product {:?}", product.id))?;
        }
        for voucher in &self.vouchers {
            voucher
                .check()
                .with_context(|| format!("voucher {:?}", voucher.code))?;
        }
        for room in &self.dining_rooms {
            room.check()
                .map_err(anyhow::Error::msg)
                .with_context(|| format!("dining room {:?}", room.id))?;
        }
        Ok(Plan {
            collections,
            schedules,
            products,
        })
    }

    /// Create or update every collection, schedule, product and voucher.
    /// Loading twice changes nothing; a capacity that would fall below what
    /// is committed is kept; a voucher that exists is left as it is. Every
    /// line is checked before anything is written: a bad line leaves the
    /// database as it was.
    pub async fn load(&self, pool: &PgPool) -> anyhow::Result<LoadReport> {
        self.load_in(pool, ShopZone::UTC).await
    }

    /// [`load`](Self::load), with the catalogue's wall-clock times read in
    /// the shop's zone.
    pub async fn load_in(&self, pool: &PgPool, zone: ShopZone) -> anyhow::Result<LoadReport> {
        let now = Utc::now();
        let plan = self.plan(now, zone)?;
        let mut report = LoadReport::default();
        for collection in &plan.collections {
            super::edit::put_collection(pool, collection).await?;
        }
        for schedule in &plan.schedules {
            schedules::put_schedule(pool, schedule).await?;
            report.schedules += 1;
        }
        for product in &plan.products {
            match super::edit::put_product(pool, product)
                .await
                .with_context(|| format!("cannot store product {}", product.id))?
            {
                PutProduct::Created => report.resources_created += 1,
                PutProduct::Updated => {}
                PutProduct::CapacityKept { .. } => report.capacity_kept.push(product.id.clone()),
            }
            report.products += 1;
        }
        for voucher in &self.vouchers {
            if let vouchers::Created::Created { .. } =
                vouchers::create(pool, voucher, &self.currency, "catalogue file").await?
            {
                report.vouchers_created += 1;
            }
        }
        for event in &self.events {
            if let Some(seating) = &event.seating {
                seating
                    .save(pool, &event.id)
                    .await
                    .with_context(|| format!("cannot store the seating of event {}", event.id))?;
            }
        }
        if !plan.schedules.is_empty() {
            let published = schedules::publish(pool, zone, now).await?;
            report.slots_published = published.created;
        }
        for room in &self.dining_rooms {
            tables::save_room(pool, room)
                .await
                .with_context(|| format!("cannot store dining room {}", room.id))?;
            tables::times::close_days(pool, zone, &room.id).await?;
            let today = zone.today(now);
            for ahead in 0..=i64::from(room.days_ahead) {
                report.times_published +=
                    tables::times::publish_day(pool, zone, &room.id, today + Duration::days(ahead))
                        .await?;
            }
        }
        Ok(report)
    }

    /// What the shop sells now, as a file: every collection, schedule,
    /// event with its tiers, product and voucher that is not archived,
    /// with absolute times in `zone`'s offset. A schedule's slots are its
    /// schedule's, not products of their own.
    pub async fn export(pool: &PgPool, zone: ShopZone) -> anyhow::Result<Self> {
        #[derive(sqlx::FromRow)]
        struct Row {
            id: String,
            kind: ProductKind,
            name: String,
            description: String,
            price_minor: i64,
            currency: String,
            starts_at: Option<DateTime<Utc>>,
            ends_at: Option<DateTime<Utc>>,
            collection: String,
            max_per_order: i32,
            sale_opens_at: Option<DateTime<Utc>>,
            sale_closes_at: Option<DateTime<Utc>>,
            hidden: bool,
            total: i32,
        }
        let products: Vec<Row> = sqlx::query_as(&format!(
            "select p.id, p.kind, p.name, p.description, p.price_minor, p.currency, p.starts_at, \
                    p.ends_at, p.collection, p.max_per_order, p.sale_opens_at, p.sale_closes_at, \
                    p.hidden, r.total \
               from products p join collections c on c.id = p.collection \
               join resources r on r.id = p.resource_id \
              where p.active and c.archived_at is null \
              order by {}",
            super::PAGE_ORDER
        ))
        .fetch_all(pool)
        .await?;
        let collections: Vec<CollectionEdit> = super::edit::collections(pool).await?;
        let schedules = schedules::schedules(pool).await?;
        let currency = products
            .first()
            .map(|p| p.currency.clone())
            .or_else(|| schedules.first().map(|s| s.currency.clone()))
            .unwrap_or_else(|| "eur".into());
        let mut file = CatalogueFile {
            currency,
            schedules: schedules.clone(),
            ..CatalogueFile::default()
        };
        for collection in &collections {
            let scheduled = schedules.iter().any(|s| s.collection == collection.id);
            let own: Vec<&Row> = products
                .iter()
                .filter(|p| p.collection == collection.id)
                .collect();
            match (collection.kind.sheet().in_file, scheduled) {
                (InFile::Events, _) => file.events.push(EventSpec {
                    id: collection.id.clone(),
                    title: collection.title.clone(),
                    lede: collection.lede.clone(),
                    when: When::absolute(collection.starts_at, zone),
                    doors_at: collection.doors_at.map(|at| iso(at, zone)),
                    ends_at: collection.ends_at.map(|at| iso(at, zone)),
                    lasts_minutes: None,
                    venue: collection.venue.clone(),
                    seating: seats::read(pool, &collection.id).await?,
                    tiers: own
                        .iter()
                        .filter(|p| p.kind.written_as_tier())
                        .map(|p| TierSpec {
                            id: p.id.clone(),
                            name: p.name.clone(),
                            description: p.description.clone(),
                            price_minor: p.price_minor,
                            capacity: i64::from(p.total),
                            max_per_order: p.max_per_order,
                            sale: SaleWindow::of(p.sale_opens_at, p.sale_closes_at, p.hidden, zone),
                        })
                        .collect(),
                }),
                // a schedule's slots are its schedule's
                (InFile::Products, true) => {}
                // a dining room's times are published from the room
                (InFile::DiningRooms, _) => {
                    file.dining_rooms
                        .extend(tables::read_room(pool, &collection.id).await?);
                }
                (InFile::Products, false) => {
                    file.collections.push(collection.clone());
                    file.products.extend(own.iter().map(|p| ProductSpec {
                        id: p.id.clone(),
                        collection: p.collection.clone(),
                        kind: p.kind,
                        name: p.name.clone(),
                        description: p.description.clone(),
                        price_minor: p.price_minor,
                        capacity: i64::from(p.total),
                        when: When::absolute(p.starts_at, zone),
                        ends_at: p.ends_at.map(|at| iso(at, zone)),
                        max_per_order: p.max_per_order,
                        sale: SaleWindow::of(p.sale_opens_at, p.sale_closes_at, p.hidden, zone),
                    }));
                }
            }
        }
        file.vouchers = vouchers::list(pool)
            .await?
            .into_iter()
            .filter(|v| !v.archived)
            .map(|v| NewVoucher {
                code: v.code.to_string(),
                percent_off: match v.discount {
                    vouchers::Discount::Percent { percent } => Some(percent),
                    _ => None,
                },
                amount_off_minor: match v.discount {
                    vouchers::Discount::PerOrder { minor }
                    | vouchers::Discount::PerUnit { minor } => Some(minor),
                    _ => None,
                },
                per_unit: matches!(v.discount, vouchers::Discount::PerUnit { .. }),
                currency: v.currency,
                uses: i64::from(v.uses),
                products: v.products,
                unlocks: v.unlocks,
                valid_from: v.valid_from,
                valid_until: v.valid_until,
                per_buyer: v.per_buyer,
            })
            .collect();
        // by code: the same catalogue is the same file, whenever each
        // voucher was made
        file.vouchers.sort_by(|a, b| a.code.cmp(&b.code));
        Ok(file)
    }
}
