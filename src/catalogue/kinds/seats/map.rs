//! A seated section as the shop shows it: its head (name, event, category,
//! colour, price) and every seat with its place and state, free, taken
//! (held or sold) or blocked (off sale), as the database holds them now.
//! The shop's memory keeps these for every section (`crate::live`, read
//! here for many sections at once) and the pages read memory; these reads
//! answer when memory may not be believed; and the frame a section's map
//! is drawn in, for the shop's map and the admin's plan alike. Reads
//! only: nothing here decides a seat.

use serde::Serialize;
use sqlx::PgPool;

/// What a section's map and the API say of it beside its seats.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct SectionHead {
    pub product_id: String,
    pub resource_id: String,
    pub name: String,
    /// Its event (a collection) and the event's title.
    pub event: String,
    pub event_title: String,
    /// Its category's id and name, and its colour on the map.
    pub category_id: String,
    pub category: String,
    pub colour: String,
    pub price_minor: i64,
    pub currency: String,
    pub max_per_order: i32,
    /// Its chooser is the baseline `first_fit` (`seat_sections.chooser`).
    pub first_fit: bool,
    /// The middle of its seats' width (every seat's, free or not), as the
    /// chooser measures "nearest the middle".
    pub middle: f64,
}

/// A seat's state as a shopper sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SeatState {
    Free,
    /// Held by a shopper paying, or sold.
    Taken,
    /// Off sale: blocked or held back by staff.
    Blocked,
}

/// A seat as the map draws it and the API lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeatShown {
    pub id: i64,
    pub label: String,
    pub row_label: String,
    pub number: i32,
    pub x: i32,
    pub y: i32,
    /// `none`, `wheelchair` or `companion`.
    pub access: String,
    pub state: SeatState,
    /// Where it stands for the chooser: its row from the stage, its run of
    /// seats next to each other, and its place in the run.
    pub row_rank: i32,
    pub run: i32,
    pub pos: i32,
}

/// A section's seats, from the stage back, as of one version of its
/// resource row (its `xmin`): every change to a seat's state is made in a
/// transaction that writes its section's resource (a pin with its hold's
/// counters, a staff edit with the section's total), so an unchanged
/// version is unchanged seats.
#[derive(Debug, Clone, PartialEq)]
pub struct SectionSeats {
    pub head: SectionHead,
    pub seats: Vec<SeatShown>,
    pub version: String,
}

impl SectionSeats {
    /// Seats free now.
    pub fn free(&self) -> usize {
        self.seats
            .iter()
            .filter(|s| s.state == SeatState::Free)
            .count()
    }
}

/// Where a section's map is drawn around its seats: the SVG's view box,
/// with room for the stage above the seats and the rows' labels at their
/// left, and where those two go. The shop's map and the admin's seat plan
/// both draw in it; their pages only render it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapFrame {
    /// The SVG's `viewBox`: "min-x min-y width height".
    pub view: String,
    /// Where the rows' labels stand.
    pub label_x: i32,
    /// Where the stage's word stands: above the middle of the seats.
    pub stage_x: i32,
    pub stage_y: i32,
}

impl MapFrame {
    /// The frame around seats at these places (x, y). Its left edge is
    /// never right of x = 0, and a section with no seats is framed around
    /// the origin.
    pub fn around(places: impl IntoIterator<Item = (i32, i32)>) -> Self {
        let (mut min_x, mut max_x) = (0, 0);
        let mut ys: Option<(i32, i32)> = None;
        for (x, y) in places {
            min_x = min_x.min(x);
            max_x = max_x.max(x);
            ys = Some(ys.map_or((y, y), |(lo, hi)| (lo.min(y), hi.max(y))));
        }
        let (min_y, max_y) = ys.unwrap_or((0, 0));
        Self {
            view: format!(
                "{} {} {} {}",
                min_x - 24,
                min_y - 30,
                max_x - min_x + 36,
                max_y - min_y + 40
            ),
            label_x: min_x - 20,
            stage_x: (min_x + max_x) / 2,
            stage_y: min_y - 16,
        }
    }
}

