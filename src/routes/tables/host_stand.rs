//! A dining room at the host stand (issue 36): the day's bookings by time
//! (party, guest and phone, its code, table, where each stands), and what
//! the stand does with one: seated (the booking's item redeemed once, as
//! at a door, and nothing else of its order),
//! a no-show (recorded, the deposit kept), or moved to another free table
//! or joined set that seats the party (`hf_move_booking`, under the
//! engine's locks). The room's set-up is [`super::setup`].

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, web};
use askama::Template;
use chrono::{DateTime, Duration, NaiveDate, Utc};
use serde::Deserialize;
use uuid::Uuid;

use super::floor::{self, Area, FreeSet, WalkIn};
use crate::redemption::{self, Door, Outcome};
use crate::routes::ShopError;
use crate::routes::admin::NoticeQuery;
use crate::routes::admin::pages::{Nav, nav, render, see_other};
use crate::staff::Session;
use crate::state::Shop;

#[derive(Deserialize)]
pub struct DayQuery {
    /// `YYYY-MM-DD` in the shop's zone; today when absent.
    date: Option<String>,
    /// What the last action did ([`said`]).
    said: Option<String>,
    /// A booking's code, its guest's name or phone, searched for.
    q: Option<String>,
}

/// A booking of the day, as the stand reads it.
#[derive(sqlx::FromRow)]
struct Booked {
    hold_id: Uuid,
    number: String,
    /// The booking's code, as the guest gives it.
    code: Option<String>,
    name: String,
    phone: Option<String>,
    party: i32,
    starts_at: DateTime<Utc>,
    ends_at: DateTime<Utc>,
    tables: Vec<String>,
    /// booked, seated, no-show, cancelled
    state: String,
    /// The free tables and joined sets that seat the party for its stay.
    moves: Vec<String>,
}

impl Booked {
    fn standing(&self) -> bool {
        self.state == "booked"
    }
}

#[derive(Template)]
#[template(path = "tables/host_stand.html")]
struct DayPage {
    nav: Nav,
    room: String,
    name: String,
    date: String,
    day: String,
    /// The days before and after, and today (`YYYY-MM-DD`), for the links.
    before: String,
    after: String,
    today: String,
    bookings: Vec<Booked>,
    /// The room's tables by area, now and next (the day's first when it
    /// is not today).
    floor: Vec<Area>,
    walk_ins: Vec<WalkIn>,
    /// Today only: the tables free for a walk-in now.
    free: Vec<FreeSet>,
    is_today: bool,
    /// What was searched for, and what it found.
    q: String,
    found: Option<Vec<Booked>>,
}

impl DayPage {
    /// A new walk-in's own id, one each time the page is drawn: its form
    /// sent twice (an answer lost) seats one party.
    fn once(&self) -> Uuid {
        Uuid::new_v4()
    }

    /// A booking found: its day and time, as a link's words say it.
    fn when(&self, at: &DateTime<Utc>) -> String {
        self.nav
            .zone
            .local(*at)
            .format("%a %-d %b, %H:%M")
            .to_string()
    }

    fn ymd(&self, at: &DateTime<Utc>) -> String {
        self.nav.zone.local(*at).format("%Y-%m-%d").to_string()
    }

    /// A free set's words in the walk-in form: its size and how long it is
    /// free ("T2, up to 4, free until 20:00").
    fn free_words(&self, set: &FreeSet) -> String {
        match set.taken_at {
            Some(at) => format!(
                "{}, up to {}, free until {}",
                set.set_id,
                set.max_party,
                self.hhmm(&at)
            ),
            None => format!("{}, up to {}", set.set_id, set.max_party),
        }
    }

    fn hhmm(&self, at: &DateTime<Utc>) -> String {
        self.nav.zone.local(*at).format("%H:%M").to_string()
    }

