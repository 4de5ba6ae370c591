//! Least privilege per module (`host/src/operator/identity/`): each module's
//! writes are made as its own ServiceAccount (impersonated), so the API
//! server lets a module write only what its own Role grants, even when the
//! operator's own role could do more (here the operator user is
//! cluster-admin). A module whose Role lacks what its manifest claims is
//! refused at load, by the binary too, and a new version claiming more is
//! refused at swap (the LogicModule's `Verified` condition), each naming
//! the verb and the kind. Two modules in one process act as two identities.
//! Real API server (its authorizer, its audit log), the Greeting module's
//! builds (v1; `owns-secret`, which also owns a Secret per Greeting) and
//! the Memcached module.

#[path = "logic_module_support.rs"]
mod logic_module_support;
#[allow(dead_code)]
#[path = "oci_registry.rs"]
mod oci_registry;
#[path = "operator_support.rs"]
mod operator_support;

use std::sync::Arc;
use std::time::Duration;

use control_plane::{AuditEvent, ControlPlane, User};
use k8s_openapi::api::authorization::v1::{ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec};
use kube::Client;
use kube::api::{Api, DynamicObject, PostParams};
use logic_module_support::{LOGIC_MODULE_CRD, built, has, wait_logic_module};
use oci_registry::OciRegistry;
use operator_support::*;
use serde_json::json;
use wasm_operator::operator::Options;
use wasm_operator::operator::errors::OperatorError;
use wasm_operator::operator::identity::{ModuleIdentity, needed_permissions};
use wasm_operator::operator::swapping::logic_modules::LogicModuleOptions;
use wasm_operator::runtime::logic_module::LogicModule;
use wasm_operator::runtime::oci::{Registry, RegistryOptions};
use wasm_operator::runtime::slot::ModuleSlot;

/// A namespace of the test's own for the modules' ServiceAccounts: the
/// blanket grant the other tests give `system:serviceaccounts:default`
/// does not reach it.
struct Identities {
    ns: TestNamespace<'static>,
    accounts: String,
    /// `--module-identity-prefix`: before each module's name in its account's.
    account_prefix: String,
}

impl Identities {
    async fn new(prefix: &str) -> Self {
        let ns = TestNamespace::new(prefix).await;
        let accounts = ns.plane.create_namespace(&format!("{prefix}-accounts")).await.expect("a namespace");
        Self { ns, accounts, account_prefix: String::new() }
    }

