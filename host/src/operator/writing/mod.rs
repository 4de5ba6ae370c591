//! Writing: CreateOrUpdate per desired child, deleting the children a module
//! no longer wants, the status, events, how objects are compared so that an
//! unchanged one costs no call, and the count of API requests by verb.

pub(super) mod answers;
pub mod api_requests;
pub mod compare;
pub(super) mod create_or_update;
pub(super) mod delete_unwanted;
pub(super) mod events;
pub(super) mod status;
