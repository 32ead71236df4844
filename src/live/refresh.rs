//! The task that keeps memory fresh: a full read every
//! [`REFRESH_EVERY`](super::REFRESH_EVERY) and whenever the listener
//! (re)connects, and the notified resources as they are heard, all that
//! arrived together in one read; and the listener, on a connection of its
//! own, connecting again until the task is gone.

use std::collections::BTreeSet;
use std::sync::Weak;
use std::sync::atomic::Ordering;
use std::time::Duration;

use sqlx::PgPool;
use sqlx::postgres::{PgListener, PgPoolOptions};
use tokio::sync::{mpsc, oneshot};

use super::rooms::read_rooms;
use super::seats::read_seats;
use super::snapshot::{read_all, read_levels};
use super::{Inner, LISTENER_NAME, READER_NAME, REFRESH_EVERY};

/// What the listening task tells the refreshing one.
enum Heard {
    Connected,
    Lost,
    Stock(String),
    Catalogue,
}

/// The task behind [`LiveStock`]: reads everything at once, every
/// [`REFRESH_EVERY`] and whenever the listener (re)connects, and what is
/// notified as it is, every notification that arrived together in one read.
pub(super) async fn keep_fresh(
    inner: Weak<Inner>,
    pool: PgPool,
    mut asked: mpsc::UnboundedReceiver<oneshot::Sender<()>>,
) {
    let (heard_tx, mut heard) = mpsc::unbounded_channel();
    // the listener has a connection of its own, named so it can be found;
    // the reads have their own too: the crowd waiting for the shop's pool
    // never delays what memory learns, and memory's reads never count
    // among the requests' round trips
    let options = (*pool.connect_options()).clone();
    let listen_pool = PgPoolOptions::new()
        .max_connections(1)
        .connect_lazy_with(options.clone().application_name(LISTENER_NAME));
    let pool = PgPoolOptions::new()
        .max_connections(1)
        .connect_lazy_with(options.application_name(READER_NAME));
    tokio::spawn(listen(listen_pool.clone(), heard_tx));
    let mut tick = tokio::time::interval(REFRESH_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut complained = false;
    let mut listening = false;
    let mut hearing = true;
    loop {
        let mut full = false;
        let mut resources = BTreeSet::new();
        let mut waiting = Vec::new();
        tokio::select! {
            _ = tick.tick() => full = true,
            Some(done) = asked.recv() => {
                full = true;
                waiting.push(done);
                while let Ok(done) = asked.try_recv() {
                    waiting.push(done);
                }
            }
            got = heard.recv(), if hearing => {
                hearing = got.is_some();
                let mut next = got;
                while let Some(event) = next.take() {
                    match event {
                        Heard::Stock(id) => {
                            resources.insert(id);
                        }
                        Heard::Catalogue => full = true,
                        Heard::Connected => {
                            listening = true;
                            full = true;
                        }
                        Heard::Lost => listening = false,
                    }
                    next = heard.try_recv().ok();
                }
            }
        }
        let Some(me) = inner.upgrade() else { break };
        me.listening.store(listening, Ordering::Relaxed);
        if !full && !resources.is_empty() {
            let ids: Vec<&str> = resources.iter().map(String::as_str).collect();
            let old = me.current();
            let read = async {
                let rows = read_levels(&pool, &ids).await?;
                let seats = read_seats(&pool, old.as_deref(), false, &rows).await?;
                let rooms = read_rooms(&pool, old.as_deref(), false, &rows).await?;
                Ok::<_, sqlx::Error>((rows, seats, rooms))
            };
            match read.await {
                Ok((rows, seats, rooms)) => {
                    me.notified_reads.fetch_add(1, Ordering::Relaxed);
                    me.merge(None, rows, seats, rooms);
                }
                // the next tick reads everything
                Err(error) => tracing::debug!(%error, "cannot read the notified stock"),
            }
            continue;
        }
        if !full {
            continue;
        }
        let old = me.current();
        let read = async {
            let (full, rows) = read_all(&pool, old.as_deref()).await?;
            let seats = read_seats(&pool, old.as_deref(), true, &rows).await?;
            let rooms = read_rooms(&pool, old.as_deref(), true, &rows).await?;
            Ok::<_, sqlx::Error>((full, rows, seats, rooms))
        };
        match read.await {
            Ok((full, rows, seats, rooms)) => {
                me.full_reads.fetch_add(1, Ordering::Relaxed);
                me.merge(Some(full), rows, seats, rooms);
                complained = false;
                for done in waiting {
                    let _ = done.send(());
                }
            }
            Err(error) => {
                if !complained {
                    tracing::warn!(%error, "cannot read the stock; pages read the database until it comes back");
                    complained = true;
                }
            }
        }
    }
    listen_pool.close().await;
    pool.close().await;
}

/// Listens on its own connection and tells [`keep_fresh`] what it hears,
/// when it connects and when the connection is lost; connects again until
/// `keep_fresh` is gone.
async fn listen(pool: PgPool, heard: mpsc::UnboundedSender<Heard>) {
    let mut complained = false;
    loop {
        let mut listener = match subscribe(&pool).await {
            Ok(listener) => listener,
            Err(error) => {
                if heard.is_closed() || pool.is_closed() {
                    return;
                }
                if !complained {
                    tracing::warn!(%error, "cannot listen for stock changes; reading every {REFRESH_EVERY:?} meanwhile");
                    complained = true;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
        };
        complained = false;
        if heard.send(Heard::Connected).is_err() {
            return;
        }
        while let Ok(Some(notification)) = listener.try_recv().await {
            let event = match notification.channel() {
                "hf_catalogue" => Heard::Catalogue,
                _ => Heard::Stock(notification.payload().to_owned()),
            };
            if heard.send(event).is_err() {
                return;
            }
        }
        if heard.send(Heard::Lost).is_err() {
            return;
        }
    }
}

async fn subscribe(pool: &PgPool) -> sqlx::Result<PgListener> {
    let mut listener = PgListener::connect_with(pool).await?;
    // a lost connection is ours to replace, after saying so
    listener.eager_reconnect(false);
    listener.listen_all(["hf_stock", "hf_catalogue"]).await?;
    Ok(listener)
}