/// The sections on sale (active, not hidden, their event not archived);
/// of `ids` only when given.
pub async fn heads(pool: &PgPool, ids: Option<&[String]>) -> sqlx::Result<Vec<SectionHead>> {
    sqlx::query_as(
        "select x.product_id, x.resource_id, x.name, c.id as event, c.title as event_title, \
                x.category as category_id, k.name as category, k.colour, \
                p.price_minor, p.currency, p.max_per_order, \
                x.chooser = 'first_fit' as first_fit, \
                coalesce((select (min(a.x) + max(a.x)) / 2.0::float8 \
                            from seats a where a.section = x.product_id), 0) as middle \
           from seat_sections x join products p on p.id = x.product_id \
           join collections c on c.id = x.collection \
           join seat_categories k on k.collection = x.collection and k.id = x.category \
          where p.active and not p.hidden and c.archived_at is null \
            and ($1::text[] is null or x.product_id = any ($1)) \
          order by x.product_id",
    )
    .bind(ids)
    .fetch_all(pool)
    .await
}

#[derive(sqlx::FromRow)]
struct SeatRow {
    section: String,
    version: String,
    id: Option<i64>,
    label: Option<String>,
    row_label: Option<String>,
    number: Option<i32>,
    x: Option<i32>,
    y: Option<i32>,
    access: Option<String>,
    state: Option<String>,
    row_rank: Option<i32>,
    run: Option<i32>,
    pos: Option<i32>,
}

/// The seats of these sections (by product id), each section's with the
/// version of its resource row they were read at, in one statement (one
/// snapshot: the seats are those of that version). A section without
/// seats is there, with none.
pub async fn seats(
    pool: &PgPool,
    sections: &[&str],
) -> sqlx::Result<Vec<(String, String, Vec<SeatShown>)>> {
    let rows: Vec<SeatRow> = sqlx::query_as(
        "select x.product_id as section, r.xmin::text as version, \
                s.id, s.label, s.row_label, s.number, s.x, s.y, s.access, s.row_rank, s.run, s.pos, \
                case when s.id is null then null \
                     when exists (select 1 from seat_pins q where q.seat_id = s.id and q.live) \
                     then 'taken' when s.state = 'open' then 'free' else 'blocked' end as state \
           from seat_sections x join resources r on r.id = x.resource_id \
           left join seats s on s.section = x.product_id and s.note <> 'off the plan' \
          where x.product_id = any ($1) \
          order by x.product_id, s.row_rank, s.run, s.pos",
    )
    .bind(sections)
    .fetch_all(pool)
    .await?;
    let mut out: Vec<(String, String, Vec<SeatShown>)> = Vec::new();
    for row in rows {
        if out
            .last()
            .is_none_or(|(section, _, _)| *section != row.section)
        {
            out.push((row.section.clone(), row.version.clone(), Vec::new()));
        }
        let (Some(id), Some(label), Some(row_label), Some(number), Some(x), Some(y)) =
            (row.id, row.label, row.row_label, row.number, row.x, row.y)
        else {
            continue; // a section with no seats
        };
        let state = match row.state.as_deref() {
            Some("free") => SeatState::Free,
            Some("taken") => SeatState::Taken,
            _ => SeatState::Blocked,
        };
        let seat = SeatShown {
            id,
            label,
            row_label,
            number,
            x,
            y,
            access: row.access.unwrap_or_default(),
            state,
            row_rank: row.row_rank.unwrap_or_default(),
            run: row.run.unwrap_or_default(),
            pos: row.pos.unwrap_or_default(),
        };
        out.last_mut().expect("pushed above").2.push(seat);
    }
    Ok(out)
}

/// One section on sale and its seats, read from the database now.
pub async fn section(pool: &PgPool, id: &str) -> sqlx::Result<Option<SectionSeats>> {
    let Some(head) = heads(pool, Some(&[id.to_owned()])).await?.pop() else {
        return Ok(None);
    };
    let Some((_, version, seats)) = seats(pool, &[id]).await?.pop() else {
        return Ok(None);
    };
    Ok(Some(SectionSeats {
        head,
        seats,
        version,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_holds_the_seats_the_stage_above_and_the_labels_at_the_left() {
        let frame = MapFrame::around([(10, 20), (50, 20), (30, 60)]);
        assert_eq!(frame.view, "-24 -10 86 80");
        assert_eq!(frame.label_x, -20);
        assert_eq!(frame.stage_x, 25);
        assert_eq!(frame.stage_y, 4);
    }

    #[test]
    fn a_section_with_no_seats_is_framed_around_the_origin() {
        let frame = MapFrame::around([]);
        assert_eq!(frame.view, "-24 -30 36 40");
        assert_eq!((frame.label_x, frame.stage_x, frame.stage_y), (-20, 0, -16));
    }
}
