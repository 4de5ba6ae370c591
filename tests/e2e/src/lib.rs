//! What `make bench-e2e`, `make soak` and tests/migration.rs share: our
//! operator and the Go operator as child processes, talking to them on
//! loopback, and the Memcached kinds, samples and namespaces they set up.

pub mod cluster;
pub mod loopback;
pub mod operators;