    /// The day in numbers, as the items say: the bookings still standing,
    /// seated or marked no-show and their guests; how many are seated,
    /// still expected, no-shows; the walk-ins and their guests; then those
    /// cancelled and refunded ("4 bookings, 15 guests: 1 seated, 3
    /// expected; 2 walk-ins, 5 guests; 1 cancelled").
    fn counts(&self) -> String {
        let plural =
            |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
        let guests = |n: i32| plural(usize::try_from(n).unwrap_or(0), "guest", "guests");
        let kept: Vec<&Booked> = self
            .bookings
            .iter()
            .filter(|b| b.state != "cancelled" && b.state != "refunded")
            .collect();
        let mut words = if kept.is_empty() {
            "no bookings".to_owned()
        } else {
            let of = |state: &str| kept.iter().filter(|b| b.state == state).count();
            let parts: Vec<String> = [
                format!("{} seated", of("seated")),
                format!("{} expected", of("booked")),
                plural(of("no-show"), "no-show", "no-shows"),
            ]
            .into_iter()
            .filter(|part| !part.starts_with("0 "))
            .collect();
            format!(
                "{}, {}: {}",
                plural(kept.len(), "booking", "bookings"),
                guests(kept.iter().map(|b| b.party).sum()),
                parts.join(", ")
            )
        };
        if !self.walk_ins.is_empty() {
            words.push_str(&format!(
                "; {}, {}",
                plural(self.walk_ins.len(), "walk-in", "walk-ins"),
                guests(self.walk_ins.iter().map(|w| w.party).sum())
            ));
        }
        for state in ["cancelled", "refunded"] {
            let gone = self.bookings.iter().filter(|b| b.state == state).count();
            if gone > 0 {
                words.push_str(&format!("; {gone} {state}"));
            }
        }
        words
    }
}

/// The words an action's `said` names; nothing else is shown.
fn said(word: Option<&str>) -> (&'static str, &'static str) {
    match word.unwrap_or_default() {
        "seated" => ("The party is seated; its code is used.", "ok"),
        "seated_before" => ("That party was seated before; nothing changed.", "refused"),
        "no_show" => (
            "Marked as a no-show; the deposit is kept and the table is free.",
            "ok",
        ),
        "moved" => ("The booking moved to its new table.", "ok"),
        "not_free" => ("That table is taken then; the booking stayed.", "refused"),
        "does_not_fit" => (
            "That table does not seat the party; the booking stayed.",
            "refused",
        ),
        "not_standing" => (
            "That booking is no longer standing; nothing changed.",
            "refused",
        ),
        "walked_in" => ("The walk-in party is seated.", "ok"),
        "walk_in_not_free" => (
            "That table is taken now or within the half hour; no one was seated.",
            "refused",
        ),
        "walk_in_no_such_table" => ("The room has no such table; no one was seated.", "refused"),
        "walk_in_too_small" => (
            "That table does not seat the party; no one was seated.",
            "refused",
        ),
        "none_free" => (
            "No table seats a party that size now; no one was seated.",
            "refused",
        ),
        "walk_in_party" => (
            "Give the party's size, 1 to 100 guests; no one was seated.",
            "refused",
        ),
        "left" => ("The table is free again.", "ok"),
        "left_before" => ("That party had left before; nothing changed.", "refused"),
        "walk_in_unknown" => (
            "That walk-in is not one of this room's; nothing changed.",
            "refused",
        ),
        _ => ("", "ok"),
    }
}

/// The room's name, or 404.
async fn room_name(shop: &Shop, room: &str) -> Result<String, ShopError> {
    sqlx::query_scalar::<_, String>("select name from dining_rooms where collection = $1")
        .bind(room)
        .fetch_optional(&shop.pool)
        .await?
        .ok_or_else(|| ShopError::not_found("no such dining room"))
}

#[derive(Template)]
#[template(path = "tables/host_stands.html")]
struct RoomsPage {
    nav: Nav,
    rooms: Vec<(String, String)>,
}

/// `GET /admin/dining`: the host stand, as the menu opens it: the room's
/// day at once when the shop has one room, else its rooms to choose from.
pub async fn rooms(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
) -> Result<HttpResponse, ShopError> {
    let rooms: Vec<(String, String)> = sqlx::query_as(
        "select collection, name from dining_rooms where archived_at is null order by name",
    )
    .fetch_all(&shop.pool)
    .await?;
    if let [(room, _)] = rooms.as_slice() {
        return Ok(see_other(&format!("/admin/dining/{room}")));
    }
    let nav = nav(&shop, &session, &NoticeQuery::default()).await?;
    render(StatusCode::OK, &RoomsPage { nav, rooms })
}

/// A booking as the stand reads it (`Booked`), before its `where`.
const BOOKED: &str = "select b.hold_id, o.number, i.code, o.customer_name as name, \
        o.customer_phone as phone, b.party, b.starts_at, b.ends_at, b.tables, \
        case when i.state = 'cancelled' then 'cancelled' \
             when i.state = 'refunded' or l.refunded_qty >= l.qty then 'refunded' \
             when b.no_show_at is not null then 'no-show' \
             when i.state = 'used' then 'seated' \
             else 'booked' end as state, \
        array(select f.set_id from hf_free_sets(b.room, b.party, \
                                                tstzrange(b.starts_at, b.ends_at, '[)'), \
                                                b.hold_id) f \
               where f.tables <> b.tables order by f.set_id) as moves \
   from bookings b join orders o on o.id = b.order_id \
   join order_lines l on l.order_id = b.order_id and l.product_id = b.product_id \
   left join order_items i on i.booking = b.hold_id ";

