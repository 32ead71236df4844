//! Places in line, from memory: a resource's line read whole once per
//! change and kept ([`Lines`]), so a crowd reloading its places costs one
//! read per process rather than one count per page; an entry memory cannot
//! place is counted alone.

use std::collections::HashMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use sqlx::PgPool;

use super::{ENTRY_SQL, Entry, EntryState};

/// Units of a resource not sold and not held by other shoppers: what its
/// line can still get.
const FOR_THE_LINE_SQL: &str = "select (r.total - r.sold - r.held \
        + coalesce((select sum(h.qty) from holds h \
                     where h.resource_id = r.id and h.state in ('held', 'awaiting_payment') \
                       and h.account_id like 'waitlist%'), 0))::bigint \
   from resources r where r.id = $1";

/// A resource's line as one read saw it: every entry queued, waiting or
/// offered, each waiting one with its place.
#[derive(Debug)]
struct Line {
    /// When the read began: changes committed before it are in it.
    read_at: DateTime<Utc>,
    entries: HashMap<String, Entry>,
}

/// Entries kept in memory at most, in one line or all lines together; a
/// longer line is counted entry by entry.
const LINE_AT_MOST: i64 = 200_000;

/// The lines of the shop's resources in memory: a crowd reloading its
/// places after a change costs one read of the line per process, not one
/// per page (each of which would count the entries ahead). A line is
/// believed while memory may be and its resource has not changed since the
/// line was read (every move in a line changes its resource's row: an
/// offer, a lapse, a payment, the draw, an entry leaving); an entry
/// confirmed since is not in it, and is read again. Cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct Lines {
    inner: Arc<LinesInner>,
}

#[derive(Debug, Default)]
struct LinesInner {
    lines: std::sync::Mutex<HashMap<String, Arc<Line>>>,
    /// One read of a resource's line at a time.
    reads: std::sync::Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// One read of any line at a time: a read holds up to LINE_AT_MOST
    /// entries before it is kept, so reads side by side would hold more.
    reading: tokio::sync::Mutex<()>,
}

impl Lines {
    /// The resource's line, if memory has one it may believe.
    fn believed(&self, live: &crate::live::LiveStock, resource: &str) -> Option<Arc<Line>> {
        let level = live.now()?.level(resource).cloned()?;
        let line = self
            .inner
            .lines
            .lock()
            .expect("never poisoned")
            .get(resource)
            .cloned()?;
        (level.changed_at < line.read_at).then_some(line)
    }

    /// The resource's line: believed, or read again (one read at a time per
    /// resource; those who wait for it take it). `None` when memory may not
    /// be believed, or the line is too long to keep.
    async fn line(
        &self,
        pool: &PgPool,
        live: &crate::live::LiveStock,
        resource: &str,
        stale: Option<&Arc<Line>>,
    ) -> sqlx::Result<Option<Arc<Line>>> {
        if live
            .now()
            .and_then(|s| s.level(resource).cloned())
            .is_none()
        {
            return Ok(None);
        }
        let gate = self
            .inner
            .reads
            .lock()
            .expect("never poisoned")
            .entry(resource.to_owned())
            .or_default()
            .clone();
        let _turn = gate.lock().await;
        if let Some(line) = self.believed(live, resource)
            && stale.is_none_or(|s| !Arc::ptr_eq(s, &line))
        {
            return Ok(Some(line));
        }
        let read = {
            let _reading = self.inner.reading.lock().await;
            read_line(pool, resource).await?
        };
        let Some(line) = read else {
            return Ok(None);
        };
        let line = Arc::new(line);
        let mut lines = self.inner.lines.lock().expect("never poisoned");
        lines.remove(resource);
        // bounded: the lines kept hold at most LINE_AT_MOST entries in all;
        // the lines read longest ago make room first
        let mut kept: usize = lines.values().map(|l| l.entries.len()).sum();
        while kept + line.entries.len() > LINE_AT_MOST as usize {
            let Some(oldest) = lines
                .iter()
                .min_by_key(|(_, l)| l.read_at)
                .map(|(r, _)| r.clone())
            else {
                break;
            };
            if let Some(gone) = lines.remove(&oldest) {
                kept -= gone.entries.len();
            }
        }
        lines.insert(resource.to_owned(), line.clone());
        Ok(Some(line))
    }

