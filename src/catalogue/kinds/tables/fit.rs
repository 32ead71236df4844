//! Whether a room seats a party at a time, answered in memory: the same
//! answer as the database's `hf_bookable_times` (covers left, and a free
//! table or joined set for the party's turn that the room's rule for
//! fuller parties lets it take, as `hf_free_sets` filters them), from the
//! room's set-up ([`RoomPlan`], read when the catalogue is) and the
//! stays on its tables ([`Stays`], read whenever a booking, a release or
//! a move changes one of its times' counters). A table drop's crowd is
//! refused, and told the nearest times that seat it, from these; the
//! database still chooses every table it grants.
//! `tests/api/tables_memory.rs` holds the two answers equal.

use std::collections::HashMap;
use std::sync::Arc;

use chrono::{DateTime, Duration, NaiveTime, Utc};
use sqlx::PgPool;

use super::times::BookableTime;

/// A room's set-up as the choosers read it.
#[derive(Debug, Clone, PartialEq)]
pub struct RoomPlan {
    pub room: String,
    /// Holding tables for fuller parties (`dining_rooms.least_fill`).
    pub least_fill: i32,
    pub largest_party: i32,
    /// What the booking page says of it.
    pub name: String,
    pub description: String,
    pub currency: String,
    pub days_ahead: i32,
    /// Its service periods, earliest first.
    pub periods: Vec<PeriodPlan>,
    /// Its tables and joined sets that may seat a party now.
    pub sets: Vec<TableSet>,
    /// (up to party, minutes), smallest first.
    pub turns: Vec<(i32, i32)>,
    /// The room's times from a day ago on (what can still meet a time not
    /// begun), earliest first.
    pub times: Vec<RoomTime>,
}

/// A room as the shop's memory keeps it: its plan, and the stays on its
/// tables as of memory's last read of its times' counters.
#[derive(Debug, Clone)]
pub struct RoomMemory {
    pub plan: Arc<RoomPlan>,
    pub stays: Arc<Stays>,
}

/// A service period: its name and its booking policy.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct PeriodPlan {
    pub name: String,
    pub deposit_minor: i64,
    pub deposit_from_party: i32,
    pub cancel_hours: i32,
}

impl PeriodPlan {
    /// Its name as a guest reads it: "dinner" → "Dinner".
    pub fn heading(&self) -> String {
        let mut chars = self.name.replace('-', " ").chars().collect::<Vec<_>>();
        if let Some(first) = chars.first_mut() {
            *first = first.to_ascii_uppercase();
        }
        chars.into_iter().collect()
    }
}

/// A table, or tables joined, seating a party of `min_party..=max_party`.
#[derive(Debug, Clone, PartialEq)]
pub struct TableSet {
    pub tables: Vec<String>,
    pub min_party: i32,
    pub max_party: i32,
}

/// One time of a room, with its service period as that day has it.
#[derive(Debug, Clone, PartialEq)]
pub struct RoomTime {
    pub product_id: String,
    pub resource_id: String,
    pub starts_at: DateTime<Utc>,
    /// Its service period's name.
    pub period: String,
    /// The period's first time that day, and its last seating.
    pub period_opens: DateTime<Utc>,
    pub last_seating: DateTime<Utc>,
    /// Active and not archived: it may be offered.
    pub offered: bool,
    /// When its bookings open (a table drop), if not yet at publishing.
    pub sale_opens_at: Option<DateTime<Utc>>,
    pub sale_closes_at: Option<DateTime<Utc>>,
}

/// A stay: from, until.
pub type Span = (DateTime<Utc>, DateTime<Utc>);

/// The live stays on a room's tables, by table, earliest first.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Stays {
    by_table: HashMap<String, Vec<Span>>,
}

impl Stays {
    /// Stays as (table, (start, end)), in any order.
    pub fn new(stays: impl IntoIterator<Item = (String, Span)>) -> Self {
        let mut by_table: HashMap<String, Vec<Span>> = HashMap::new();
        for (table, span) in stays {
            by_table.entry(table).or_default().push(span);
        }
        for stays in by_table.values_mut() {
            stays.sort_unstable();
        }
        Self { by_table }
    }

