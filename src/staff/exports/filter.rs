//! What an export covers: the filter as the form or the query string sends
//! it ([`FilterForm`]), read into an [`ExportFilter`] (a product or a
//! collection, the order's state, the days paid and the days the product
//! starts, in the shop's zone), its words for Activity and the pages, its
//! file name, and the bound parameters every export query takes. The names
//! a filter gives are checked before anything is read, and the export is
//! recorded in Activity with who asked.

use chrono::{DateTime, Datelike, NaiveDate, NaiveTime, Utc};
use serde_json::json;
use sqlx::PgPool;

use super::{ExportError, invalid};
use crate::audit::{self, Actor};
use crate::checkout::OrderState;
use crate::clock::ShopZone;

/// The filter as the exports form sends it: every field optional, empty
/// the same as absent.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FilterForm {
    pub product: Option<String>,
    pub collection: Option<String>,
    pub state: Option<String>,
    pub paid_from: Option<String>,
    pub paid_to: Option<String>,
    pub starts_from: Option<String>,
    pub starts_to: Option<String>,
}

impl FilterForm {
    /// The filter from a query string (`?collection=harbour-lights&state=paid`):
    /// the first value of each field; other fields are not the filter's.
    pub fn from_query(query: &str) -> Self {
        let mut form = Self::default();
        for (name, value) in form_urlencoded::parse(query.as_bytes()) {
            let field = match name.as_ref() {
                "product" => &mut form.product,
                "collection" => &mut form.collection,
                "state" => &mut form.state,
                "paid_from" => &mut form.paid_from,
                "paid_to" => &mut form.paid_to,
                "starts_from" => &mut form.starts_from,
                "starts_to" => &mut form.starts_to,
                _ => continue,
            };
            if field.is_none() {
                *field = Some(value.into_owned());
            }
        }
        form
    }

    /// Whether any field was given at all (even empty): a form sent, not a
    /// page opened.
    pub fn sent(&self) -> bool {
        [
            &self.product,
            &self.collection,
            &self.state,
            &self.paid_from,
            &self.paid_to,
            &self.starts_from,
            &self.starts_to,
        ]
        .iter()
        .any(|field| field.is_some())
    }
}

/// Days, both included, in the shop's zone.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Days {
    pub from: Option<NaiveDate>,
    pub to: Option<NaiveDate>,
}

impl Days {
    /// The days between two fields of the form, `what` being how the form
    /// names them ("Paid", "Starts"): each a date written 2026-12-01, the
    /// first not after the last.
    fn parse(from: &Option<String>, to: &Option<String>, what: &str) -> Result<Self, ExportError> {
        let day = |value: &Option<String>, end: &str| -> Result<Option<NaiveDate>, ExportError> {
            let Some(text) = given(value) else {
                return Ok(None);
            };
            match NaiveDate::parse_from_str(text, "%Y-%m-%d") {
                Ok(day) if (1900..=9999).contains(&day.year()) => Ok(Some(day)),
                Ok(_) => Err(invalid(format!(
                    "{what} {end}: {} is not a year the shop sells in.",
                    quoted(text)
                ))),
                Err(_) => Err(invalid(format!(
                    "{what} {end}: {} is not a date. Write it as 2026-12-01.",
                    quoted(text)
                ))),
            }
        };
        let days = Self {
            from: day(from, "from")?,
            to: day(to, "to")?,
        };
        if let (Some(from), Some(to)) = (days.from, days.to)
            && from > to
        {
            return Err(invalid(format!(
                "{what} from {from} is after {what} to {to}: the first day comes first.",
                what = what.to_lowercase()
            )));
        }
        Ok(days)
    }

    /// The moment the first day begins here.
    fn start(&self, zone: ShopZone) -> Option<DateTime<Utc>> {
        self.from.map(|day| day_starts(zone, day))
    }