/// `GET /admin/dining/{room}[?date=YYYY-MM-DD][&q=…]`: the day's bookings,
/// the floor, the walk-ins, and what a search finds.
pub async fn day_page(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    room: web::Path<String>,
    query: web::Query<DayQuery>,
) -> Result<HttpResponse, ShopError> {
    let name = room_name(&shop, &room).await?;
    let today = shop.zone().local(Utc::now()).date_naive();
    let date = match query.date.as_deref().filter(|d| !d.is_empty()) {
        None => today,
        Some(text) => NaiveDate::parse_from_str(text, "%Y-%m-%d")
            .map_err(|_| ShopError::bad_request("give the day as YYYY-MM-DD"))?,
    };
    let midnight = chrono::NaiveTime::MIN;
    let (from, to) = (
        shop.zone().at(date, midnight),
        shop.zone().at(date + Duration::days(1), midnight),
    );
    let (Ok(from), Ok(to)) = (from, to) else {
        return Err(ShopError::bad_request("that day has no midnight here"));
    };
    let bookings: Vec<Booked> = sqlx::query_as(&format!(
        "{BOOKED} where b.room = $1 and b.starts_at >= $2 and b.starts_at < $3 \
            and o.state in ('paid', 'refund_pending', 'refunded') \
          order by b.starts_at, b.tables"
    ))
    .bind(room.as_str())
    .bind(from)
    .bind(to)
    .fetch_all(&shop.pool)
    .await?;
    let q = query.q.as_deref().unwrap_or_default().trim().to_owned();
    let found = match floor::search_terms(&q) {
        None => None,
        // from yesterday on: the bookings a host is asked about
        Some((typed, digits)) => Some(
            sqlx::query_as(&format!(
                "{BOOKED} where b.room = $1 and b.starts_at >= $2 \
                    and o.state in ('paid', 'refund_pending', 'refunded') \
                    and (upper(i.code) = upper($3) or o.number = upper($3) \
                         or o.customer_name ilike $4 \
                         or (length($5) >= 4 and regexp_replace(coalesce(o.customer_phone, ''), \
                                                                '[^0-9]', '', 'g') like '%' || $5 || '%')) \
                  order by b.starts_at, b.tables limit 30"
            ))
            .bind(room.as_str())
            .bind(shop.zone().at(today - Duration::days(1), midnight).unwrap_or(from))
            .bind(&typed)
            .bind(crate::staff::order_search::contained(&typed))
            .bind(&digits)
            .fetch_all(&shop.pool)
            .await?,
        ),
    };
    let now = Utc::now();
    let is_today = date == today;
    // the floor around now, or the day's first stays
    let moment = if is_today { now } else { from };
    let floor = floor::floor(&shop.pool, &room, moment, from, to).await?;
    let walk_ins = floor::walk_ins(&shop.pool, &room, from, to).await?;
    let free = if is_today {
        floor::free_now(&shop.pool, &room, now).await?
    } else {
        Vec::new()
    };
    let mut nav = nav(&shop, &session, &NoticeQuery::default()).await?;
    let (words, kind) = said(query.said.as_deref());
    nav.notice = words.to_owned();
    nav.notice_kind = kind;
    let ymd = |d: NaiveDate| d.format("%Y-%m-%d").to_string();
    let page = DayPage {
        nav,
        room: room.into_inner(),
        name,
        date: ymd(date),
        day: if date == today {
            format!("Today, {}", date.format("%A %-d %B"))
        } else {
            date.format("%A %-d %B").to_string()
        },
        before: ymd(date - Duration::days(1)),
        after: ymd(date + Duration::days(1)),
        today: ymd(today),
        bookings,
        floor,
        walk_ins,
        free,
        is_today,
        q,
        found,
    };
    render(StatusCode::OK, &page)
}

#[derive(Deserialize)]
pub struct BookingForm {
    hold: Uuid,
    date: String,
    /// A move's table or joined set.
    #[serde(default)]
    to: String,
}

/// Back to the day, saying what happened.
fn back(room: &str, form: &BookingForm, said: &str) -> HttpResponse {
    let date: String = form
        .date
        .chars()
        .filter(|c| c.is_ascii_digit() || *c == '-')
        .collect();
    see_other(&format!("/admin/dining/{room}?date={date}&said={said}"))
}