    fn of(&self, table: &str) -> &[Span] {
        self.by_table.get(table).map_or(&[], Vec::as_slice)
    }
}

/// Minutes of a gap no turn of `shortest` minutes can use.
fn lost(gap: Option<Duration>, shortest: i64) -> i64 {
    gap.map_or(0, |g| g.num_minutes().rem_euclid(shortest.max(1)))
}

impl RoomPlan {
    /// The minutes a party of `party` stays: the smallest turn row that
    /// takes it, past them the largest, with no rows two hours.
    pub fn turn(&self, party: i32) -> i64 {
        self.turns
            .iter()
            .find(|(up_to, _)| *up_to >= party)
            .or(self.turns.last())
            .map_or(120, |(_, minutes)| i64::from(*minutes))
    }

    /// Whether a free table or joined set seats `party` for its turn
    /// from `time`, as the room's rule lets it (`hf_free_sets` offers at
    /// least one).
    pub fn seats(&self, stays: &Stays, time: &RoomTime, party: i32) -> bool {
        self.free_sets(stays, time, party).next().is_some()
    }

    /// How many parties of `party` the room could still seat at `time`
    /// at once: free tables and joined sets that seat it, none sharing a
    /// table (single tables counted first).
    pub fn tables_for(&self, stays: &Stays, time: &RoomTime, party: i32) -> usize {
        let mut free: Vec<&TableSet> = self.free_sets(stays, time, party).collect();
        free.sort_by_key(|set| set.tables.len());
        let mut taken: Vec<&str> = Vec::new();
        let mut count = 0;
        for set in free {
            if set.tables.iter().all(|t| !taken.contains(&t.as_str())) {
                taken.extend(set.tables.iter().map(String::as_str));
                count += 1;
            }
        }
        count
    }

    /// The time of `product_id`, if it is one of the room's.
    pub fn time(&self, product_id: &str) -> Option<&RoomTime> {
        self.times.iter().find(|t| t.product_id == product_id)
    }

    /// The free tables and joined sets that seat `party` for its turn from
    /// `time`, as the room's rule lets them (`hf_free_sets`' filter).
    fn free_sets<'a>(
        &'a self,
        stays: &'a Stays,
        time: &'a RoomTime,
        party: i32,
    ) -> impl Iterator<Item = &'a TableSet> + 'a {
        let turn = self.turn(party);
        let start = time.starts_at;
        let end = start + Duration::minutes(turn);
        self.sets.iter().filter(move |set| {
            if party < set.min_party || party > set.max_party {
                return false;
            }
            let free = set.tables.iter().all(|t| {
                stays
                    .of(t)
                    .iter()
                    .all(|(from, to)| *to <= start || *from >= end)
            });
            if !free {
                return false;
            }
            if self.least_fill == 0 {
                return true;
            }
            // what the stay's gaps lose beyond what the gap it splits lost
            let shortest = self.turn(set.min_party);
            let lost_sum: i64 = set
                .tables
                .iter()
                .map(|t| {
                    let stays = stays.of(t);
                    let before = stays
                        .iter()
                        .map(|(_, to)| *to)
                        .filter(|to| *to <= start)
                        .max()
                        .map_or(time.period_opens, |b| b.max(time.period_opens));
                    let after = stays
                        .iter()
                        .map(|(from, _)| *from)
                        .filter(|from| *from >= end && *from <= time.last_seating)
                        .min();
                    lost(Some(start - before), shortest) + lost(after.map(|a| a - end), shortest)
                        - lost(after.map(|a| a - before), shortest)
                })
                .sum();
            // 100·party·turn ≥ least_fill·max_party·(turn + lost/count),
            // times the count to stay whole
            let count = set.tables.len() as i64;
            100 * i64::from(party) * turn * count
                >= i64::from(self.least_fill)
                    * i64::from(set.max_party)
                    * (turn * count + lost_sum.max(0))
        })
    }

    /// The room's times from `from` until `to` that a party of `party`
    /// could book at `now`, with `covers_left` of each time's resource:
    /// `hf_bookable_times`' answer.
    pub fn bookable(
        &self,
        stays: &Stays,
        (from, to): (DateTime<Utc>, DateTime<Utc>),
        party: i32,
        now: DateTime<Utc>,
        covers_left: impl Fn(&str) -> Option<i32>,
    ) -> Vec<BookableTime> {
        if party < 1 || party > self.largest_party {
            return Vec::new();
        }
        let first = self.times.partition_point(|t| t.starts_at < from);
        self.times[first..]
            .iter()
            .take_while(|t| t.starts_at < to)
            .filter(|t| t.offered && t.starts_at > now)
            .filter(|t| t.sale_closes_at.is_none_or(|c| c > now))
            .filter_map(|t| {
                let covers_left = covers_left(&t.resource_id)?;
                Some(BookableTime {
                    product_id: t.product_id.clone(),
                    starts_at: t.starts_at,
                    covers_left,
                    seats: covers_left >= party && self.seats(stays, t, party),
                })
            })
            .collect()
    }
}