    /// The moment the day after the last begins here (the window's end,
    /// not in it).
    fn end(&self, zone: ShopZone) -> Option<DateTime<Utc>> {
        self.to
            .and_then(|day| day.succ_opt())
            .map(|day| day_starts(zone, day))
    }

    fn words(&self) -> Option<String> {
        match (self.from, self.to) {
            (None, None) => None,
            (Some(from), None) => Some(format!("from {from}")),
            (None, Some(to)) => Some(format!("to {to}")),
            (Some(from), Some(to)) if from == to => Some(format!("on {from}")),
            (Some(from), Some(to)) => Some(format!("{from} to {to}")),
        }
    }
}

/// When a day begins in the zone: midnight, or the first moment after it
/// where the clocks skip midnight (some zones change at 00:00).
pub(super) fn day_starts(zone: ShopZone, day: NaiveDate) -> DateTime<Utc> {
    (0..=3)
        .find_map(|hour| zone.at(day, NaiveTime::from_hms_opt(hour, 0, 0)?).ok())
        .unwrap_or_else(|| day.and_time(NaiveTime::MIN).and_utc())
}

pub(super) fn given(value: &Option<String>) -> Option<&str> {
    value.as_deref().map(str::trim).filter(|v| !v.is_empty())
}

/// Someone's input, quoted as a message shows it: in quotes, control
/// characters escaped, cut after 40 characters.
pub(super) fn quoted(text: &str) -> String {
    let mut shown: String = text.chars().take(40).collect();
    if shown.len() < text.len() {
        shown.push('…');
    }
    format!("{shown:?}")
}

/// What an export covers. Everything given must hold: a product (or a
/// collection: an event's tiers, a bakery's slots), the order's state, the
/// days it was paid on and the days the product starts on, in the shop's
/// zone.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExportFilter {
    pub product: Option<String>,
    pub collection: Option<String>,
    pub state: Option<OrderState>,
    pub paid: Days,
    pub starts: Days,
}

impl ExportFilter {
    pub fn parse(form: &FilterForm) -> Result<Self, ExportError> {
        let short = |value: &Option<String>, what: &str| -> Result<Option<String>, ExportError> {
            match given(value) {
                Some(text) if text.chars().count() > 200 => Err(invalid(format!(
                    "No {what} has a name that long: {}",
                    quoted(text)
                ))),
                other => Ok(other.map(str::to_owned)),
            }
        };
        let state = match given(&form.state) {
            None => None,
            Some(name) => Some(OrderState::parse(name).ok_or_else(|| {
                let states: Vec<&str> = OrderState::ALL.iter().map(|s| s.as_str()).collect();
                invalid(format!(
                    "Order state: {} is not one; an order is {}.",
                    quoted(name),
                    states.join(", ")
                ))
            })?),
        };
        Ok(Self {
            product: short(&form.product, "product")?,
            collection: short(&form.collection, "event or shop part")?,
            state,
            paid: Days::parse(&form.paid_from, &form.paid_to, "Paid")?,
            starts: Days::parse(&form.starts_from, &form.starts_to, "Starts")?,
        })
    }

    /// Whether it names what a door lets in: a product or a collection.
    pub fn names_a_sale(&self) -> bool {
        self.product.is_some() || self.collection.is_some()
    }

    /// "collection harbour-lights, paid 2026-12-01 to 2026-12-31", or
    /// "everything": how Activity and the pages say it.
    pub fn words(&self) -> String {
        let mut parts = Vec::new();
        if let Some(collection) = &self.collection {
            parts.push(format!("collection {collection}"));
        }
        if let Some(product) = &self.product {
            parts.push(format!("product {product}"));
        }
        if let Some(state) = self.state {
            parts.push(format!("state {state}"));
        }
        if let Some(days) = self.paid.words() {
            parts.push(format!("paid {days}"));
        }
        if let Some(days) = self.starts.words() {
            parts.push(format!("starts {days}"));
        }
        if parts.is_empty() {
            "everything".to_owned()
        } else {
            parts.join(", ")
        }
    }

