//! `GET /admin`: the home page, where owners and the box office land — the
//! sale at a glance (figures from `staff::home`): money taken today, this
//! week and so far; each event, tier, slot day and product with how full
//! it is; sales by day as a chart drawn on the server (an SVG, with the
//! same figures as a table); the latest orders; what needs someone; what
//! comes next. The page follows the sale through the shop's own stream
//! (`/availability/stream`, watched by `static/admin.js`), which reads the
//! page again and puts its figures in place: nothing reloads it.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, web};
use askama::Template;
use chrono::{DateTime, Utc};

use super::notices::NoticeQuery;
use super::pages::{Nav, money, nav, render, see_other, start_page};
use crate::catalogue::ChoiceKind;
use crate::routes::ShopError;
use crate::staff::Session;
use crate::staff::home::{self, Attention, Day, ProductFill, RecentOrder, Takings, Windows};
use crate::staff::roles::Permission;
use crate::state::Shop;

/// How full one thing is: a tier, a product, a slot day, or an event or a
/// shop part as a whole.
pub(super) struct Fill {
    pub(super) label: String,
    /// The product this row is, when it is one (for the page's tests).
    pub(super) product: Option<String>,
    pub(super) capacity: i64,
    pub(super) reserved: i64,
    pub(super) sold: i64,
    pub(super) paid_minor: i64,
    pub(super) currency: String,
    /// How its kind counts: units, seats, or parties at tables.
    choice: ChoiceKind,
    /// Its standing sales: for tables, the parties booked.
    parties: i64,
}

impl Fill {
    fn empty(label: String, p: &ProductFill) -> Self {
        Fill {
            label,
            product: None,
            capacity: 0,
            reserved: 0,
            sold: 0,
            paid_minor: 0,
            currency: p.currency.clone(),
            choice: p.kind.sheet().choice,
            parties: 0,
        }
    }

    fn add(&mut self, p: &ProductFill) {
        self.capacity += i64::from(p.total);
        self.reserved += i64::from(p.held);
        self.sold += i64::from(p.sold);
        self.paid_minor += p.paid_minor;
        self.parties += p.parties;
    }

    /// Whether its capacity means places to fill (not a room's pacing).
    pub(super) fn fills_up(&self) -> bool {
        self.choice.capacity_is_places()
    }

    /// How full, in its kind's words ("3 tables booked, 10 covers").
    pub(super) fn words(&self) -> String {
        self.choice.fill_words(&crate::catalogue::FillCounts {
            capacity: self.capacity,
            sold: self.sold,
            reserved: self.reserved,
            parties: self.parties,
            percent: self.percent(),
        })
    }

    /// Sold of capacity, in whole percent (0 when there is no capacity).
    pub(super) fn percent(&self) -> i64 {
        if self.capacity <= 0 {
            0
        } else {
            (self.sold * 100 / self.capacity).clamp(0, 100)
        }
    }

    /// Reserved of capacity, in whole percent, drawn after the sold part.
    pub(super) fn reserved_percent(&self) -> i64 {
        if self.capacity <= 0 {
            0
        } else {
            (self.reserved * 100 / self.capacity).clamp(0, 100 - self.percent())
        }
    }

    pub(super) fn available(&self) -> i64 {
        (self.capacity - self.reserved - self.sold).max(0)
    }
}

/// An event or a shop part, with its rows: tiers, products, or a
/// schedule's slots by day.
pub(super) struct Group {
    pub(super) title: String,
    pub(super) when: Option<DateTime<Utc>>,
    pub(super) total: Fill,
    pub(super) rows: Vec<Fill>,
    /// Slot days (their row), with their first time from now, if any is
    /// left: what comes next among them.
    days: Vec<(Option<DateTime<Utc>>, usize)>,
}

/// Products grouped by collection; a schedule's slots (a kind whose units a
/// schedule makes) summed per day in the shop's zone.
fn groups(
    products: &[ProductFill],
    zone: crate::clock::ShopZone,
    now: DateTime<Utc>,
) -> Vec<Group> {
    let mut groups: Vec<(String, Group)> = Vec::new();
    for p in products {
        if groups.last().is_none_or(|(id, _)| *id != p.collection) {
            groups.push((
                p.collection.clone(),
                Group {
                    title: p.collection_title.clone(),
                    when: p.collection_starts_at,
                    total: Fill::empty(p.collection_title.clone(), p),
                    rows: Vec::new(),
                    days: Vec::new(),
                },
            ));
        }
        let (_, group) = groups.last_mut().expect("just pushed");
        group.total.add(p);
        match (p.kind.sheet().scheduled_name, p.starts_at) {
            (Some(_), Some(at)) => {
                let label = zone.local(at).format("%a %-d %b").to_string();
                if group.rows.last().is_none_or(|r| r.label != label) {
                    group.rows.push(Fill::empty(label, p));
                    group.days.push((None, group.rows.len() - 1));
                }
                group.rows.last_mut().expect("just pushed").add(p);
                if let Some(day) = group.days.last_mut()
                    && day.0.is_none()
                    && at >= now
                {
                    day.0 = Some(at);
                }
            }
            _ => {
                let mut row = Fill::empty(p.name.clone(), p);
                row.product = Some(p.id.clone());
                row.add(p);
                group.rows.push(row);
            }
        }
    }
    groups.into_iter().map(|(_, group)| group).collect()
}

