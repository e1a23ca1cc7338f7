//! Run state storage. (Stub.)
