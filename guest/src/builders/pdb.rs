//! The PodDisruptionBudget (policy/v1), when highAvailability.podDisruptionBudget.enabled.

use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::labels::labels_for_memcached;
use super::metadata::set_identity;
use crate::api::Memcached;

pub fn construct_pdb(memcached: &Memcached, pdb: &mut PodDisruptionBudget) {
    let name = memcached.metadata.name.as_deref().unwrap_or_default();
    set_identity(&mut pdb.metadata, memcached);
    pdb.metadata.labels = Some(labels_for_memcached(name));

    // minAvailable if set, else maxUnavailable if set, else minAvailable 1.
    let (min_available, max_unavailable) =
        memcached.spec.pdb().map(|p| p.effective_bounds()).unwrap_or((Some(IntOrString::Int(1)), None));
    let spec = pdb.spec.get_or_insert_with(Default::default);
    spec.selector = Some(LabelSelector { match_labels: Some(labels_for_memcached(name)), match_expressions: None });
    spec.min_available = min_available;
    spec.max_unavailable = max_unavailable;
}
