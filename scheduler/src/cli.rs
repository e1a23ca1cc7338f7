//! The command line shared by the `scheduler` binary and by applications built on
//! [`run`](crate::run): `next` previews a schedule, `check-config` validates a config file.
//! (Stub.)