#[derive(sqlx::FromRow)]
struct PlanRow {
    room: String,
    least_fill: i32,
    largest_party: i32,
    name: String,
    description: String,
    currency: String,
    days_ahead: i32,
}

#[derive(sqlx::FromRow)]
struct TimeRow {
    room: String,
    product_id: String,
    resource_id: String,
    starts_at: DateTime<Utc>,
    period: String,
    opens: NaiveTime,
    last_seating: NaiveTime,
    offered: bool,
    sale_opens_at: Option<DateTime<Utc>>,
    sale_closes_at: Option<DateTime<Utc>>,
}

/// Every room's plan, not archived ones.
pub async fn plans(pool: &PgPool) -> sqlx::Result<Vec<RoomPlan>> {
    let rooms: Vec<PlanRow> = sqlx::query_as(
        "select collection as room, least_fill, largest_party, name, description, currency, \
                days_ahead \
           from dining_rooms where archived_at is null order by collection",
    )
    .fetch_all(pool)
    .await?;
    let periods: Vec<(String, PeriodPlan)> = sqlx::query_as::<_, (String, String, i64, i32, i32)>(
        "select room, name, deposit_minor, deposit_from_party, cancel_hours from dining_periods \
          order by room, opens, name",
    )
    .fetch_all(pool)
    .await?
    .into_iter()
    .map(
        |(room, name, deposit_minor, deposit_from_party, cancel_hours)| {
            (
                room,
                PeriodPlan {
                    name,
                    deposit_minor,
                    deposit_from_party,
                    cancel_hours,
                },
            )
        },
    )
    .collect();
    // a joined set counts when all its tables are the room's, none archived
    let sets: Vec<(String, Vec<String>, i32, i32)> = sqlx::query_as(
        "select t.room, array[t.id], t.min_party, t.max_party from dining_tables t \
          where t.archived_at is null \
         union all \
         select j.room, j.tables, j.min_party, j.max_party from dining_joins j \
          where j.archived_at is null \
            and (select count(*) from dining_tables t where t.room = j.room \
                    and t.id = any (j.tables) and t.archived_at is null) = cardinality(j.tables)",
    )
    .fetch_all(pool)
    .await?;
    let turns: Vec<(String, i32, i32)> = sqlx::query_as(
        "select room, up_to_party, minutes from dining_turns order by room, up_to_party",
    )
    .fetch_all(pool)
    .await?;
    let times: Vec<TimeRow> = sqlx::query_as(
        "select t.room, t.product_id, t.resource_id, t.starts_at, t.period, pe.opens, \
                pe.last_seating, p.active and p.archived_at is null as offered, p.sale_opens_at, \
                p.sale_closes_at \
           from dining_times t \
           join dining_periods pe on pe.room = t.room and pe.name = t.period \
           join products p on p.id = t.product_id \
          where t.starts_at > now() - interval '1 day' \
          order by t.room, t.starts_at",
    )
    .fetch_all(pool)
    .await?;
    let mut plans: Vec<RoomPlan> = rooms
        .into_iter()
        .map(|r| RoomPlan {
            room: r.room,
            least_fill: r.least_fill,
            largest_party: r.largest_party,
            name: r.name,
            description: r.description,
            currency: r.currency,
            days_ahead: r.days_ahead,
            periods: Vec::new(),
            sets: Vec::new(),
            turns: Vec::new(),
            times: Vec::new(),
        })
        .collect();
    let index: HashMap<String, usize> = plans
        .iter()
        .enumerate()
        .map(|(i, p)| (p.room.clone(), i))
        .collect();
    let of = |room: &str| index.get(room).copied();
    for (room, tables, min_party, max_party) in sets {
        if let Some(i) = of(&room) {
            plans[i].sets.push(TableSet {
                tables,
                min_party,
                max_party,
            });
        }
    }
    for (room, period) in periods {
        if let Some(i) = of(&room) {
            plans[i].periods.push(period);
        }
    }
    for (room, up_to, minutes) in turns {
        if let Some(i) = of(&room) {
            plans[i].turns.push((up_to, minutes));
        }
    }
    let mut by_room: HashMap<String, Vec<TimeRow>> = HashMap::new();
    for row in times {
        by_room.entry(row.room.clone()).or_default().push(row);
    }
    for (room, rows) in by_room {
        if let Some(i) = of(&room) {
            plans[i].times = with_periods(rows);
        }
    }
    Ok(plans)
}

