//! A seated event's plan as the catalogue file gives it (docs/catalogue.md,
//! "Seated events"): price categories, and sections each sold at a
//! category's price with rows in the compact form (row "C", seats 1 to 24,
//! an aisle after 12; wheelchair and companion places; seats blocked).
//! Everything is checked here, with words that name the place, before
//! anything is written; the database then makes the seats in each
//! section's lock (`hf_seat_plan`), keeping seats held or sold.

use std::collections::HashSet;

use anyhow::Context;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sqlx::PgPool;

use crate::catalogue::edit::{DEFAULT_MAX_PER_ORDER, ProductEdit};
use crate::catalogue::kinds::ProductKind;

fn default_max_per_order() -> i32 {
    DEFAULT_MAX_PER_ORDER
}

fn default_colour() -> String {
    "#2f6f4f".into()
}

/// An event's seating: its price categories and its sections.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SeatingSpec {
    pub categories: Vec<CategorySpec>,
    pub sections: Vec<SectionSpec>,
}

/// What a section is sold at: a name, a price and its colour on the map.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CategorySpec {
    pub id: String,
    pub name: String,
    pub price_minor: i64,
    #[serde(default = "default_colour")]
    pub colour: String,
}

/// A section: a product of the kind seat, its rows listed from the stage
/// back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SectionSpec {
    /// Its product's id (`winter-gala-stalls`).
    pub id: String,
    pub name: String,
    /// A category of the event's `categories`.
    pub category: String,
    #[serde(default = "default_max_per_order")]
    pub max_per_order: i32,
    pub rows: Vec<RowSpec>,
    /// Seats not sold (a camera position, a broken seat), by label ("C-5").
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub blocked: Vec<String>,
}

/// One row in the compact form: `{"row": "C", "seats": [1, 24],
/// "aisles_after": [12]}`. Its seats are labelled "C-1" to "C-24".
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RowSpec {
    pub row: String,
    /// The first and the last seat's numbers.
    pub seats: [i32; 2],
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub aisles_after: Vec<i32>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub wheelchair: Vec<i32>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub companion: Vec<i32>,
}

fn id_shape(id: &str) -> bool {
    let mut bytes = id.bytes();
    bytes
        .next()
        .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        && bytes.all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && id.len() <= 100
}

fn row_shape(row: &str) -> bool {
    let mut chars = row.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
        && chars.all(|c| c.is_ascii_alphanumeric() || " ._-".contains(c))
        && row.len() <= 12
}

impl RowSpec {
    /// The row's seat labels, first to last.
    fn labels(&self) -> impl Iterator<Item = String> + '_ {
        (self.seats[0]..=self.seats[1]).map(|n| format!("{}-{n}", self.row))
    }

    pub(super) fn check(&self) -> Result<(), String> {
        let [first, last] = self.seats;
        if !row_shape(&self.row) {
            return Err(format!(
                "row {:?}: a row is named by a letter or digit first, at most 12 characters",
                self.row
            ));
        }
        if !(0..=9999).contains(&first) || last < first || last - first >= 1000 {
            return Err(format!(
                "row {}: seats are [first, last], numbers 0 to 9999, first not after last, \
                 at most 1,000 seats",
                self.row
            ));
        }
        for (what, numbers) in [
            ("aisles_after", &self.aisles_after),
            ("wheelchair", &self.wheelchair),
            ("companion", &self.companion),
        ] {
            if let Some(n) = numbers.iter().find(|n| !(first..=last).contains(*n)) {
                return Err(format!(
                    "row {}: {what} names seat {n}, but the row's seats are {first} to {last}",
                    self.row
                ));
            }
        }
        if let Some(n) = self.wheelchair.iter().find(|n| self.companion.contains(n)) {
            return Err(format!(
                "row {}: seat {n} is a wheelchair place and a companion seat; it is one",
                self.row
            ));
        }
        Ok(())
    }
}

impl SectionSpec {
    /// Seats on sale from the file: the plan's, less those blocked.
    pub fn open_seats(&self) -> i64 {
        let all: i64 = self
            .rows
            .iter()
            .map(|r| i64::from(r.seats[1] - r.seats[0] + 1))
            .sum();
        all - self.blocked.len() as i64
    }