    fn plane(&self) -> &'static ControlPlane {
        self.ns.plane
    }

    fn user(&self, module: &str) -> String {
        format!("system:serviceaccount:{}:{}{module}", self.accounts, self.account_prefix)
    }

    fn options(&self) -> Options {
        Options {
            module_identity: ModuleIdentity::ServiceAccounts {
                namespace: self.accounts.clone(),
                prefix: self.account_prefix.clone(),
            },
            ..options(&self.ns.namespace)
        }
    }

    /// A Role in the test namespace granting the ServiceAccount `module`
    /// what `manifest_of` needs (`needed_permissions`), except the
    /// permissions `left_out` names (`verb resource`, e.g. `create secrets`).
    async fn grant(&self, module: &str, manifest_of: &LogicModule, left_out: &[&str]) {
        let mut rules = Vec::new();
        for permission in needed_permissions(manifest_of.manifest(), manifest_of.write_model(), manifest_of.finalizes())
        {
            let resource = match permission.subresource {
                Some(sub) => format!("{}/{sub}", permission.resource),
                None => permission.resource.clone(),
            };
            if left_out.contains(&format!("{} {}", permission.verb, permission.resource).as_str()) {
                continue;
            }
            rules.push(json!({"apiGroups": [permission.group], "resources": [resource], "verbs": [permission.verb]}));
        }
        let name = format!("module-{module}");
        let role = json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": name, "namespace": self.ns.namespace}, "rules": rules,
        });
        let binding = json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": name, "namespace": self.ns.namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": format!("{}{module}", self.account_prefix), "namespace": self.accounts}],
        });
        self.plane().apply_yaml(&role.to_string()).await.expect("applying the module's Role");
        self.plane().apply_yaml(&binding.to_string()).await.expect("binding the module's Role");
    }

    /// Whether the authorizer lets `user` (a module's ServiceAccount, or
    /// the operator) `verb` `resource` in the test namespace now.
    async fn allowed(&self, user: &str, verb: &str, group: &str, resource: &str) -> bool {
        let groups = user
            .starts_with("system:serviceaccount:")
            .then(|| vec!["system:serviceaccounts".to_owned(), format!("system:serviceaccounts:{}", self.accounts)]);
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(user.to_owned()),
                groups,
                resource_attributes: Some(ResourceAttributes {
                    verb: Some(verb.to_owned()),
                    group: Some(group.to_owned()),
                    resource: Some(resource.to_owned()),
                    namespace: Some(self.ns.namespace.clone()),
                    ..ResourceAttributes::default()
                }),
                ..SubjectAccessReviewSpec::default()
            },
            ..SubjectAccessReview::default()
        };
        let reviews: Api<SubjectAccessReview> = Api::all(self.ns.client.clone());
        let answer = reviews.create(&PostParams::default(), &review).await.expect("a SubjectAccessReview");
        answer.status.is_some_and(|status| status.allowed)
    }

    /// Until the authorizer's answer for `user` is `expected` (RBAC
    /// changes reach it through a watch).
    async fn wait_allowed(&self, user: &str, verb: &str, group: &str, resource: &str, expected: bool) {
        eventually(&format!("{user} to be allowed {verb} {resource}: {expected}"), || async {
            (self.allowed(user, verb, group, resource).await == expected).then_some(())
        })
        .await;
    }

    /// The `wasm-operator` binary running `target/MODULE_FILE` in the test
    /// namespace as the operator user, `run_args` after `run`'s own.
    fn binary(&self, module_file: &str, run_args: &[&str]) -> std::process::Command {
        let root = control_plane::repo_root();
        let mut command = std::process::Command::new(root.join("target/release/wasm-operator"));
        command
            .args(["--module", &root.join("target").join(module_file).display().to_string()])
            .args(["run", "--namespace", &self.ns.namespace])
            .args(run_args)
            .args([
                "--leader-elect=false",
                "--metrics-bind-address=127.0.0.1:0",
                "--health-probe-bind-address=127.0.0.1:0",
            ])
            .env("KUBECONFIG", self.plane().kubeconfig(User::Operator))
            .env_remove("POD_NAMESPACE");
        command
    }

    async fn operator_client(&self) -> Client {
        self.plane().client(User::Operator).await.expect("an operator client")
    }

    /// The operator user's requests in the test namespace since `mark`.
    fn operator_requests(&self, mark: control_plane::AuditMark) -> Vec<AuditEvent> {
        let events = self.plane().audit_events_since(mark).expect("the audit log");
        events
            .into_iter()
            .filter(|e| e.user == OPERATOR_USER && e.namespace.as_deref() == Some(self.ns.namespace.as_str()))
            .collect()
    }
}

fn greeting(name: &str, message: &str) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "example.c5c3.io/v1", "kind": "Greeting",
        "metadata": {"name": name}, "spec": {"message": message},
    }))
    .expect("a Greeting")
}

fn greetings(ns: &TestNamespace<'_>) -> Api<DynamicObject> {
    ns.api(&gvk("example.c5c3.io", "v1", "Greeting", "greetings"))
}

