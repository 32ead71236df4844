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

mod attendees;
mod choices;
mod csv;
mod door;
mod filter;
mod orders;

use sqlx::PgPool;

use crate::audit::Actor;
use crate::clock::ShopZone;

pub use attendees::AttendeeLine;
pub use choices::{CollectionChoice, ProductChoice, choices};
pub use csv::{CsvExport, Exports, push_cell, push_line};
pub use door::{DOOR_LIST_LIMIT, DoorList, door_list, sale_title};
pub use filter::{Days, ExportFilter, FilterForm};

/// Which export: one line per order, or one per ticket or pickup code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Csv {
    Orders,
    Attendees,
}

/// The orders or the codes a filter covers, as CSV; recorded in Activity
/// as `export_orders` or `export_attendees`. The admin's Exports page and
/// the API both take their files here.
pub async fn export_csv(
    pool: &PgPool,
    exports: &Exports,
    by: Actor<'_>,
    filter: &ExportFilter,
    zone: ShopZone,
    what: Csv,
) -> Result<CsvExport, ExportError> {
    match what {
        Csv::Orders => csv::export::<orders::OrderLine>(pool, exports, by, filter, zone).await,
        Csv::Attendees => csv::export::<AttendeeLine>(pool, exports, by, filter, zone).await,
    }
}

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

pub(super) fn invalid(message: impl Into<String>) -> ExportError {
    ExportError::InvalidInput(message.into())
}