    fn check(&self, categories: &[CategorySpec]) -> Result<(), String> {
        if !id_shape(&self.id) {
            return Err("a section's id is lower-case letters, digits and -".into());
        }
        if self.name.trim().is_empty() || self.name.len() > 100 {
            return Err("a section's name is 1 to 100 characters".into());
        }
        if !categories.iter().any(|c| c.id == self.category) {
            return Err(format!(
                "category {:?} is not one of the event's categories",
                self.category
            ));
        }
        if !(1..=999).contains(&self.rows.len()) {
            return Err("a section has 1 to 999 rows".into());
        }
        let mut rows = HashSet::new();
        for row in &self.rows {
            row.check()?;
            if !rows.insert(row.row.as_str()) {
                return Err(format!("row {} is given twice", row.row));
            }
        }
        let labels: HashSet<String> = self.rows.iter().flat_map(RowSpec::labels).collect();
        let mut blocked = HashSet::new();
        for label in &self.blocked {
            if !labels.contains(label) {
                return Err(format!("blocked seat {label:?} is not in the plan"));
            }
            if !blocked.insert(label) {
                return Err(format!("blocked seat {label} is given twice"));
            }
        }
        if self.open_seats() < 1 {
            return Err("a section sells at least one seat".into());
        }
        Ok(())
    }

    /// Its rows as `hf_seat_plan` takes them, ranked from the stage back.
    fn rows_json(&self) -> serde_json::Value {
        serde_json::Value::Array(
            self.rows
                .iter()
                .enumerate()
                .map(|(i, r)| {
                    serde_json::json!({
                        "row": r.row, "rank": i + 1, "seats": r.seats,
                        "aisles_after": r.aisles_after, "wheelchair": r.wheelchair,
                        "companion": r.companion,
                    })
                })
                .collect(),
        )
    }
}

