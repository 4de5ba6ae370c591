//! `rbac`: what a module's own identity needs under
//! `--module-identity=service-account`, as objects to apply: its
//! ServiceAccount (named after the module, never mounted by a pod), a
//! ClusterRole with exactly the permissions the operator checks it for at
//! load (`needed_permissions`), its binding, and the Role letting the
//! operator's ServiceAccount impersonate it. deploy/rbac/module_role.yaml
//! and impersonation_role.yaml are this for the Memcached module.

use serde_json::{Value, json};

use crate::operator::identity::{IdentityError, module_account, needed_permissions};
use crate::runtime::bindings::{Manifest, WriteModel};

const RBAC: &str = "rbac.authorization.k8s.io/v1";

/// The objects for `modules` (each module's manifest, how it writes and
/// whether it finalizes),
/// whose ServiceAccounts (each named `account_prefix` then the module's
/// name) live in `namespace` beside the operator's ServiceAccount
/// `operator`.
pub fn rbac_objects(
    modules: &[(&Manifest, WriteModel, bool)],
    namespace: &str,
    operator: &str,
    account_prefix: &str,
) -> Result<Vec<Value>, IdentityError> {
    let labels = json!({ "app.kubernetes.io/name": operator });
    let mut objects = Vec::new();
    let mut accounts = Vec::new();
    for &(manifest, writes, finalizes) in modules {
        let module = &manifest.name;
        let account = module_account(account_prefix, module)?;
        let role = format!("{operator}-module-{module}");
        objects.push(json!({
            "apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": { "name": account, "namespace": namespace, "labels": labels },
            "automountServiceAccountToken": false,
        }));
        objects.push(json!({
            "apiVersion": RBAC, "kind": "ClusterRole",
            "metadata": { "name": role, "labels": labels },
            "rules": rules(manifest, writes, finalizes),
        }));
        objects.push(json!({
            "apiVersion": RBAC, "kind": "ClusterRoleBinding",
            "metadata": { "name": role, "labels": labels },
            "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role },
            "subjects": [{ "kind": "ServiceAccount", "name": account, "namespace": namespace }],
        }));
        accounts.push(account);
    }
    let impersonate = format!("{operator}-impersonate-modules");
    objects.push(json!({
        "apiVersion": RBAC, "kind": "Role",
        "metadata": { "name": impersonate, "namespace": namespace, "labels": labels },
        "rules": [{ "apiGroups": [""], "resources": ["serviceaccounts"], "resourceNames": accounts, "verbs": ["impersonate"] }],
    }));
    objects.push(json!({
        "apiVersion": RBAC, "kind": "RoleBinding",
        "metadata": { "name": impersonate, "namespace": namespace, "labels": labels },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": impersonate },
        "subjects": [{ "kind": "ServiceAccount", "name": operator, "namespace": namespace }],
    }));
    Ok(objects)
}

/// One rule per resource, its verbs in the order the host needs them.
fn rules(manifest: &Manifest, writes: WriteModel, finalizes: bool) -> Vec<Value> {
    let mut rules: Vec<(String, String, Vec<&'static str>)> = Vec::new();
    for permission in needed_permissions(manifest, writes, finalizes) {
        let resource = match permission.subresource {
            Some(sub) => format!("{}/{sub}", permission.resource),
            None => permission.resource.clone(),
        };
        match rules.iter_mut().find(|(group, r, _)| *group == permission.group && *r == resource) {
            Some((_, _, verbs)) => verbs.push(permission.verb),
            None => rules.push((permission.group.clone(), resource, vec![permission.verb])),
        }
    }
    rules
        .into_iter()
        .map(|(group, resource, verbs)| json!({ "apiGroups": [group], "resources": [resource], "verbs": verbs }))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::operator::identity::test_manifest;

    #[test]
    fn a_module_gets_its_account_its_role_and_the_operator_may_impersonate_it() {
        let manifest = test_manifest(&["/ConfigMap/configmaps"], &["/Secret/secrets"]);
        let objects =
            rbac_objects(&[(&manifest, WriteModel::Replace, false)], "ops", "wasm-operator", "").expect("objects");
        let kinds: Vec<&str> = objects.iter().filter_map(|o| o["kind"].as_str()).collect();
        assert_eq!(kinds, ["ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"]);
        assert_eq!(
            objects[0]["metadata"],
            json!({"name": "greeting", "namespace": "ops", "labels": {"app.kubernetes.io/name": "wasm-operator"}})
        );
        assert_eq!(
            objects[1]["rules"],
            json!([
                {"apiGroups": ["example.com"], "resources": ["greetings"], "verbs": ["list", "watch"]},
                {"apiGroups": ["example.com"], "resources": ["greetings/status"], "verbs": ["patch"]},
                {"apiGroups": ["example.com"], "resources": ["greetings/finalizers"], "verbs": ["update"]},
                {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch", "create", "update", "delete"]},
                {"apiGroups": [""], "resources": ["secrets"], "verbs": ["list", "watch"]},
            ])
        );
        assert_eq!(
            objects[2]["subjects"][0],
            json!({"kind": "ServiceAccount", "name": "greeting", "namespace": "ops"})
        );
        assert_eq!(objects[3]["rules"][0]["resourceNames"], json!(["greeting"]));
        assert_eq!(objects[4]["subjects"][0]["name"], "wasm-operator");
    }

    #[test]
    fn a_module_that_finalizes_may_patch_its_parents_for_its_finalizer() {
        let manifest = test_manifest(&["/ConfigMap/configmaps"], &[]);
        let objects =
            rbac_objects(&[(&manifest, WriteModel::Apply, true)], "ops", "wasm-operator", "").expect("objects");
        assert_eq!(
            objects[1]["rules"][0],
            json!({"apiGroups": ["example.com"], "resources": ["greetings"], "verbs": ["list", "watch", "patch"]})
        );
    }

    #[test]
    fn the_prefix_names_the_account_its_binding_and_what_the_operator_may_impersonate() {
        let manifest = test_manifest(&["/ConfigMap/configmaps"], &[]);
        let objects = rbac_objects(&[(&manifest, WriteModel::Replace, false)], "ops", "team-b-operator", "team-b-")
            .expect("objects");
        assert_eq!(objects[0]["metadata"]["name"], "team-b-greeting");
        // The role keeps the module's name after the operator's, which is already the release's own.
        assert_eq!(objects[1]["metadata"]["name"], "team-b-operator-module-greeting");
        assert_eq!(objects[2]["subjects"][0]["name"], "team-b-greeting");
        assert_eq!(objects[3]["rules"][0]["resourceNames"], json!(["team-b-greeting"]));
        let refused = rbac_objects(&[(&manifest, WriteModel::Replace, false)], "ops", "wasm-operator", "Team_")
            .expect_err("refused");
        assert!(refused.to_string().contains("\"Team_greeting\""), "{refused}");
    }
}
