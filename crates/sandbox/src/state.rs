//! State the sandbox's handlers share: one lock per provider, held for a
//! short critical section and never across an await.

use std::sync::{Arc, Mutex};

/// Shared mutable state with a short critical section.
#[derive(Debug, Default)]
pub(crate) struct Shared<T>(Arc<Mutex<T>>);

impl<T> Clone for Shared<T> {
    fn clone(&self) -> Self {
        Self(self.0.clone())
    }
}

impl<T> Shared<T> {
    pub(crate) fn new(value: T) -> Self {
        Self(Arc::new(Mutex::new(value)))
    }

    /// Run `f` under the lock. A panic elsewhere does not lock the sandbox
    /// up: the state is taken as it was left.
    pub(crate) fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        let mut guard = self
            .0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        f(&mut guard)
    }
}
