//! [`StoreLayer`]: a store made of another store and a few changes, the seam for tests and
//! instrumentation. It knows nothing about any backend; its forwarding (one blanket
//! implementation per role trait, and `Store`'s) is generated from the one list of the store's
//! operations (`methods.rs`).

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::*;

macro_rules! store_layer {
    (
        {}
        Store { $($own:ident($($own_arg:ident: $own_ty:ty),* $(,)?) -> $own_out:ty;)* }
        $($role:ident {
            $($name:ident($($arg:ident: $ty:ty),* $(,)?) -> $out:ty $(, unless $nothing:expr)?;)*
        })*
    ) => {
        /// A [`Store`] made of another one ([`inner`](Self::inner)) and changes to some of its
        /// operations: the seam for tests and instrumentation (count the calls, slow one
        /// operation down, make one fail). It is not meant for composing production stores.
        ///
        /// Every method forwards to `inner()` unless the layer overrides it, and every
        /// `StoreLayer` is a [`Store`] and each of its role traits (blanket implementations), so
        /// a layer names only what it changes and needs no edit when the store gains an
        /// operation. [`observe`](Self::observe)
        /// sees each operation's name before it runs.
        ///
        /// Call a layer as a `dyn Store` (or through its role trait, e.g. `ClaimStore::`): with
        /// both traits in scope, a method call on the layer's own type names two methods.
        ///
        /// ```
        /// use std::sync::Arc;
        /// use std::sync::atomic::{AtomicU64, Ordering};
        ///
        /// use scheduler::store::{Store, StoreResult};
        /// use scheduler::testing::store::{StoreLayer, WakeInfo};
        ///
        /// /// Counts every operation, and answers `next_wake` with nothing due.
        /// struct Counted {
        ///     inner: Arc<dyn Store>,
        ///     calls: AtomicU64,
        /// }
        ///
        /// #[async_trait::async_trait]
        /// impl StoreLayer for Counted {
        ///     fn inner(&self) -> &dyn Store {
        ///         &*self.inner
        ///     }
        ///
        ///     fn observe(&self, _operation: &'static str) {
        ///         self.calls.fetch_add(1, Ordering::Relaxed);
        ///     }
        ///
        ///     async fn next_wake(&self, node_id: &str, tasks: &[String]) -> StoreResult<WakeInfo> {
        ///         let mut wake = self.inner.next_wake(node_id, tasks).await?;
        ///         wake.due_at = None;
        ///         Ok(wake)
        ///     }
        /// }
        ///
        /// # #[tokio::main(flavor = "current_thread")] async fn main() -> StoreResult<()> {
        /// # let dir = tempfile::tempdir().unwrap();
        /// let store = scheduler::store::SqliteStore::builder(dir.path().join("s.db")).connect()?;
        /// let counted = Arc::new(Counted { inner: Arc::new(store), calls: AtomicU64::new(0) });
        /// let store: Arc<dyn Store> = counted.clone();
        /// store.migrate().await?;
        /// assert_eq!(store.next_wake("n", &[]).await?.due_at, None);
        /// assert_eq!(counted.calls.load(Ordering::Relaxed), 2);
        /// # Ok(()) }
        /// ```
        #[async_trait]
        pub trait StoreLayer: Send + Sync + 'static {
            /// The store this layer wraps.
            fn inner(&self) -> &dyn Store;

            /// Called with an operation's name (as [`Store`] spells it) before the operation
            /// runs, whether the layer overrides it or not; [`describe`](Store::describe) and
            /// [`database_server`](Store::database_server) are not operations. Does nothing
            /// unless overridden.
            fn observe(&self, operation: &'static str) {
                let _ = operation;
            }

            /// Forwards to [`Store::describe`] on [`inner`](Self::inner).
            fn describe(&self) -> String {
                self.inner().describe()
            }

            /// Forwards to [`Store::database_server`] on [`inner`](Self::inner).
            fn database_server(&self) -> Option<DatabaseServer> {
                self.inner().database_server()
            }

            $(
                #[doc = concat!(
                    "Forwards to [`Store::", stringify!($own), "`] on [`inner`](Self::inner)."
                )]
                async fn $own(&self, $($own_arg: $own_ty),*) -> $own_out {
                    self.inner().$own($($own_arg),*).await
                }
            )*

            $($(
                #[doc = concat!(
                    "Forwards to [`", stringify!($role), "::", stringify!($name),
                    "`] on [`inner`](Self::inner)."
                )]
                async fn $name(&self, $($arg: $ty),*) -> $out {
                    self.inner().$name($($arg),*).await
                }
            )*)*
        }

        #[async_trait]
        impl<L: StoreLayer> Store for L {
            fn describe(&self) -> String {
                StoreLayer::describe(self)
            }

            fn database_server(&self) -> Option<DatabaseServer> {
                StoreLayer::database_server(self)
            }

            $(
                async fn $own(&self, $($own_arg: $own_ty),*) -> $own_out {
                    self.observe(stringify!($own));
                    StoreLayer::$own(self, $($own_arg),*).await
                }
            )*
        }

        $(
            #[async_trait]
            impl<L: StoreLayer> $role for L {
                $(
                    async fn $name(&self, $($arg: $ty),*) -> $out {
                        self.observe(stringify!($name));
                        StoreLayer::$name(self, $($arg),*).await
                    }
                )*
            }
        )*
    };
}

store_methods!(store_layer! {});