impl SeatingSpec {
    /// Every category and section checked, each refusal naming where.
    pub fn check(&self) -> Result<(), String> {
        if self.categories.is_empty() || self.sections.is_empty() {
            return Err("seating has at least one category and one section".into());
        }
        let mut ids = HashSet::new();
        for c in &self.categories {
            let bad = if !id_shape(&c.id) {
                Some("its id is lower-case letters, digits and -")
            } else if c.name.trim().is_empty() || c.name.len() > 100 {
                Some("its name is 1 to 100 characters")
            } else if c.price_minor < 0 {
                Some("its price is zero or more")
            } else if !(c.colour.len() == 7
                && c.colour.starts_with('#')
                && c.colour[1..]
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
            {
                Some("its colour is like #2f6f4f")
            } else if !ids.insert(c.id.as_str()) {
                Some("it is given twice")
            } else {
                None
            };
            if let Some(bad) = bad {
                return Err(format!("category {:?}: {bad}", c.id));
            }
        }
        let mut sections = HashSet::new();
        for s in &self.sections {
            s.check(&self.categories)
                .map_err(|e| format!("section {:?}: {e}", s.id))?;
            if !sections.insert(s.id.as_str()) {
                return Err(format!("section {:?} is given twice", s.id));
            }
        }
        Ok(())
    }

    /// The sections as products of the event `event` (kind seat), sold at
    /// their category's price, their capacity the seats on sale.
    pub fn products(
        &self,
        event: &str,
        starts_at: Option<DateTime<Utc>>,
        ends_at: Option<DateTime<Utc>>,
        currency: &str,
    ) -> Vec<ProductEdit> {
        self.sections
            .iter()
            .map(|s| ProductEdit {
                id: s.id.clone(),
                collection: event.to_owned(),
                kind: ProductKind::Seat,
                name: s.name.clone(),
                description: String::new(),
                price_minor: self
                    .categories
                    .iter()
                    .find(|c| c.id == s.category)
                    .map_or(0, |c| c.price_minor),
                currency: currency.to_owned(),
                capacity: s.open_seats(),
                starts_at,
                ends_at,
                max_per_order: s.max_per_order,
                sale_opens_at: None,
                sale_closes_at: None,
                hidden: false,
                position: None,
            })
            .collect()
    }

    /// The categories, sections and seats of the event `event`, its
    /// sections' products written already: each section's plan made in
    /// its lock, then its blocked seats blocked. A plan that drops a seat
    /// held or sold is refused, naming it.
    pub async fn save(&self, pool: &PgPool, event: &str) -> anyhow::Result<()> {
        for (position, c) in self.categories.iter().enumerate() {
            sqlx::query(
                "insert into seat_categories (collection, id, name, colour, price_minor, position) \
                 values ($1, $2, $3, $4, $5, $6) \
                 on conflict (collection, id) do update \
                    set name = excluded.name, colour = excluded.colour, \
                        price_minor = excluded.price_minor, position = excluded.position",
            )
            .bind(event)
            .bind(&c.id)
            .bind(c.name.trim())
            .bind(&c.colour)
            .bind(c.price_minor)
            .bind(position as i32)
            .execute(pool)
            .await?;
        }
        for (position, s) in self.sections.iter().enumerate() {
            self.save_section(pool, event, s, position as i32)
                .await
                .with_context(|| format!("section {}", s.id))?;
        }
        Ok(())
    }

    async fn save_section(
        &self,
        pool: &PgPool,
        event: &str,
        s: &SectionSpec,
        position: i32,
    ) -> anyhow::Result<()> {
        #[derive(sqlx::FromRow)]
        struct Made {
            status: String,
            refused: Option<Vec<String>>,
        }
        sqlx::query(
            "insert into seat_sections (product_id, resource_id, collection, category, name, \
                                        position) \
             select p.id, p.resource_id, $2, $3, $4, $5 from products p where p.id = $1 \
             on conflict (product_id) do update \
                set category = excluded.category, name = excluded.name, \
                    position = excluded.position",
        )
        .bind(&s.id)
        .bind(event)
        .bind(&s.category)
        .bind(s.name.trim())
        .bind(position)
        .execute(pool)
        .await?;
        let made: Made = sqlx::query_as("select status, refused from hf_seat_plan($1, $2)")
            .bind(&s.id)
            .bind(s.rows_json())
            .fetch_one(pool)
            .await?;
        if made.status != "changed" {
            anyhow::bail!(
                "the plan drops seats held or sold: {}",
                made.refused.unwrap_or_default().join(", ")
            );
        }
        if !s.blocked.is_empty() {
            let blocked: Made = sqlx::query_as(
                "select status, refused from hf_seat_set_state($1, $2, 'blocked', \
                                                               'blocked in the catalogue file')",
            )
            .bind(&s.id)
            .bind(&s.blocked)
            .fetch_one(pool)
            .await?;
            if blocked.status != "changed" {
                anyhow::bail!(
                    "seats held or sold cannot be blocked: {}",
                    blocked.refused.unwrap_or_default().join(", ")
                );
            }
        }
        Ok(())
    }
}

/// The seating of the event `event` as the file writes it (`None`: not
/// seated): the plan read back into the compact form, blocked seats by
/// label, whether the file or staff blocked them (a seat off the plan is
/// not in it; seats held back are the house's, not the plan's).
pub async fn read(pool: &PgPool, event: &str) -> anyhow::Result<Option<SeatingSpec>> {
    #[derive(sqlx::FromRow)]
    struct Category {
        id: String,
        name: String,
        price_minor: i64,
        colour: String,
    }
    #[derive(sqlx::FromRow)]
    struct Seat {
        section: String,
        section_name: String,
        category: String,
        max_per_order: i32,
        label: String,
        row_label: String,
        number: i32,
        run: i32,
        access: String,
        blocked: bool,
    }
    let categories: Vec<Category> = sqlx::query_as(
        "select id, name, price_minor, colour from seat_categories \
          where collection = $1 order by position, id",
    )
    .bind(event)
    .fetch_all(pool)
    .await?;
    let seats: Vec<Seat> = sqlx::query_as(
        "select x.product_id as section, x.name as section_name, x.category, p.max_per_order, \
                s.label, s.row_label, s.number, s.run, s.access, \
                s.state = 'blocked' as blocked \
           from seat_sections x join products p on p.id = x.product_id \
           join seats s on s.section = x.product_id \
          where x.collection = $1 and p.active and s.note <> 'off the plan' \
          order by x.position, x.product_id, s.row_rank, s.run, s.pos",
    )
    .bind(event)
    .fetch_all(pool)
    .await?;
    if categories.is_empty() || seats.is_empty() {
        return Ok(None);
    }
    let mut sections: Vec<SectionSpec> = Vec::new();
    let mut last_run = None;
    for seat in seats {
        if sections.last().is_none_or(|s| s.id != seat.section) {
            sections.push(SectionSpec {
                id: seat.section.clone(),
                name: seat.section_name.clone(),
                category: seat.category.clone(),
                max_per_order: seat.max_per_order,
                rows: Vec::new(),
                blocked: Vec::new(),
            });
        }
        let section = sections.last_mut().expect("pushed");
        if section.rows.last().is_none_or(|r| r.row != seat.row_label) {
            section.rows.push(RowSpec {
                row: seat.row_label.clone(),
                seats: [seat.number, seat.number],
                aisles_after: Vec::new(),
                wheelchair: Vec::new(),
                companion: Vec::new(),
            });
            last_run = None;
        }
        let row = section.rows.last_mut().expect("pushed");
        if last_run.is_some_and(|run| run != seat.run) {
            row.aisles_after.push(row.seats[1]);
        }
        last_run = Some(seat.run);
        row.seats[1] = seat.number;
        match seat.access.as_str() {
            "wheelchair" => row.wheelchair.push(seat.number),
            "companion" => row.companion.push(seat.number),
            _ => {}
        }
        if seat.blocked {
            section.blocked.push(seat.label);
        }
    }
    Ok(Some(SeatingSpec {
        categories: categories
            .into_iter()
            .map(|c| CategorySpec {
                id: c.id,
                name: c.name,
                price_minor: c.price_minor,
                colour: c.colour,
            })
            .collect(),
        sections,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(json: serde_json::Value) -> SeatingSpec {
        serde_json::from_value(json).unwrap()
    }

    fn hall() -> serde_json::Value {
        serde_json::json!({
            "categories": [{ "id": "front", "name": "Front", "price_minor": 4500, "colour": "#2f6f4f" }],
            "sections": [{
                "id": "gala-stalls", "name": "Stalls", "category": "front",
                "rows": [
                    { "row": "A", "seats": [1, 12], "aisles_after": [6], "wheelchair": [1] },
                    { "row": "B", "seats": [1, 12], "aisles_after": [6] }
                ],
                "blocked": ["B-12"]
            }]
        })
    }

    #[test]
    fn a_compact_plan_counts_its_seats_on_sale() {
        let hall = spec(hall());
        assert_eq!(hall.check(), Ok(()));
        assert_eq!(hall.sections[0].open_seats(), 23);
        let products = hall.products("gala", None, None, "eur");
        assert_eq!(products[0].capacity, 23);
        assert_eq!(products[0].price_minor, 4500);
        assert_eq!(products[0].kind, ProductKind::Seat);
        assert_eq!(hall.sections[0].rows_json()[1]["rank"], 2);
    }

    #[test]
    fn a_bad_plan_is_refused_naming_where() {
        let cases = [
            (
                "/sections/0/category",
                serde_json::json!("back"),
                "section \"gala-stalls\": category \"back\" is not one of the event's categories",
            ),
            (
                "/sections/0/rows/0/seats",
                serde_json::json!([12, 1]),
                "section \"gala-stalls\": row A: seats are [first, last], numbers 0 to 9999, first not after last, at most 1,000 seats",
            ),
            (
                "/sections/0/rows/0/aisles_after",
                serde_json::json!([13]),
                "section \"gala-stalls\": row A: aisles_after names seat 13, but the row's seats are 1 to 12",
            ),
            (
                "/sections/0/rows/1/row",
                serde_json::json!("A"),
                "section \"gala-stalls\": row A is given twice",
            ),
            (
                "/sections/0/blocked",
                serde_json::json!(["C-1"]),
                "section \"gala-stalls\": blocked seat \"C-1\" is not in the plan",
            ),
            (
                "/categories/0/colour",
                serde_json::json!("green"),
                "category \"front\": its colour is like #2f6f4f",
            ),
        ];
        for (path, value, words) in cases {
            let mut json = hall();
            *json.pointer_mut(path).unwrap() = value;
            assert_eq!(spec(json).check(), Err(words.to_owned()), "{path}");
        }
    }
}
