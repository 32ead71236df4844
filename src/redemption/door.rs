//! What a door checks: an event, a day's pickup slots, or some tiers
//! (a check-in list). The door page starts by choosing one ([`choices`]);
//! the choice travels with every scan as plain fields ([`Checks`]) and is
//! read back into the products it admits ([`Checks::resolve`]), which
//! `hf_redeem` is told. The door's live count is what it checks: codes
//! admitted of codes expected ([`count`]).
//!
//! Which products carry codes, and what checks them (a door by event, a
//! counter by day, the host stand), is the kinds' (`product_kinds.code`
//! and `checked_by`), never a comparison of kinds here. A door counts and
//! admits items ([`crate::items`]), each of its own.

use chrono::{DateTime, NaiveDate, Utc};
use sqlx::{FromRow, PgPool};

use crate::clock::ShopZone;

/// Most tiers one check-in list names.
pub const MAX_TIERS: usize = 50;

/// What a door checks, as its page's fields carry it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Checks {
    /// Every tier of one event (a collection whose products' codes a door
    /// checks by event).
    Event(String),
    /// Every pickup slot that starts on one day, in the shop's zone (the
    /// products whose codes a counter checks by day).
    Day(NaiveDate),
    /// Some tiers or slots, by product id.
    Tiers(Vec<String>),
}

impl Checks {
    /// Read from a form's or a query's fields (`event`, `day`, `tier`
    /// repeated). `Ok(None)`: nothing chosen yet. A day that is not a date
    /// or too many tiers is refused with words for the page.
    pub fn from_fields<'a>(
        fields: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Option<Self>, &'static str> {
        let (mut event, mut day, mut tiers) = (None, None, Vec::new());
        for (name, value) in fields {
            let value = value.trim();
            if value.is_empty() {
                continue;
            }
            match name {
                "event" => event = Some(value.to_owned()),
                "day" => day = Some(value.to_owned()),
                "tier" => tiers.push(value.to_owned()),
                _ => {}
            }
        }
        if tiers.len() > MAX_TIERS {
            return Err("A check-in list names at most 50 tiers. Nothing was redeemed.");
        }
        match (event, day, tiers.is_empty()) {
            (Some(event), None, true) => Ok(Some(Checks::Event(event))),
            (None, Some(day), true) => NaiveDate::parse_from_str(&day, "%Y-%m-%d")
                .map(|day| Some(Checks::Day(day)))
                .map_err(|_| "The day is a date like 2026-12-20. Nothing was redeemed."),
            (None, None, false) => Ok(Some(Checks::Tiers(tiers))),
            (None, None, true) => Ok(None),
            _ => Err("Choose an event, a day or some tiers: one of them. Nothing was redeemed."),
        }
    }

    /// The fields that carry it, for the page's links and hidden inputs.
    pub fn fields(&self) -> Vec<(&'static str, String)> {
        match self {
            Checks::Event(id) => vec![("event", id.clone())],
            Checks::Day(day) => vec![("day", day.format("%Y-%m-%d").to_string())],
            Checks::Tiers(ids) => ids.iter().map(|id| ("tier", id.clone())).collect(),
        }
    }

    /// The products it admits, with a title for the door; `None` when it
    /// names nothing that carries codes (an unknown event, a day without
    /// slots).
    pub async fn resolve(&self, pool: &PgPool, zone: ShopZone) -> sqlx::Result<Option<Checked>> {
        #[derive(FromRow)]
        struct Admits {
            id: String,
            name: String,
            collection_title: String,
            starts_at: Option<DateTime<Utc>>,
        }
        let columns = "select p.id, p.name, c.title as collection_title, \
                              coalesce(p.starts_at, c.starts_at) as starts_at \
                         from products p join collections c on c.id = p.collection \
                         join product_kinds k on k.kind = p.kind";
        let rows: Vec<Admits> = match self {
            Checks::Event(id) => {
                sqlx::query_as(&format!(
                    "{columns} where p.collection = $1 and k.checked_by = 'event' \
                      order by p.position, p.id"
                ))
                .bind(id)
                .fetch_all(pool)
                .await?
            }
            Checks::Day(day) => {
                sqlx::query_as(&format!(
                    "{columns} where k.checked_by = 'day' \
                        and (p.starts_at at time zone $2)::date = $1 \
                      order by p.starts_at, p.id"
                ))
                .bind(day)
                .bind(zone.name())
                .fetch_all(pool)
                .await?
            }
            Checks::Tiers(ids) => {
                sqlx::query_as(&format!(
                    "{columns} where p.id = any ($1) and k.checked_by <> 'host_stand' \
                      order by c.position, p.position, p.starts_at, p.id"
                ))
                .bind(ids)
                .fetch_all(pool)
                .await?
            }
        };
        let Some(first) = rows.first() else {
            return Ok(None);
        };
        let title = match self {
            Checks::Event(_) => match first.starts_at {
                Some(at) => format!("{}, {}", first.collection_title, zone.short(at)),
                None => first.collection_title.clone(),
            },
            Checks::Day(day) => format!("Pickups on {}", day.format("%a %-d %b %Y")),
            Checks::Tiers(_) => rows
                .iter()
                .map(|row| row.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        };
        Ok(Some(Checked {
            title,
            products: rows.into_iter().map(|row| row.id).collect(),
        }))
    }
}

