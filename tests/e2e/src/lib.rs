//! What `make bench-e2e` and tests/migration.rs share: our operator and the
//! Go operator as child processes, and talking to them on loopback.

pub mod loopback;
pub mod operators;