    /// The filter, as Activity's detail keeps it.
    fn detail(&self) -> serde_json::Value {
        let day = |d: Option<NaiveDate>| d.map(|d| d.to_string());
        json!({
            "product": self.product,
            "collection": self.collection,
            "state": self.state.map(|s| s.as_str()),
            "paid_from": day(self.paid.from),
            "paid_to": day(self.paid.to),
            "starts_from": day(self.starts.from),
            "starts_to": day(self.starts.to),
        })
    }

    /// The download's name: `attendees-harbour-lights-paid-2026-12-01-to-2026-12-31.csv`.
    pub fn filename(&self, what: &str) -> String {
        let mut parts = vec![what.to_owned()];
        parts.extend(self.collection.clone());
        parts.extend(self.product.clone());
        parts.extend(self.state.map(|s| s.as_str().to_owned()));
        if let Some(days) = self.paid.words() {
            parts.push(format!("paid {days}"));
        }
        if let Some(days) = self.starts.words() {
            parts.push(format!("starts {days}"));
        }
        if parts.len() == 1 {
            parts.push("all".to_owned());
        }
        // letters, digits, underscores and dashes: safe in a header and on any disk
        let mut name = String::new();
        for c in parts.join("-").chars() {
            let c = if c.is_ascii_alphanumeric() || c == '_' {
                c.to_ascii_lowercase()
            } else {
                '-'
            };
            if !(c == '-' && (name.is_empty() || name.ends_with('-'))) {
                name.push(c);
            }
        }
        let name: String = name.trim_end_matches('-').chars().take(150).collect();
        format!("{name}.csv")
    }

    /// The bound parameters every export query takes, in order: $1 state,
    /// $2 and $3 paid from and before, $4 product, $5 collection, $6 and $7
    /// starts from and before.
    pub(super) fn bind(&self, zone: ShopZone, sql: &'static str) -> PgQuery {
        sqlx::query(sql)
            .bind(self.state.map(|s| s.as_str()))
            .bind(self.paid.start(zone))
            .bind(self.paid.end(zone))
            .bind(self.product.clone())
            .bind(self.collection.clone())
            .bind(self.starts.start(zone))
            .bind(self.starts.end(zone))
    }
}

pub(super) type PgQuery = sqlx::query::Query<'static, sqlx::Postgres, sqlx::postgres::PgArguments>;

/// The product and collection a filter names exist (a typo is told, not
/// answered with an empty file).
pub(super) async fn check_names(pool: &PgPool, filter: &ExportFilter) -> Result<(), ExportError> {
    if let Some(product) = &filter.product {
        let collection: Option<String> =
            sqlx::query_scalar("select collection from products where id = $1")
                .bind(product)
                .fetch_optional(pool)
                .await?;
        match (collection, &filter.collection) {
            (None, _) => {
                return Err(ExportError::NotFound(format!(
                    "The shop has no product, tier or slot {}.",
                    quoted(product)
                )));
            }
            (Some(its), Some(asked)) if &its != asked => {
                let (product, its, asked) = (quoted(product), quoted(&its), quoted(asked));
                return Err(invalid(format!(
                    "{product} is part of {its}, not of {asked}: choose {its}, or any event \
                     or shop part."
                )));
            }
            _ => {}
        }
    }
    if let Some(collection) = &filter.collection {
        let known: bool = sqlx::query_scalar(
            "select exists (select 1 from collections where id = $1) \
                 or exists (select 1 from products where collection = $1)",
        )
        .bind(collection)
        .fetch_one(pool)
        .await?;
        if !known {
            return Err(ExportError::NotFound(format!(
                "The shop has no event or shop part {}.",
                quoted(collection)
            )));
        }
    }
    Ok(())
}