/// Each time with its period as that day has it: the period's first time
/// within its length (eleven hours at most) before it, and that plus the
/// period's length, as `hf_free_sets` reads them. `rows` are in time
/// order.
fn with_periods(rows: Vec<TimeRow>) -> Vec<RoomTime> {
    let length = |r: &TimeRow| r.last_seating - r.opens;
    // each period's times, earliest first
    let mut by_period: HashMap<&str, Vec<DateTime<Utc>>> = HashMap::new();
    for row in &rows {
        by_period
            .entry(&row.period)
            .or_default()
            .push(row.starts_at);
    }
    rows.iter()
        .map(|me| {
            let reach = length(me).min(Duration::hours(11));
            let starts = &by_period[me.period.as_str()];
            let first = starts.partition_point(|at| *at < me.starts_at - reach);
            let period_opens = starts.get(first).copied().unwrap_or(me.starts_at);
            RoomTime {
                product_id: me.product_id.clone(),
                resource_id: me.resource_id.clone(),
                starts_at: me.starts_at,
                period: me.period.clone(),
                period_opens,
                last_seating: period_opens + length(me),
                offered: me.offered,
                sale_opens_at: me.sale_opens_at,
                sale_closes_at: me.sale_closes_at,
            }
        })
        .collect()
}

/// The live stays of these rooms' tables that can still meet a time not
/// yet begun (those ending within the last twelve hours or later).
pub async fn stays(pool: &PgPool, rooms: &[&str]) -> sqlx::Result<HashMap<String, Stays>> {
    let rows: Vec<(String, String, DateTime<Utc>, DateTime<Utc>)> = sqlx::query_as(
        "select room, table_id, lower(during), upper(during) from table_pins \
          where live and room = any($1) and upper(during) > now() - interval '12 hours'",
    )
    .bind(rooms)
    .fetch_all(pool)
    .await?;
    let mut by_room: HashMap<String, Vec<(String, Span)>> = rooms
        .iter()
        .map(|r| ((*r).to_owned(), Vec::new()))
        .collect();
    for (room, table, from, to) in rows {
        by_room.entry(room).or_default().push((table, (from, to)));
    }
    Ok(by_room
        .into_iter()
        .map(|(room, stays)| (room, Stays::new(stays)))
        .collect())
}