/// A door's checks, read: its title and the products it admits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checked {
    /// "Winter Jazz, Sun 20 Dec 19:30 CET", "Pickups on Fri 4 Dec 2026".
    pub title: String,
    pub products: Vec<String>,
}

/// A door's live count: codes of what it checks that were admitted, of
/// the codes that may be (paid, an item of it not refunded or cancelled).
/// A code two items share (a pickup's boxes at one slot) counts once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, FromRow)]
pub struct Count {
    pub admitted: i64,
    pub expected: i64,
}

/// The live count of a door that admits `products`.
pub async fn count(pool: &PgPool, products: &[String]) -> sqlx::Result<Count> {
    sqlx::query_as(
        "select count(distinct i.code) filter (where i.state = 'used') as admitted, \
                count(distinct i.code) as expected \
           from order_items i join orders o on o.id = i.order_id \
          where i.product_id = any ($1) and o.state = 'paid' \
            and i.state in ('valid', 'used')",
    )
    .bind(products)
    .fetch_one(pool)
    .await
}

/// What a door may choose to check.
#[derive(Debug, Clone, Default)]
pub struct Choices {
    /// Events whose tiers a door checks, soonest first: (id, "title,
    /// when").
    pub events: Vec<(String, String)>,
    /// Days with pickup slots, from yesterday on: (2026-12-04, "Fri 4 Dec").
    pub days: Vec<(String, String)>,
    /// Every tier, slot or shelf item a door or counter checks, for a
    /// check-in list: (its event, day or shelf, id, name).
    pub tiers: Vec<(String, String, String)>,
}

/// What a door may choose, from yesterday on (a door open past midnight
/// still finds its day).
pub async fn choices(pool: &PgPool, zone: ShopZone, now: DateTime<Utc>) -> sqlx::Result<Choices> {
    #[derive(FromRow)]
    struct Row {
        id: String,
        name: String,
        collection: String,
        collection_title: String,
        starts_at: Option<DateTime<Utc>>,
        /// `product_kinds.checked_by`: event, day or counter.
        checked_by: String,
    }
    let since = now - chrono::Duration::days(1);
    let rows: Vec<Row> = sqlx::query_as(
        "select p.id, p.name, p.collection, c.title as collection_title, \
                coalesce(p.starts_at, c.starts_at) as starts_at, k.checked_by \
           from products p join collections c on c.id = p.collection \
           join product_kinds k on k.kind = p.kind \
          where k.checked_by in ('event', 'day', 'counter') \
            and p.archived_at is null and c.archived_at is null \
            and (coalesce(p.starts_at, c.starts_at) is null \
                 or coalesce(p.starts_at, c.starts_at) >= $1) \
          order by coalesce(p.starts_at, c.starts_at) nulls last, c.position, p.position, p.id \
          limit 2000",
    )
    .bind(since)
    .fetch_all(pool)
    .await?;
    let mut choices = Choices::default();
    for row in &rows {
        let when = row.starts_at.map(|at| zone.short(at));
        let pickup = row.checked_by == "day";
        if pickup {
            if let Some(at) = row.starts_at {
                let day = zone.local(at).date_naive();
                let key = day.format("%Y-%m-%d").to_string();
                if !choices.days.iter().any(|(k, _)| *k == key) {
                    choices
                        .days
                        .push((key, day.format("%a %-d %b %Y").to_string()));
                }
            }
        } else if row.checked_by == "event"
            && !choices.events.iter().any(|(id, _)| *id == row.collection)
        {
            let label = match &when {
                Some(when) => format!("{}, {when}", row.collection_title),
                None => row.collection_title.clone(),
            };
            choices.events.push((row.collection.clone(), label));
        }
        // a tier under its event and when, a slot under its day, an item
        // under its shelf
        let group = match (&when, row.starts_at) {
            (_, Some(at)) if pickup => format!(
                "{}, {}",
                row.collection_title,
                zone.local(at).date_naive().format("%a %-d %b %Y")
            ),
            (Some(when), _) if row.checked_by == "event" => {
                format!("{}, {when}", row.collection_title)
            }
            _ => row.collection_title.clone(),
        };
        choices
            .tiers
            .push((group, row.id.clone(), row.name.clone()));
    }
    Ok(choices)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_door_chooses_one_thing_to_check() {
        assert_eq!(Checks::from_fields([]), Ok(None));
        assert_eq!(
            Checks::from_fields([("event", "winter-jazz"), ("code", "x")]),
            Ok(Some(Checks::Event("winter-jazz".into())))
        );
        assert_eq!(
            Checks::from_fields([("day", "2026-12-20")]),
            Ok(Some(Checks::Day(
                NaiveDate::from_ymd_opt(2026, 12, 20).unwrap()
            )))
        );
        assert_eq!(
            Checks::from_fields([("tier", "a"), ("tier", " b "), ("tier", "")]),
            Ok(Some(Checks::Tiers(vec!["a".into(), "b".into()])))
        );
        assert!(Checks::from_fields([("day", "20 Dec")]).is_err());
        assert!(Checks::from_fields([("event", "a"), ("day", "2026-12-20")]).is_err());
        let many: Vec<(&str, &str)> = (0..51).map(|_| ("tier", "a")).collect();
        assert!(Checks::from_fields(many).is_err());
        let day = Checks::Day(NaiveDate::from_ymd_opt(2026, 12, 4).unwrap());
        assert_eq!(day.fields(), [("day", "2026-12-04".to_owned())]);
    }
}