async fn exists(api: &Api<DynamicObject>, name: &str) -> bool {
    api.get_opt(name).await.expect("reading").is_some()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_module_writes_as_its_service_account_and_only_what_its_role_grants() {
    let identities = Identities::new("identity-writes").await;
    let ns = &identities.ns;
    let module = module_file("greeting-owns-secret.wasm");
    ns.plane.apply_yaml(&module.manifest().crd).await.expect("installing the Greeting CRD");
    identities.grant("greeting", &module, &[]).await;
    let user = identities.user("greeting");
    identities.wait_allowed(&user, "create", "", "secrets", true).await;

    let mark = ns.plane.audit_mark().expect("the audit log");
    let running = Running::start_with_client(identities.operator_client().await, vec![module], identities.options());
    let configmaps = ns.api(&gvk("", "v1", "ConfigMap", "configmaps"));
    let secrets = ns.api(&secret_resource());
    greetings(ns).create(&PostParams::default(), &greeting("first", "hello")).await.expect("creating a Greeting");
    eventually("the first Greeting's ConfigMap and Secret", || async {
        (exists(&configmaps, "first").await && exists(&secrets, "first").await).then_some(())
    })
    .await;

    // Granted "ConfigMaps only" now: the Role loses every Secret verb. The
    // operator's own identity could still create Secrets (cluster-admin).
    identities.grant("greeting", &module_file("greeting.wasm"), &["list secrets", "watch secrets"]).await;
    identities.wait_allowed(&user, "create", "", "secrets", false).await;
    assert!(identities.allowed(OPERATOR_USER, "create", "", "secrets").await, "the operator itself may");
    greetings(ns).create(&PostParams::default(), &greeting("second", "hi")).await.expect("creating a Greeting");
    eventually("the second Greeting's ConfigMap", || async { exists(&configmaps, "second").await.then_some(()) }).await;
    let refused_create =
        |e: &AuditEvent| e.verb == "create" && e.resource.as_deref() == Some("secrets") && e.code == Some(403);
    eventually("the API server to refuse the module's Secret", || async {
        ns.plane.audit_sync().await.ok()?;
        identities.operator_requests(mark).iter().any(refused_create).then_some(())
    })
    .await;
    assert!(!exists(&secrets, "second").await, "a Secret was written although the module's Role does not allow it");
    running.stop().await.expect("a clean stop");

    // Every write the module's reconciles made went out as its
    // ServiceAccount; the operator's own were only its events.
    ns.plane.audit_sync().await.expect("the audit log catches up");
    let requests = identities.operator_requests(mark);
    let writes: Vec<&AuditEvent> = requests.iter().filter(|e| e.is_write()).collect();
    assert!(writes.iter().any(|e| e.resource.as_deref() == Some("configmaps")), "{writes:#?}");
    assert!(writes.iter().any(|e| e.subresource.as_deref() == Some("status")), "{writes:#?}");
    for write in &writes {
        let as_module = write.impersonated_user.as_deref() == Some(user.as_str());
        let events = write.resource.as_deref() == Some("events");
        assert!(as_module != events, "{} {} made as {:?}", write.verb, write.request_uri, write.impersonated_user);
    }
    let refused: Vec<&AuditEvent> = writes.iter().copied().filter(|e| refused_create(e)).collect();
    assert!(refused.iter().all(|e| e.impersonated_user.as_deref() == Some(user.as_str())));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_module_whose_role_lacks_what_it_claims_is_refused_at_load_naming_verb_and_kind() {
    let identities = Identities::new("identity-load").await;
    let ns = &identities.ns;
    let module = module_file("greeting-owns-secret.wasm");
    ns.plane.apply_yaml(&module.manifest().crd).await.expect("installing the Greeting CRD");
    // What the Greeting without Secrets needs: ConfigMaps, its parent.
    identities.grant("greeting", &module_file("greeting.wasm"), &["list secrets", "watch secrets"]).await;
    let user = identities.user("greeting");
    identities.wait_allowed(&user, "create", "", "configmaps", true).await;
    greetings(ns).create(&PostParams::default(), &greeting("kept", "hello")).await.expect("creating a Greeting");

    let mark = ns.plane.audit_mark().expect("the audit log");
    let running = Running::start_with_client(identities.operator_client().await, vec![module], identities.options());
    let error = tokio::time::timeout(WAIT, running.stop()).await.expect("refused in time").expect_err("refused");
    assert!(matches!(error, OperatorError::Access { .. }), "{error}");
    let reason = std::error::Error::source(&error).map(ToString::to_string).unwrap_or_default();
    let message = format!("{error}: {reason}");
    for named in [
        "module greeting is refused: ",
        user.as_str(),
        " may not get, list, watch, create, update, delete secrets (Secret)",
        &format!("in namespace {}", ns.namespace),
    ] {
        assert!(message.contains(named), "{named:?} not in: {message}");
    }
    assert!(!message.contains("configmaps"), "ConfigMaps are granted: {message}");
    ns.plane.audit_sync().await.expect("the audit log catches up");
    let requests = identities.operator_requests(mark);
    assert!(requests.is_empty(), "a refused module made requests: {requests:#?}");
    assert!(!exists(&ns.api(&gvk("", "v1", "ConfigMap", "configmaps")), "kept").await, "nothing reconciled");

    // The binary refuses it the same way, naming it on stderr.
    let output = identities
        .binary("greeting-owns-secret.wasm", &["--module-identity-namespace", &identities.accounts])
        .output()
        .expect("running wasm-operator");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(stderr.contains("create, update, delete secrets (Secret)") && stderr.contains(&user), "{stderr}");
    assert_eq!(stderr.matches("may not").count(), 1, "said once: {stderr}");

    // With --module-identity=operator (the opt-out) it runs as the operator.
    let mut opted_out = identities
        .binary("greeting-owns-secret.wasm", &["--module-identity=operator"])
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("running wasm-operator");
    let secrets = ns.api(&secret_resource());
    eventually("the opted-out operator to write the Secret as itself", || async {
        exists(&secrets, "kept").await.then_some(())
    })
    .await;
    let _ = opted_out.kill();
    let _ = opted_out.wait();
}

/// A module that writes by server-side apply needs `patch` on its owned
/// kinds where a replacing one needs `update`: granted exactly what
/// `needed_permissions` says, the Queue module converges writing as its
/// ServiceAccount; without `patch` on ConfigMaps it is refused at load,
/// naming it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_applying_module_needs_patch_and_is_refused_without_it() {
    let identities = Identities::new("identity-apply").await;
    let ns = &identities.ns;
    let module = module_file("queue.wasm");
    ns.plane.apply_yaml(&module.manifest().crd).await.expect("installing the Queue CRD");
    let user = identities.user("queue");
    identities.grant("queue", &module, &["patch configmaps"]).await;
    identities.wait_allowed(&user, "create", "", "configmaps", true).await;
    let running = Running::start_with_client(identities.operator_client().await, vec![module], identities.options());
    let error = tokio::time::timeout(WAIT, running.stop()).await.expect("refused in time").expect_err("refused");
    let reason = std::error::Error::source(&error).map(ToString::to_string).unwrap_or_default();
    assert!(reason.contains(" may not patch configmaps (ConfigMap)"), "{error}: {reason}");

    let module = module_file("queue.wasm");
    identities.grant("queue", &module, &[]).await;
    identities.wait_allowed(&user, "patch", "", "configmaps", true).await;
    let mark = ns.plane.audit_mark().expect("the audit log");
    let running = Running::start_with_client(identities.operator_client().await, vec![module], identities.options());
    let queue = json!({"apiVersion": "example.c5c3.io/v1", "kind": "Queue", "metadata": {"name": "orders"},
                       "spec": {"image": "queue:1", "settings": {"a": "1"}}});
    let queue: DynamicObject = serde_json::from_value(queue).expect("a Queue");
    let queues = ns.api(&gvk("example.c5c3.io", "v1", "Queue", "queues"));
    queues.create(&PostParams::default(), &queue).await.expect("creating the Queue");
    let configmaps = ns.api(&gvk("", "v1", "ConfigMap", "configmaps"));
    eventually("the Queue's settings", || async { exists(&configmaps, "orders-settings").await.then_some(()) }).await;
    running.stop().await.expect("a clean stop");
    ns.plane.audit_sync().await.expect("the audit log catches up");
    let applies: Vec<AuditEvent> = identities
        .operator_requests(mark)
        .into_iter()
        .filter(|e| e.verb == "patch" && e.resource.as_deref() == Some("configmaps"))
        .collect();
    assert!(!applies.is_empty(), "the settings were applied");
    for apply in &applies {
        assert_eq!(apply.impersonated_user.as_deref(), Some(user.as_str()), "applied as the module");
        assert!(apply.code.is_some_and(|code| code < 300), "applied: {apply:?}");
    }
}

/// `--module-identity-prefix`: the binary's module acts as the account
/// named PREFIX + its name (two operators with a module of the same name
/// keep their accounts apart in one namespace); the unprefixed account is
/// not used, and its grants count for nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_prefix_the_module_acts_as_the_prefixed_account() {
    let mut identities = Identities::new("identity-prefix").await;
    identities.account_prefix = "team-b-".to_owned();
    let ns = &identities.ns;
    let module = module_file("greeting.wasm");
    ns.plane.apply_yaml(&module.manifest().crd).await.expect("installing the Greeting CRD");
    identities.grant("greeting", &module, &[]).await;
    let user = identities.user("greeting");
    assert!(user.ends_with(":team-b-greeting"), "{user}");
    identities.wait_allowed(&user, "create", "", "configmaps", true).await;

    let mark = ns.plane.audit_mark().expect("the audit log");
    let accounts = ["--module-identity-namespace", &identities.accounts, "--module-identity-prefix", "team-b-"];
    let mut operator = identities
        .binary("greeting.wasm", &accounts)
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("running wasm-operator");
    greetings(ns).create(&PostParams::default(), &greeting("hello", "hello")).await.expect("creating a Greeting");
    let configmaps = ns.api(&gvk("", "v1", "ConfigMap", "configmaps"));
    eventually("the Greeting's ConfigMap", || async { exists(&configmaps, "hello").await.then_some(()) }).await;
    let _ = operator.kill();
    let _ = operator.wait();

    ns.plane.audit_sync().await.expect("the audit log catches up");
    let requests = identities.operator_requests(mark);
    let created = requests
        .iter()
        .find(|e| e.verb == "create" && e.resource.as_deref() == Some("configmaps") && e.code.is_some_and(|c| c < 300))
        .expect("the ConfigMap's create in the audit log");
    assert_eq!(created.impersonated_user.as_deref(), Some(user.as_str()));
    let unprefixed = format!("system:serviceaccount:{}:greeting", identities.accounts);
    assert!(
        requests.iter().all(|e| e.impersonated_user.as_deref() != Some(unprefixed.as_str())),
        "a request was made as the unprefixed account"
    );
}

