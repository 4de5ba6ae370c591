//! Resource requirements that survive the API server's canonical spelling
//! of quantities: it stores `1024Mi` as `1Gi`, so a naive comparison would
//! see a change on every reconcile and write forever.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ResourceRequirements;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::metadata::keep_if_server_default;
use crate::quantity;

/// A container's resources: the CR's, spelled as the current object spells
/// equal quantities; with none in the CR, the server's empty default.
pub fn container_resources(
    desired: Option<&ResourceRequirements>,
    current: Option<ResourceRequirements>,
) -> Option<ResourceRequirements> {
    match desired {
        Some(desired) => Some(with_current_spelling(desired, current.as_ref())),
        None => keep_if_server_default(current, |r| *r == ResourceRequirements::default()),
    }
}

fn with_current_spelling(
    desired: &ResourceRequirements,
    current: Option<&ResourceRequirements>,
) -> ResourceRequirements {
    ResourceRequirements {
        limits: respell(desired.limits.as_ref(), current.and_then(|c| c.limits.as_ref())),
        requests: respell(desired.requests.as_ref(), current.and_then(|c| c.requests.as_ref())),
        claims: desired.claims.clone(),
    }
}

fn respell(
    desired: Option<&BTreeMap<String, Quantity>>,
    current: Option<&BTreeMap<String, Quantity>>,
) -> Option<BTreeMap<String, Quantity>> {
    let desired = desired?;
    Some(
        desired
            .iter()
            .map(|(name, want)| {
                let kept = current.and_then(|c| c.get(name)).filter(|have| same_quantity(have, want));
                (name.clone(), kept.unwrap_or(want).clone())
            })
            .collect(),
    )
}

/// Whether two quantities are exactly the same amount in any spelling.
pub fn same_quantity(a: &Quantity, b: &Quantity) -> bool {
    if a.0 == b.0 {
        return true;
    }
    match (quantity::parse_nanos(&a.0), quantity::parse_nanos(&b.0)) {
        (Ok(x), Ok(y)) => x == y,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn requirements(limits: &[(&str, &str)]) -> ResourceRequirements {
        ResourceRequirements {
            limits: Some(limits.iter().map(|(k, v)| (k.to_string(), Quantity(v.to_string()))).collect()),
            ..Default::default()
        }
    }

    #[test]
    fn keeps_the_servers_spelling_of_an_equal_quantity() {
        let desired = requirements(&[("memory", "1024Mi"), ("cpu", "0.5")]);
        let current = requirements(&[("memory", "1Gi"), ("cpu", "500m")]);
        let got = container_resources(Some(&desired), Some(current.clone()));
        assert_eq!(got, Some(current));
    }

    #[test]
    fn a_difference_of_one_unit_is_a_change() {
        let desired = requirements(&[("memory", "1000000001")]);
        let current = requirements(&[("memory", "1000000000")]);
        assert_eq!(container_resources(Some(&desired), Some(current)), Some(desired));
        let huge = requirements(&[("memory", "1Ei")]);
        let off_by_one = requirements(&[("memory", "1152921504606846977")]);
        assert_eq!(container_resources(Some(&huge), Some(off_by_one)), Some(huge));
    }

    #[test]
    fn takes_the_crs_value_when_the_amount_changed() {
        let desired = requirements(&[("memory", "2Gi")]);
        let current = requirements(&[("memory", "1Gi")]);
        assert_eq!(container_resources(Some(&desired), Some(current)), Some(desired));
    }

    #[test]
    fn without_resources_in_the_cr_only_the_empty_default_survives() {
        assert_eq!(
            container_resources(None, Some(ResourceRequirements::default())),
            Some(ResourceRequirements::default())
        );
        assert_eq!(container_resources(None, Some(requirements(&[("cpu", "1")]))), None);
        assert_eq!(container_resources(None, None), None);
    }
}
