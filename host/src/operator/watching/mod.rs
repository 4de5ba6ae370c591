//! Watching: one cache per kind shared by every module, the
//! compact form objects are kept in (with each manager's applied fields),
//! the owned kinds' merge semantics as
//! the API server publishes them, the kinds a manifest names, which
//! parents reference which related objects, and which cache changes wake
//! which parents (never the echo of a reconcile's own write, but the next
//! step of a reconcile once its writes have landed).

pub mod cached_object;
pub mod caches;
pub mod kind_schemas;
pub mod managed_fields;
pub mod objects;
pub(super) mod own_writes;
pub mod references;
pub mod steps;
pub(super) mod triggers;