/// A denial at load is asked again for a few seconds (an API server that
/// has just restarted denies until its authorizer's caches are filled): a
/// grant that lands meanwhile lets the module start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_that_lands_seconds_after_a_denial_at_load_lets_the_module_start() {
    let identities = Identities::new("identity-late").await;
    let ns = &identities.ns;
    let module = module_file("greeting.wasm");
    ns.plane.apply_yaml(&module.manifest().crd).await.expect("installing the Greeting CRD");
    let user = identities.user("greeting");
    let mark = ns.plane.audit_mark().expect("the audit log");
    let running = Running::start_with_client(identities.operator_client().await, vec![module], identities.options());
    // Denied first: the module's ServiceAccount has no Role yet.
    eventually("the operator to ask what the module may do", || async {
        let events = ns.plane.audit_events_since(mark).ok()?;
        let asked = |e: &AuditEvent| {
            e.resource.as_deref() == Some("selfsubjectaccessreviews") && e.impersonated_user.as_deref() == Some(&user)
        };
        events.iter().any(asked).then_some(())
    })
    .await;
    assert!(!identities.allowed(&user, "create", "", "configmaps").await, "not granted yet");
    identities.grant("greeting", &module_file("greeting.wasm"), &[]).await;
    greetings(ns).create(&PostParams::default(), &greeting("late", "hello")).await.expect("creating a Greeting");
    let configmaps = ns.api(&gvk("", "v1", "ConfigMap", "configmaps"));
    eventually("the Greeting's ConfigMap, once granted", || async { exists(&configmaps, "late").await.then_some(()) })
        .await;
    running.stop().await.expect("a clean stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_modules_in_one_process_act_as_two_identities_that_cannot_touch_each_others_kinds() {
    let identities = Identities::new("identity-two").await;
    let ns = &identities.ns;
    let greeting_module = module_file("greeting.wasm");
    ns.plane.apply_yaml(&greeting_module.manifest().crd).await.expect("installing the Greeting CRD");
    identities.grant("greeting", &greeting_module, &[]).await;
    identities.grant("memcached", &memcached_module(), &[]).await;
    let (greeting_user, memcached_user) = (identities.user("greeting"), identities.user("memcached"));
    identities.wait_allowed(&greeting_user, "create", "", "configmaps", true).await;
    identities.wait_allowed(&memcached_user, "create", "apps", "deployments", true).await;

    let mark = ns.plane.audit_mark().expect("the audit log");
    let running = Running::start_with_client(
        identities.operator_client().await,
        vec![memcached_module(), greeting_module],
        identities.options(),
    );
    ns.create_memcached("cache", json!({})).await;
    greetings(ns).create(&PostParams::default(), &greeting("hello", "hello")).await.expect("creating a Greeting");
    let deployments = ns.api(&gvk("apps", "v1", "Deployment", "deployments"));
    let configmaps = ns.api(&gvk("", "v1", "ConfigMap", "configmaps"));
    eventually("both modules' children", || async {
        (exists(&deployments, "cache").await && exists(&configmaps, "hello").await).then_some(())
    })
    .await;
    running.stop().await.expect("a clean stop");

    // Each module's writes were made as its own ServiceAccount.
    ns.plane.audit_sync().await.expect("the audit log catches up");
    let owner = |e: &AuditEvent| match (e.resource.as_deref(), e.subresource.as_deref()) {
        (Some("configmaps"), _) | (Some("greetings"), Some("status")) => Some(&greeting_user),
        (Some("deployments" | "services"), _) | (Some("memcacheds"), Some("status")) => Some(&memcached_user),
        _ => None,
    };
    let mut seen = std::collections::BTreeSet::new();
    for write in identities.operator_requests(mark).iter().filter(|e| e.is_write()) {
        if let Some(expected) = owner(write) {
            assert_eq!(write.impersonated_user.as_ref(), Some(expected), "{} {}", write.verb, write.request_uri);
            seen.insert(expected.clone());
        }
    }
    assert_eq!(seen.len(), 2, "writes of both modules seen");

    // Neither identity may touch what the other owns, as the API server
    // decides it (the operator itself may).
    for (user, verb, group, resource) in [
        (&greeting_user, "create", "apps", "deployments"),
        (&greeting_user, "update", "apps", "deployments"),
        (&greeting_user, "delete", "", "services"),
        (&greeting_user, "patch", "memcached.c5c3.io", "memcacheds/status"),
        (&memcached_user, "create", "", "configmaps"),
        (&memcached_user, "delete", "", "configmaps"),
        (&memcached_user, "patch", "example.c5c3.io", "greetings/status"),
    ] {
        assert!(!identities.allowed(user, verb, group, resource).await, "{user} may {verb} {resource}");
        assert!(identities.allowed(OPERATOR_USER, verb, group, resource).await, "the operator may {verb} {resource}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_version_claiming_more_than_its_role_grants_is_refused_at_swap() {
    let identities = Identities::new("identity-swap").await;
    let ns = &identities.ns;
    let registry = OciRegistry::start("identity-swap");
    let oci = Registry::new(RegistryOptions { insecure: vec![registry.address.clone()], ..RegistryOptions::default() });
    let reference = format!("{}/modules/greeting:owns-secret", registry.address);
    let owns_secret = oci.push(built("greeting-owns-secret.wasm"), &reference).await.expect("pushing");
    let v1 = module_file("greeting.wasm");
    ns.plane.apply_yaml(LOGIC_MODULE_CRD).await.expect("installing the LogicModule CRD");
    ns.plane.apply_yaml(&v1.manifest().crd).await.expect("installing the Greeting CRD");
    identities.grant("greeting", &v1, &[]).await;
    identities.wait_allowed(&identities.user("greeting"), "create", "", "configmaps", true).await;
    greetings(ns).create(&PostParams::default(), &greeting("g", "hello")).await.expect("creating a Greeting");

    let mut options = identities.options();
    options.logic_modules = Some(LogicModuleOptions {
        registry: Arc::new(Registry::new(RegistryOptions {
            insecure: vec![registry.address.clone()],
            ..RegistryOptions::default()
        })),
        poll_interval: Duration::from_millis(500),
    });
    let running = Running::start_slots(identities.operator_client().await, vec![ModuleSlot::new(v1)], options);
    let configmaps = ns.api(&gvk("", "v1", "ConfigMap", "configmaps"));
    eventually("v1's ConfigMap", || async { exists(&configmaps, "g").await.then_some(()) }).await;

    let logic_modules: Api<DynamicObject> =
        Api::all_with(ns.client.clone(), &gvk("wasm-operator.c5c3.io", "v1alpha1", "LogicModule", "logicmodules"));
    let resource: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "wasm-operator.c5c3.io/v1alpha1", "kind": "LogicModule",
        "metadata": {"name": "greeting"}, "spec": {"image": owns_secret},
    }))
    .expect("a LogicModule");
    logic_modules.create(&PostParams::default(), &resource).await.expect("creating the LogicModule");
    let status = wait_logic_module(&logic_modules, "the version refused", |status| {
        has(status, "Verified", "False", "Forbidden")
    })
    .await;
    let message = status["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == "Verified"))
        .map(|c| c["message"].as_str().unwrap_or_default().to_owned())
        .unwrap_or_default();
    assert!(message.contains("create, update, delete secrets (Secret)"), "{message}");
    assert!(!exists(&ns.api(&secret_resource()), "g").await, "the refused version wrote a Secret");
    assert!(running.swaps("refused") >= 1, "counted as a refused swap");
    let _ = logic_modules.delete("greeting", &Default::default()).await;
    running.stop().await.expect("a clean stop");
}
