//! Writing what a reconcile's plan (`planning/step.rs`) calls for:
//! CreateOrUpdate or a server-side apply per desired child that differs
//! (the module's `writes`), deleting the children a
//! module no longer wants, the status (and what was last written of it),
//! events, what the host reads of the API server's answers, and the count
//! of API requests by verb. Nothing here calls a module.

pub mod api_requests;
pub(super) mod create_or_update;
pub(super) mod delete_unwanted;
pub(super) mod events;
pub(super) mod finalizer;
pub(super) mod server_side_apply;
pub(super) mod status;
pub(super) mod status_memo;
pub(super) mod write_answer;
