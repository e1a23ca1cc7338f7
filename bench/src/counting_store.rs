//! A [`Store`] that counts the calls made to the store it wraps, by method: the one measure of
//! database work that means the same on PostgreSQL and SQLite (each call is one transaction or
//! one read on either backend). PostgreSQL's statements are also counted by the server
//! (`pg_stat_statements`); SQLite has no such counter.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use scheduler::store::Store;
use scheduler::testing::store::StoreLayer;

/// Calls by method name since the last [`Calls::reset`].
#[derive(Default)]
pub struct Calls(Mutex<BTreeMap<&'static str, u64>>);

impl Calls {
    fn add(&self, method: &'static str) {
        *self.0.lock().unwrap().entry(method).or_default() += 1;
    }
    /// The counts so far, by method.
    pub fn snapshot(&self) -> BTreeMap<&'static str, u64> {
        self.0.lock().unwrap().clone()
    }
    /// Sum over all methods.
    pub fn total(&self) -> u64 {
        self.0.lock().unwrap().values().sum()
    }
    /// Starts counting from zero.
    pub fn reset(&self) {
        self.0.lock().unwrap().clear();
    }
}

/// Wraps a store; every call is counted in its [`Calls`] (by [`StoreLayer::observe`]), then
/// forwarded.
pub struct CountingStore {
    inner: Arc<dyn Store>,
    calls: Arc<Calls>,
}

impl CountingStore {
    /// `inner`, counted; keep the returned counter to read it.
    pub fn wrap(inner: Arc<dyn Store>) -> (Arc<dyn Store>, Arc<Calls>) {
        let calls = Arc::new(Calls::default());
        let store = CountingStore {
            inner,
            calls: Arc::clone(&calls),
        };
        (Arc::new(store), calls)
    }
}

impl StoreLayer for CountingStore {
    fn inner(&self) -> &dyn Store {
        &*self.inner
    }

    fn observe(&self, operation: &'static str) {
        self.calls.add(operation);
    }
}
