//! Combining concurrent calls that queue on the same row lock. Every write
//! to one resource waits for that resource's row lock, and the lock is held
//! until the commit reaches disk, so one hot resource gets one commit's worth
//! of work at a time. A [`Combiner`] keeps one call per key in flight:
//! requests that arrive meanwhile wait in that key's queue, and when the call
//! returns the whole queue goes as the next call, decided under one lock and
//! committed once. A lone request goes at once; no timer ever waits.
//!
//! What a call does is a [`Batch`]: the holds of the engine, the checkout
//! starts and the payment starts of the shop. Each request still gets its
//! own reply. Several processes each combine their own; the database still
//! serialises them on the row lock.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;

/// One kind of combined call.
pub trait Batch: Send + Sync + 'static {
    type Request: Send + 'static;
    type Reply: Send + 'static;

    /// Most requests one call carries.
    const MAX: usize;

    /// Send `requests` (all for `key`, in arrival order) and answer each, in
    /// the same order. A failure of the call is every request's failure.
    fn run(
        &self,
        key: &str,
        requests: Vec<Self::Request>,
    ) -> impl Future<Output = Vec<Self::Reply>> + Send;

    /// The reply of a request whose call ended without answering it (a
    /// panic, a runtime shutting down).
    fn lost() -> Self::Reply;
}

/// Combines one kind of call per key for one process. Cheap to clone.
pub struct Combiner<B: Batch> {
    batch: Arc<B>,
    queues: Queues<B>,
    /// Calls made so far (for the curious and the tests).
    calls: Arc<AtomicU64>,
}

impl<B: Batch> Clone for Combiner<B> {
    fn clone(&self) -> Self {
        Self {
            batch: self.batch.clone(),
            queues: self.queues.clone(),
            calls: self.calls.clone(),
        }
    }
}

impl<B: Batch> std::fmt::Debug for Combiner<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Combiner")
            .field("calls", &self.calls())
            .finish_non_exhaustive()
    }
}

type Queues<B> = Arc<Mutex<HashMap<String, Arc<Queue<B>>>>>;

struct Queue<B: Batch> {
    state: Mutex<QueueState<B>>,
}

struct QueueState<B: Batch> {
    waiting: Vec<Waiting<B>>,
    /// A call for this key is in flight (its task drains the queue).
    flying: bool,
}

struct Waiting<B: Batch> {
    request: B::Request,
    reply: oneshot::Sender<B::Reply>,
}

impl<B: Batch> Combiner<B> {
    pub fn new(batch: B) -> Self {
        Self {
            batch: Arc::new(batch),
            queues: Arc::default(),
            calls: Arc::default(),
        }
    }

    /// How many calls the requests so far took.
    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::Relaxed)
    }

    /// Send `request` for `key`, together with whatever else is waiting for
    /// the same key.
    pub async fn call(&self, key: &str, request: B::Request) -> B::Reply {
        let queue = self.queue(key);
        let (reply, answer) = oneshot::channel();
        let lead = {
            let mut state = queue.state.lock().expect("queue lock");
            state.waiting.push(Waiting { request, reply });
            !std::mem::replace(&mut state.flying, true)
        };
        if lead {
            // its own task: a caller that goes away (a closed connection)
            // must not strand the others waiting behind it
            let flight = Flight {
                batch: self.batch.clone(),
                queues: self.queues.clone(),
                key: key.to_owned(),
                queue,
                calls: self.calls.clone(),
                landed: false,
            };
            tokio::spawn(flight.drain());
        }
        answer.await.unwrap_or_else(|_| B::lost())
    }

    fn queue(&self, key: &str) -> Arc<Queue<B>> {
        let mut queues = self.queues.lock().expect("queues lock");
        queues
            .entry(key.to_owned())
            .or_insert_with(|| {
                Arc::new(Queue {
                    state: Mutex::new(QueueState {
                        waiting: Vec::new(),
                        flying: false,
                    }),
                })
            })
            .clone()
    }
}

/// The task that sends one key's queue, call after call, until it is
/// empty. If it ends any other way (a panic, a runtime shutting down), its
/// drop lets the queue fly again and tells those waiting.
struct Flight<B: Batch> {
    batch: Arc<B>,
    queues: Queues<B>,
    key: String,
    queue: Arc<Queue<B>>,
    calls: Arc<AtomicU64>,
    landed: bool,
}

impl<B: Batch> Flight<B> {
    async fn drain(mut self) {
        loop {
            // Callers just answered are runnable now and about to ask
            // again: one turn of the scheduler lets them join this call
            // instead of each leading a call of one. A yield, not a timer.
            tokio::task::yield_now().await;
            let batch: Vec<Waiting<B>> = {
                let mut state = self.queue.state.lock().expect("queue lock");
                // a caller that stopped waiting before its call went out
                // gets nothing done, as a direct call never sent would not
                state.waiting.retain(|w| !w.reply.is_closed());
                if state.waiting.is_empty() {
                    state.flying = false;
                    drop(state);
                    self.landed = true;
                    self.forget_if_idle();
                    return;
                }
                let take = state.waiting.len().min(B::MAX);
                state.waiting.drain(..take).collect()
            };
            self.calls.fetch_add(1, Ordering::Relaxed);
            let (requests, replies): (Vec<_>, Vec<_>) =
                batch.into_iter().map(|w| (w.request, w.reply)).unzip();
            let answers = self.batch.run(&self.key, requests).await;
            debug_assert_eq!(answers.len(), replies.len());
            // a caller that stopped waiting meanwhile has its effect all the
            // same, as it would with a direct call
            for (reply, answer) in replies.into_iter().zip(answers) {
                let _ = reply.send(answer);
            }
        }
    }

    /// An idle queue leaves the map, so made-up keys cannot grow it.
    fn forget_if_idle(&self) {
        let mut queues = self.queues.lock().expect("queues lock");
        let idle = {
            let state = self.queue.state.lock().expect("queue lock");
            !state.flying && state.waiting.is_empty()
        };
        if idle
            && queues
                .get(&self.key)
                .is_some_and(|q| Arc::ptr_eq(q, &self.queue))
        {
            queues.remove(&self.key);
        }
    }
}

impl<B: Batch> Drop for Flight<B> {
    fn drop(&mut self) {
        if self.landed {
            return;
        }
        // dropping the waiting senders answers their callers with `lost`
        if let Ok(mut state) = self.queue.state.lock() {
            state.waiting.clear();
            state.flying = false;
        }
    }
}

/// The same failure again, for each request of a combined call (errors do
/// not clone). A failure another try may mend (the database away, a
/// rollback) stays one, so every request of the batch is tried again; any
/// other keeps its text.
pub fn share_error(error: &sqlx::Error) -> sqlx::Error {
    use crate::retry::{Failure, classify};
    match error {
        sqlx::Error::PoolTimedOut => sqlx::Error::PoolTimedOut,
        sqlx::Error::PoolClosed => sqlx::Error::PoolClosed,
        sqlx::Error::WorkerCrashed => sqlx::Error::WorkerCrashed,
        other => match classify(other) {
            Failure::Transient(_) => sqlx::Error::Io(std::io::Error::new(
                std::io::ErrorKind::ConnectionAborted,
                other.to_string(),
            )),
            Failure::Final => sqlx::Error::Protocol(other.to_string()),
        },
    }
}