    /// `entry` with its place in line (how many entries are ahead, what
    /// they want, what the line can still get), from the line in memory.
    pub async fn place(
        &self,
        pool: &PgPool,
        live: &crate::live::LiveStock,
        entry: Entry,
    ) -> sqlx::Result<Entry> {
        if !matches!(
            entry.state(),
            EntryState::Queued | EntryState::Waiting | EntryState::Offered
        ) {
            return Ok(entry);
        }
        let mut stale = None;
        // a second read when the first did not have it (confirmed since)
        for _ in 0..2 {
            let line = match self.believed(live, &entry.resource_id) {
                Some(line) if stale.is_none() => line,
                _ => match self
                    .line(pool, live, &entry.resource_id, stale.as_ref())
                    .await?
                {
                    Some(line) => line,
                    None => break,
                },
            };
            if let Some(placed) = line.entries.get(&entry.token)
                && placed.state == entry.state
            {
                return Ok(placed.clone());
            }
            stale = Some(line);
        }
        placed_alone(pool, entry).await
    }
}

/// Read a resource's line whole, and work out every waiting entry's place.
/// `None` when it is longer than [`LINE_AT_MOST`].
async fn read_line(pool: &PgPool, resource: &str) -> sqlx::Result<Option<Line>> {
    let read_at = Utc::now();
    let mut tx = pool.begin().await?;
    // one snapshot for the line and what is left for it
    sqlx::query("set transaction isolation level repeatable read, read only")
        .execute(&mut *tx)
        .await?;
    let rows: Vec<Entry> = sqlx::query_as(&format!(
        "{ENTRY_SQL} where p.resource_id = $1 and w.state in ('queued', 'waiting', 'offered') \
          order by w.line_no nulls last, w.id limit {}",
        LINE_AT_MOST + 1
    ))
    .bind(resource)
    .fetch_all(&mut *tx)
    .await?;
    let for_the_line: i64 = sqlx::query_scalar(FOR_THE_LINE_SQL)
        .bind(resource)
        .fetch_optional(&mut *tx)
        .await?
        .unwrap_or(0);
    tx.commit().await?;
    if rows.len() as i64 > LINE_AT_MOST {
        return Ok(None);
    }
    let offered: i64 = rows
        .iter()
        .filter(|e| e.state() == EntryState::Offered)
        .map(|e| i64::from(e.qty))
        .sum();
    let (mut ahead, mut wanted) = (0i64, offered);
    let mut entries = HashMap::with_capacity(rows.len());
    for mut entry in rows {
        entry.for_the_line = for_the_line;
        if entry.state() == EntryState::Waiting {
            entry.ahead = Some(ahead);
            entry.wanted_ahead = Some(wanted);
            ahead += 1;
            wanted += i64::from(entry.qty);
        }
        entries.insert(entry.token.clone(), entry);
    }
    Ok(Some(Line { read_at, entries }))
}

/// One entry's place, counted for it alone (memory may not be believed,
/// or its line is too long to keep).
async fn placed_alone(pool: &PgPool, mut entry: Entry) -> sqlx::Result<Entry> {
    entry.for_the_line = sqlx::query_scalar(FOR_THE_LINE_SQL)
        .bind(&entry.resource_id)
        .fetch_optional(pool)
        .await?
        .unwrap_or(0);
    if entry.state() == EntryState::Waiting
        && let Some(line_no) = entry.line_no
    {
        /// The entries ahead of one, and the units they want.
        #[derive(sqlx::FromRow)]
        struct Ahead {
            ahead: i64,
            wanted: i64,
        }
        let Ahead { ahead, wanted } = sqlx::query_as(
            "select count(*) filter (where a.state = 'waiting' and a.line_no < $2) as ahead, \
                    coalesce(sum(a.qty) filter (where (a.state = 'waiting' and a.line_no < $2) \
                                                   or a.state = 'offered'), 0)::bigint as wanted \
               from waitlist_entries a join products q on q.id = a.product_id \
              where q.resource_id = $1 and a.state in ('waiting', 'offered')",
        )
        .bind(&entry.resource_id)
        .bind(line_no)
        .fetch_one(pool)
        .await?;
        entry.ahead = Some(ahead);
        entry.wanted_ahead = Some(wanted);
    }
    Ok(entry)
}