/// Writes the export into Activity: who, what, which filter. Before the
/// first row is read, so no export goes unrecorded.
pub(super) async fn record_export(
    pool: &PgPool,
    by: Actor<'_>,
    action: &str,
    filter: &ExportFilter,
) -> Result<(), ExportError> {
    let words = filter.words();
    let mut detail = filter.detail();
    // the role it was made under: a member's role may change later (a
    // key's scopes are in its own record)
    if let Actor::Staff(member) = by {
        detail["role"] = json!(member.role);
    }
    audit::commit(pool.begin().await?, by, action, &words, "started", detail).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::csv::moment;
    use super::*;

    fn form(pairs: &[(&str, &str)]) -> FilterForm {
        let mut form = FilterForm::default();
        for (name, value) in pairs {
            let value = Some((*value).to_owned());
            match *name {
                "product" => form.product = value,
                "collection" => form.collection = value,
                "state" => form.state = value,
                "paid_from" => form.paid_from = value,
                "paid_to" => form.paid_to = value,
                "starts_from" => form.starts_from = value,
                "starts_to" => form.starts_to = value,
                other => panic!("{other}"),
            }
        }
        form
    }

    #[test]
    fn filters_read_as_the_form_sends_them() {
        let empty = ExportFilter::parse(&form(&[("product", " "), ("state", "")])).unwrap();
        assert_eq!(empty, ExportFilter::default());
        assert_eq!(empty.words(), "everything");
        assert_eq!(empty.filename("orders"), "orders-all.csv");
        let filter = ExportFilter::parse(&form(&[
            ("collection", "harbour-lights"),
            ("state", "paid"),
            ("paid_from", "2026-12-01"),
            ("paid_to", "2026-12-31"),
            ("starts_from", "2026-12-14"),
            ("starts_to", "2026-12-14"),
        ]))
        .unwrap();
        assert_eq!(
            filter.words(),
            "collection harbour-lights, state paid, paid 2026-12-01 to 2026-12-31, starts on 2026-12-14"
        );
        assert_eq!(
            filter.filename("attendees"),
            "attendees-harbour-lights-paid-paid-2026-12-01-to-2026-12-31-starts-on-2026-12-14.csv"
        );
        assert!(filter.names_a_sale());
        let odd = ExportFilter::parse(&form(&[("product", "Zoë's \"box\"/..\r\n")])).unwrap();
        assert_eq!(odd.filename("orders"), "orders-zo-s-box.csv");
        for bad in [
            form(&[("state", "lost")]),
            form(&[("paid_from", "1 December")]),
            form(&[("starts_from", "2026-12-02"), ("starts_to", "2026-12-01")]),
        ] {
            assert!(matches!(
                ExportFilter::parse(&bad),
                Err(ExportError::InvalidInput(_))
            ));
        }
    }

    #[test]
    fn days_are_whole_days_in_the_shops_zone() {
        let berlin = ShopZone::parse("Europe/Berlin").unwrap();
        let days = Days::parse(
            &Some("2027-03-28".into()),
            &Some("2027-03-28".into()),
            "paid",
        )
        .unwrap();
        // the night the clocks spring forward: 23 hours long
        assert_eq!(
            days.start(berlin).unwrap().to_rfc3339(),
            "2027-03-27T23:00:00+00:00"
        );
        assert_eq!(
            days.end(berlin).unwrap().to_rfc3339(),
            "2027-03-28T22:00:00+00:00"
        );
        // a zone whose clocks skip midnight: the day begins at 01:00
        let santiago = ShopZone::parse("America/Santiago").unwrap();
        let skipped = NaiveDate::from_ymd_opt(2024, 9, 8).unwrap();
        assert_eq!(santiago.time(day_starts(santiago, skipped)), "01:00 -03");
        assert_eq!(
            moment(berlin, days.start(berlin)),
            "2027-03-28 00:00:00+01:00"
        );
    }
}
