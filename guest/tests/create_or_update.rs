//! Seed 002's CreateOrUpdate semantics, for every owned kind through the
//! `desired` export a host calls inside its mutate step: created from
//! nothing, no change when the spec matches, an update when the spec
//! changed, drift corrected, and level-triggered convergence.

mod common;

use common::*;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

const KINDS: [&str; 6] =
    ["Deployment", "Service", "PodDisruptionBudget", "HorizontalPodAutoscaler", "ServiceMonitor", "NetworkPolicy"];

fn base() -> Value {
    json!({
        "resources": { "requests": { "cpu": "1" } },
        "autoscaling": { "enabled": true, "minReplicas": 3, "maxReplicas": 5 },
        "highAvailability": { "podDisruptionBudget": { "enabled": true, "minAvailable": 1 } },
        "monitoring": { "enabled": true, "serviceMonitor": {} },
        "security": { "networkPolicy": { "enabled": true } },
    })
}

/// One change per kind that touches that kind.
fn change_for(kind: &str) -> Value {
    match kind {
        "Deployment" => json!({ "image": "memcached:1.6.40" }),
        "Service" => json!({ "service": { "annotations": { "a": "b" } } }),
        "PodDisruptionBudget" => json!({ "highAvailability": { "podDisruptionBudget": { "minAvailable": 2 } } }),
        "HorizontalPodAutoscaler" => json!({ "autoscaling": { "maxReplicas": 9 } }),
        "ServiceMonitor" => json!({ "monitoring": { "serviceMonitor": { "interval": "15s" } } }),
        "NetworkPolicy" => json!({ "security": { "networkPolicy": { "allowedSources": [{ "podSelector": {} }] } } }),
        other => panic!("unknown kind {other}"),
    }
}

#[test]
fn a_missing_object_is_created_as_rendered() {
    let cr = cr_value(base());
    let rendered = render(&cr);
    for (kind, object) in KINDS.iter().zip(&rendered) {
        assert_eq!(object["kind"], *kind);
        assert_eq!(&desired(kind, &cr, None, &[]).unwrap(), object, "{kind}");
    }
}

#[test]
fn an_unchanged_spec_gives_back_the_current_object() {
    let crs = [
        cr_value(base()),
        cr_value(merge(base(), json!({ "image": "memcached:1.6.40", "memcached": { "verbosity": 2 } }))),
    ];
    for cr in crs {
        for kind in KINDS {
            let current = desired(kind, &cr, None, &[]).unwrap();
            assert_eq!(desired(kind, &cr, Some(&current), &[]).unwrap(), current, "{kind}");
        }
    }
}

#[test]
fn a_changed_spec_updates_the_object_it_touches() {
    let before = cr_value(base());
    for kind in KINDS {
        let after = cr_value(merge(base(), change_for(kind)));
        let current = desired(kind, &before, None, &[]).unwrap();
        let updated = desired(kind, &after, Some(&current), &[]).unwrap();
        assert_ne!(updated, current, "{kind}: must update");
        assert_eq!(updated, desired(kind, &after, None, &[]).unwrap(), "{kind}: as if created for the new spec");
    }
}

#[test]
fn external_drift_of_labels_or_owner_is_corrected() {
    let cr = cr_value(base());
    for kind in KINDS {
        let want = desired(kind, &cr, None, &[]).unwrap();
        for (row, drift) in [
            ("standard label", json!({ "metadata": { "labels": { "app.kubernetes.io/managed-by": "kubectl" } } })),
            ("owner reference removed", json!({ "metadata": { "ownerReferences": null } })),
        ] {
            let drifted = merge(want.clone(), drift);
            assert_ne!(drifted, want, "{kind}: {row}");
            assert_eq!(desired(kind, &cr, Some(&drifted), &[]).unwrap(), want, "{kind}: {row}");
        }
    }
}

/// Level-triggered: whatever sequence of specs came before, the object
/// converges to what the last spec alone produces.
#[test]
fn any_history_converges_to_the_last_spec() {
    let specs: Vec<Value> = std::iter::once(base()).chain(KINDS.iter().map(|k| merge(base(), change_for(k)))).collect();
    for kind in KINDS {
        for last in &specs {
            let want = desired(kind, &cr_value(last.clone()), None, &[]).unwrap();
            let mut current: Option<Value> = None;
            for spec in specs.iter().rev().chain(std::iter::once(last)) {
                current = desired(kind, &cr_value(spec.clone()), current.as_ref(), &[]);
            }
            assert_eq!(current.unwrap(), want, "{kind}: last spec {last}");
        }
    }
}
