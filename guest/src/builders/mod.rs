//! One pure builder per owned object. Each sets, in place, exactly the fields
//! the operator owns on the current object (or a new one), as the seeds'
//! `construct*` functions do inside CreateOrUpdate's mutate function.

mod deployment;
mod hpa;
pub mod labels;
mod metadata;
mod network_policy;
mod pdb;
pub mod ports;
mod resources;
mod secret_hash;
mod service;
mod service_monitor;

pub use deployment::*;
pub use hpa::construct_hpa;
pub use network_policy::construct_network_policy;
pub use pdb::construct_pdb;
pub use secret_hash::secret_hash;
pub use service::construct_service;
pub use service_monitor::{API_VERSION as SERVICE_MONITOR_API_VERSION, construct_service_monitor};