/// A standing booking of the room: its item's code and product (the
/// booking's time), or `None`.
async fn standing(
    shop: &Shop,
    room: &str,
    hold: Uuid,
) -> Result<Option<(String, String)>, ShopError> {
    Ok(sqlx::query_as(
        "select i.code, i.product_id from bookings b join orders o on o.id = b.order_id \
           join order_items i on i.booking = b.hold_id \
          where b.hold_id = $1 and b.room = $2 and o.state = 'paid' and b.no_show_at is null",
    )
    .bind(hold)
    .bind(room)
    .fetch_optional(&shop.pool)
    .await?)
}

/// `POST /admin/dining/{room}/seat`: the party is here; its booking code
/// is redeemed, once, by the member at the host stand.
pub async fn seat(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    room: web::Path<String>,
    form: web::Form<BookingForm>,
) -> Result<HttpResponse, ShopError> {
    let Some((code, product)) = standing(&shop, &room, form.hold).await? else {
        return Ok(back(&room, &form, "not_standing"));
    };
    // this booking's item alone: an older code its order's pickup shares
    // stays the pickup's
    let this_booking = [product];
    let redeemed = redemption::redeem(
        &shop.pool,
        &code,
        &Door {
            by: &session.staff.email,
            place: "host stand",
            checks: Some(&this_booking),
            overrule: false,
            attempt: Uuid::new_v4(),
        },
    )
    .await?;
    Ok(back(
        &room,
        &form,
        match redeemed.outcome {
            Outcome::Redeemed { .. } => "seated",
            Outcome::AlreadyUsed { .. } => "seated_before",
            _ => "not_standing",
        },
    ))
}

/// `POST /admin/dining/{room}/no-show`: the party did not come; recorded
/// with who said so, the deposit kept. A seated party cannot be one.
pub async fn no_show(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    room: web::Path<String>,
    form: web::Form<BookingForm>,
) -> Result<HttpResponse, ShopError> {
    let mut tx = shop.pool.begin().await?;
    // lock: the order, as a guest's cancel and a seat do, so a no-show
    // and a cancel at the same moment are one after the other
    sqlx::query(
        "select 1 from orders o join bookings b on b.order_id = o.id \
          where b.hold_id = $1 for no key update of o",
    )
    .bind(form.hold)
    .execute(&mut *tx)
    .await?;
    // lock: the time's counters next, before the booking's row, as a move
    // takes them (counters, room, booking): a no-show and a move at one
    // moment are one after the other, never each waiting on the other
    sqlx::query(
        "select 1 from resources r join holds h on h.resource_id = r.id \
          where h.id = $1 for no key update of r",
    )
    .bind(form.hold)
    .execute(&mut *tx)
    .await?;
    let marked = sqlx::query(
        "update bookings b set no_show_at = now(), no_show_by = $3 \
           from orders o \
          where b.hold_id = $1 and b.room = $2 and o.id = b.order_id and o.state = 'paid' \
            and b.no_show_at is null \
            and exists (select 1 from order_items i \
                         where i.booking = b.hold_id and i.state = 'valid')",
    )
    .bind(form.hold)
    .bind(room.as_str())
    .bind(&session.staff.email)
    .execute(&mut *tx)
    .await?
    .rows_affected();
    if marked == 1 {
        // the table is free from now: the stay ends here (a no-show is
        // marked once its time has come; before it, the stay stands), and
        // the time's counters row is written so memory reads the room again
        sqlx::query(
            "update resources r set held = r.held from holds h \
              where h.id = $1 and r.id = h.resource_id",
        )
        .bind(form.hold)
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "update table_pins set during = tstzrange(lower(during), now(), '[)') \
              where hold_id = $1 and live and lower(during) < now() and upper(during) > now()",
        )
        .bind(form.hold)
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await?;
    Ok(back(
        &room,
        &form,
        if marked == 1 {
            "no_show"
        } else {
            "not_standing"
        },
    ))
}

/// `POST /admin/dining/{room}/move`: to another free table or joined set
/// that seats the party for the same stay; the database decides.
pub async fn move_booking(
    shop: web::Data<Shop>,
    room: web::Path<String>,
    form: web::Form<BookingForm>,
) -> Result<HttpResponse, ShopError> {
    if standing(&shop, &room, form.hold).await?.is_none() {
        return Ok(back(&room, &form, "not_standing"));
    }
    let outcome: String = sqlx::query_scalar("select hf_move_booking($1, $2)")
        .bind(form.hold)
        .bind(form.to.trim())
        .fetch_one(&shop.pool)
        .await?;
    Ok(back(
        &room,
        &form,
        match outcome.as_str() {
            "moved" | "same" => "moved",
            "not_free" => "not_free",
            "does_not_fit" | "unknown_set" => "does_not_fit",
            _ => "not_standing",
        },
    ))
}
