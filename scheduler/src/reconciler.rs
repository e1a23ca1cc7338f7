//! The reconciler: syncs the config's desired state into the store's run state.
//! (Stub.)