/// Something coming: an event, or a day of slots.
pub(super) struct Upcoming<'a> {
    pub(super) when: DateTime<Utc>,
    pub(super) title: &'a str,
    pub(super) fill: &'a Fill,
}

/// What comes next, in time order across kinds: each event that has not
/// begun, and the next day of each collection of slots (a bakery's next
/// pickup day, a room's next service) from its first time still to come.
/// One line a collection: a room's thirty days of times are one line, not
/// thirty that push the concerts off the list.
fn upcoming(groups: &[Group], now: DateTime<Utc>, most: usize) -> Vec<Upcoming<'_>> {
    let mut next: Vec<Upcoming<'_>> = Vec::new();
    for g in groups {
        if let Some(when) = g.when.filter(|at| *at >= now) {
            next.push(Upcoming {
                when,
                title: &g.title,
                fill: &g.total,
            });
        }
        if let Some((Some(when), row)) = g.days.iter().find(|(first, _)| first.is_some()) {
            next.push(Upcoming {
                when: *when,
                title: &g.title,
                fill: &g.rows[*row],
            });
        }
    }
    next.sort_by_key(|u| u.when);
    next.truncate(most);
    next
}

/// One bar of the sales chart, in the SVG's own units.
pub(super) struct Bar {
    pub(super) x: i64,
    pub(super) y: i64,
    pub(super) height: i64,
    pub(super) label: String,
}

/// The chart's drawing: 40 units a day, bars up to 150 high over a base
/// line at 170.
pub(super) const CHART_WIDTH: i64 = 40 * home::CHART_DAYS;
const BASE: i64 = 170;
const TALLEST: i64 = 150;

/// The chart's amount scale: lines at the largest day's amount and half
/// of it, each labelled, as (height on the drawing, words). None while no
/// day sold anything.
fn scale(days: &[Day], currency: &str) -> Vec<(i64, String)> {
    let most = days.iter().map(Day::net_minor).max().unwrap_or(0);
    if most <= 0 {
        return Vec::new();
    }
    vec![
        (BASE - TALLEST, crate::money::format(most, currency)),
        (BASE - TALLEST / 2, crate::money::format(most / 2, currency)),
    ]
}

fn bars(days: &[Day]) -> Vec<Bar> {
    let most = days.iter().map(Day::net_minor).max().unwrap_or(0).max(1);
    days.iter()
        .enumerate()
        .map(|(n, day)| {
            let height = day.net_minor().max(0) * TALLEST / most;
            Bar {
                x: n as i64 * 40 + 8,
                y: BASE - height,
                height,
                label: day.day.format("%-d %b").to_string(),
            }
        })
        .collect()
}

#[derive(Template)]
#[template(path = "admin/home.html")]
struct HomePage<'a> {
    nav: Nav,
    windows: Windows,
    groups: &'a [Group],
    upcoming: Vec<Upcoming<'a>>,
    days: Vec<Day>,
    bars: Vec<Bar>,
    /// The amount scale's lines: (height, words).
    scale: Vec<(i64, String)>,
    chart_currency: String,
    recent: Vec<RecentOrder>,
    attention: Attention,
    /// The products the page watches on the shop's stream (at most the
    /// stream's 100).
    watch: String,
}

impl HomePage<'_> {
    /// The three stretches of time, titled, with their takings.
    fn tiles(&self) -> [(&'static str, &'static str, &[Takings]); 3] {
        [
            ("Today", "today", &self.windows.today),
            ("This week", "week", &self.windows.week),
            ("So far", "so_far", &self.windows.so_far),
        ]
    }
}

/// `GET /admin`: the home page for those who may see orders; the door's
/// work starts at redeeming.
pub(super) async fn home(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    notice: web::Query<NoticeQuery>,
) -> Result<HttpResponse, ShopError> {
    if session.must_enrol || !session.staff.role.may(Permission::Orders) {
        return Ok(see_other(start_page(session.staff.role)));
    }
    let now = Utc::now();
    let pool = &shop.pool;
    let windows = home::windows(pool, shop.zone(), now).await?;
    let products = home::fills(pool).await?;
    let chart_currency = windows
        .so_far
        .first()
        .map(|t| t.currency.clone())
        .or_else(|| products.first().map(|p| p.currency.clone()))
        .unwrap_or_else(|| "eur".to_owned());
    let days = home::days(pool, shop.zone(), now, &chart_currency).await?;
    let groups = groups(&products, shop.zone(), now);
    let watch = products
        .iter()
        .take(100)
        .map(|p| p.id.as_str())
        .collect::<Vec<_>>()
        .join(",");
    let page = HomePage {
        nav: nav(&shop, &session, &notice).await?,
        windows,
        upcoming: upcoming(&groups, now, 6),
        groups: &groups,
        bars: bars(&days),
        scale: scale(&days, &chart_currency),
        days,
        chart_currency,
        recent: home::recent_orders(pool, 8).await?,
        attention: home::attention(pool).await?,
        watch,
    };
    render(StatusCode::OK, &page)
}
