//! The Helm chart (charts/memcached-operator) with a real helm, built from its
//! Go module by scripts/helm.sh (or HELM_BINARY): `helm lint`; the default
//! render is what `kubectl kustomize deploy/` gives, object by object, with
//! the intended differences listed here with their reasons; a namespace-scoped
//! render swaps the ClusterRole for a Role and adds `--namespace`; values reach
//! the Deployment, bad ones are refused by name; the CRD is deploy/'s, also in
//! the packaged chart; and `helm install` into a real API server creates
//! objects with the RBAC they should have (SubjectAccessReviews), the
//! operator runs in one namespace as the chart's ServiceAccount with no
//! request refused, `helm upgrade` switches a release to one namespace, and
//! `helm uninstall` takes it all away but the CRD.

#[path = "operator_support.rs"]
mod operator_support;

#[path = "metrics_support.rs"]
mod metrics_support;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::OnceLock;

use control_plane::{ControlPlane, User};
use k8s_openapi::api::authorization::v1::{ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec};
use kube::api::{Api, PostParams};
use memcached_operator::render::parse_documents;
use operator_support::{eventually, memcached_resource, owned_kinds};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

const RELEASE: &str = "memcached-operator";
const NAMESPACE: &str = "memcached-system";
/// The Memcached module's own identity and the operator's Role to act as it.
const MODULE_ACCOUNT: &str = "memcached";
const MODULE_ROLE: &str = "memcached-operator-module-memcached";
const IMPERSONATION_ROLE: &str = "memcached-operator-impersonate-modules";

/// Helm's standard labels, which the chart adds to every object's metadata
/// (`key`, value for the default release). Not on selectors nor on the pod
/// template: a Deployment's selector cannot change after creation, and a
/// Deployment or Service from deploy/ and one from the chart select the same
/// pods. Intended difference 1 of 2.
fn helm_labels() -> [(&'static str, String); 4] {
    let version = env!("CARGO_PKG_VERSION");
    [
        ("app.kubernetes.io/instance", RELEASE.to_owned()),
        ("app.kubernetes.io/managed-by", "Helm".to_owned()),
        ("app.kubernetes.io/version", version.to_owned()),
        ("helm.sh/chart", format!("memcached-operator-{version}")),
    ]
}

/// In deploy/, not in the chart (kind, name), with why. Intended difference 2 of 2.
const ONLY_IN_DEPLOY: [(&str, &str, &str); 1] = [(
    "Namespace",
    NAMESPACE,
    "helm installs into a namespace that exists (or --create-namespace); a chart owning its release \
     namespace would delete it, with everything users put in it, on `helm uninstall`",
)];

fn chart_dir() -> PathBuf {
    control_plane::repo_root().join("charts/memcached-operator")
}

/// The helm binary, from scripts/helm.sh (built once into the cache, or HELM_BINARY).
fn helm_binary() -> &'static Path {
    static HELM: OnceLock<PathBuf> = OnceLock::new();
    HELM.get_or_init(|| {
        let script = control_plane::repo_root().join("scripts/helm.sh");
        let output = Command::new("bash")
            .arg(&script)
            .stderr(Stdio::inherit())
            .output()
            .unwrap_or_else(|e| panic!("running {}: {e}", script.display()));
        assert!(output.status.success(), "scripts/helm.sh failed (see its log above)");
        let stdout = String::from_utf8_lossy(&output.stdout);
        let path = PathBuf::from(stdout.lines().last().expect("scripts/helm.sh prints the binary's path").trim());
        assert!(path.is_file(), "scripts/helm.sh printed {}, which is no file", path.display());
        path
    })
}

/// `helm ARGS`, with helm's own config, cache and data folders out of the
/// user's home (nothing read from or written to ~/.config/helm).
fn helm(args: &[&str]) -> Output {
    let home = std::env::temp_dir().join(format!("memcached-helm-home-{}", std::process::id()));
    Command::new(helm_binary())
        .args(args)
        .env("HELM_CONFIG_HOME", home.join("config"))
        .env("HELM_CACHE_HOME", home.join("cache"))
        .env("HELM_DATA_HOME", home.join("data"))
        .env_remove("KUBECONFIG")
        .output()
        .unwrap_or_else(|e| panic!("running helm {}: {e}", args.join(" ")))
}

/// `helm ARGS`, which must succeed; its stdout.
fn helm_ok(args: &[&str]) -> String {
    let output = helm(args);
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "helm {} failed:\n{stdout}\n{stderr}", args.join(" "));
    stdout
}

fn chart() -> String {
    chart_dir().to_string_lossy().into_owned()
}

/// `helm template` of the chart as release `memcached-operator` in
/// `memcached-system`, CRDs included, with `extra` arguments.
fn template(extra: &[&str]) -> Vec<Value> {
    let chart = chart();
    let mut args = vec!["template", RELEASE, chart.as_str(), "--namespace", NAMESPACE, "--include-crds"];
    args.extend_from_slice(extra);
    parse_documents(&helm_ok(&args)).expect("helm template prints YAML")
}

/// `helm template` that must fail; its error output.
fn template_error(extra: &[&str]) -> String {
    let chart = chart();
    let mut args = vec!["template", RELEASE, chart.as_str(), "--namespace", NAMESPACE];
    args.extend_from_slice(extra);
    let output = helm(&args);
    assert!(!output.status.success(), "helm template {} should fail", extra.join(" "));
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Whole floats as integers: kustomize (kyaml) rewrites the CRD's `minimum:
/// 0.0` as `0`; the API server reads both as the same number.
fn same_numbers(value: Value) -> Value {
    match value {
        Value::Number(n) if n.is_f64() => match n.as_f64() {
            Some(f) if f.fract() == 0.0 && f.abs() < 2f64.powi(53) => json!(f as i64),
            _ => Value::Number(n),
        },
        Value::Array(items) => Value::Array(items.into_iter().map(same_numbers).collect()),
        Value::Object(map) => Value::Object(map.into_iter().map(|(k, v)| (k, same_numbers(v))).collect()),
        other => other,
    }
}

/// What `kubectl apply -k deploy/` applies: the real kustomize (kubectl's).
fn kustomized() -> Vec<Value> {
    let kubectl = control_plane::find_assets().expect("the envtest binaries (make envtest)").join("kubectl");
    let deploy = control_plane::repo_root().join("deploy");
    let output = Command::new(&kubectl).arg("kustomize").arg(&deploy).output().expect("running kubectl kustomize");
    assert!(output.status.success(), "kubectl kustomize deploy/: {}", String::from_utf8_lossy(&output.stderr));
    parse_documents(&String::from_utf8_lossy(&output.stdout)).expect("kustomize prints YAML")
}

/// kind/namespace/name
fn key(object: &Value) -> String {
    let metadata = &object["metadata"];
    format!(
        "{}/{}/{}",
        object["kind"].as_str().unwrap_or("?"),
        metadata["namespace"].as_str().unwrap_or(""),
        metadata["name"].as_str().unwrap_or("?")
    )
}

fn by_key(objects: Vec<Value>) -> BTreeMap<String, Value> {
    let mut map = BTreeMap::new();
    for object in objects {
        let key = key(&object);
        assert!(map.insert(key.clone(), object).is_none(), "{key} rendered twice");
    }
    map
}

fn the<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
    let found: Vec<&Value> = objects.iter().filter(|o| o["kind"] == kind && o["metadata"]["name"] == name).collect();
    assert_eq!(found.len(), 1, "one {kind} {name} in {:?}", objects.iter().map(key).collect::<Vec<_>>());
    found[0]
}

fn kinds(objects: &[Value]) -> BTreeSet<String> {
    objects.iter().map(|o| o["kind"].as_str().unwrap_or("?").to_owned()).collect()
}

fn args_of(objects: &[Value]) -> Vec<String> {
    let deployment = the(objects, "Deployment", RELEASE);
    serde_json::from_value(deployment["spec"]["template"]["spec"]["containers"][0]["args"].clone()).expect("args")
}

/// The object without Helm's standard labels, after checking they are there
/// with the default release's values (an object without labels, the CRD
/// from crds/, is left as it is).
fn without_helm_labels(mut object: Value) -> Value {
    let what = key(&object);
    let Some(labels) = object.pointer_mut("/metadata/labels").and_then(Value::as_object_mut) else { return object };
    for (name, value) in helm_labels() {
        assert_eq!(labels.remove(name), Some(json!(value)), "{what}: label {name}");
    }
    object
}

// ---------------------------------------------------------------------------
// Rendering (no cluster)

#[test]
fn helm_lint_passes_cluster_wide_and_namespace_scoped() {
    let chart = chart();
    for extra in [
        &[][..],
        &["--set", "watchNamespace=team-a"][..],
        &["--set", "leaderElection.enabled=false,replicaCount=1"][..],
        &["--set", "metrics.serviceMonitor.enabled=true"][..],
        &["--set", "metrics.secure=false,metrics.serviceMonitor.enabled=true"][..],
    ] {
        let mut args = vec!["lint", "--strict", chart.as_str()];
        args.extend_from_slice(extra);
        let out = helm_ok(&args);
        assert!(out.contains("1 chart(s) linted, 0 chart(s) failed"), "helm lint {extra:?}:\n{out}");
    }
}

#[test]
fn default_values_render_what_deploy_installs() {
    let mut chart = by_key(template(&[]).into_iter().map(same_numbers).collect());
    let deploy = by_key(kustomized().into_iter().map(same_numbers).collect());
    let mut differences = Vec::new();
    for (key, expected) in &deploy {
        let kind = expected["kind"].as_str().unwrap_or("?");
        let name = expected["metadata"]["name"].as_str().unwrap_or("?");
        if ONLY_IN_DEPLOY.iter().any(|(k, n, _)| *k == kind && *n == name) {
            assert!(!chart.contains_key(key), "{key} is listed as only in deploy/ but the chart renders it");
            continue;
        }
        match chart.remove(key) {
            Some(rendered) => {
                let rendered = without_helm_labels(rendered);
                if &rendered != expected {
                    let paths = memcached_tests::changed_paths(expected, &rendered);
                    differences.push(format!("{key}: {paths:?}"));
                    // The whole object, for the diff.
                    assert_eq!(&rendered, expected, "{key}");
                }
            }
            None => differences.push(format!("{key}: in deploy/, not rendered by the chart")),
        }
    }
    for key in chart.keys() {
        differences.push(format!("{key}: rendered by the chart, not in deploy/"));
    }
    assert!(differences.is_empty(), "the chart's defaults differ from deploy/:\n{}", differences.join("\n"));
}

#[test]
fn namespace_scoped_values_render_a_role_there_and_the_namespace_flag() {
    let cluster_wide = template(&[]);
    let scoped = template(&["--set", "watchNamespace=team-a"]);
    // No cluster-wide RBAC but the metrics reviews' (cluster-scoped
    // requests) and who may read the metrics and the recorded reconciles.
    let cluster_wide_rbac: BTreeSet<String> =
        scoped.iter().filter(|o| o["kind"].as_str().is_some_and(|k| k.starts_with("Cluster"))).map(key).collect();
    assert_eq!(
        cluster_wide_rbac,
        [
            "ClusterRole//memcached-operator-metrics-auth",
            "ClusterRole//memcached-operator-metrics-reader",
            "ClusterRole//memcached-operator-records-reader",
            "ClusterRoleBinding//memcached-operator-metrics-auth",
        ]
        .map(String::from)
        .into(),
        "cluster-wide RBAC"
    );
    for name in
        ["memcached-operator-metrics-auth", "memcached-operator-metrics-reader", "memcached-operator-records-reader"]
    {
        assert_eq!(the(&scoped, "ClusterRole", name), the(&cluster_wide, "ClusterRole", name), "{name}");
    }

    // The operator's rules, in a Role in the watched namespace, bound there
    // to the ServiceAccount in the release namespace.
    // So are the module's: its ServiceAccount stays in the release namespace.
    for (name, account) in [(RELEASE, RELEASE), (MODULE_ROLE, MODULE_ACCOUNT)] {
        let cluster_role = the(&cluster_wide, "ClusterRole", name);
        let role = scoped
            .iter()
            .find(|r| r["kind"] == "Role" && r["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("a Role {name}"));
        assert_eq!(role["metadata"]["namespace"], json!("team-a"), "{name}");
        assert_eq!(role["rules"], cluster_role["rules"], "the same rules as the ClusterRole {name}");
        let binding = scoped
            .iter()
            .find(|b| b["kind"] == "RoleBinding" && b["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("a RoleBinding {name}"));
        assert_eq!(binding["metadata"]["namespace"], json!("team-a"), "{name}");
        assert_eq!(binding["roleRef"], json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name}));
        assert_eq!(binding["subjects"], json!([{"kind": "ServiceAccount", "name": account, "namespace": NAMESPACE}]));
    }

    // The Lease and the impersonation stay in the operator's own namespace.
    for name in ["memcached-operator-leader-election", IMPERSONATION_ROLE] {
        assert_eq!(the(&scoped, "Role", name)["metadata"]["namespace"], json!(NAMESPACE), "{name}");
    }

    // The flag, and nothing else changed in the Deployment's arguments.
    let mut args = args_of(&scoped);
    let flag = args.iter().position(|a| a == "--namespace=team-a").expect("--namespace=team-a in the args");
    args.remove(flag);
    assert_eq!(args, args_of(&cluster_wide));

    // Every other object is the cluster-wide render's.
    let rbac = |o: &&Value| o["kind"].as_str().is_some_and(|k| k.ends_with("Role") || k.ends_with("RoleBinding"));
    let others = |objects: &[Value]| -> BTreeMap<String, Value> {
        let mut map = by_key(objects.iter().filter(|o| !rbac(o)).cloned().collect());
        let deployment = map.get_mut(&format!("Deployment/{NAMESPACE}/{RELEASE}")).expect("the Deployment");
        deployment["spec"]["template"]["spec"]["containers"][0]["args"] = json!(null);
        map
    };
    assert_eq!(others(&scoped), others(&cluster_wide));
}

#[test]
fn values_reach_the_deployment_and_rbac() {
    let objects = template(&[
        "--set",
        "image.repository=registry.example/memcached-operator,image.tag=1.2.3,image.pullPolicy=Always",
        "--set",
        "resources.limits.memory=1Gi,replicaCount=3,leaderElection.id=my-lease,logFormat=text",
        "--set",
        "modules={/opt/memcached-operator/memcached.cwasm,/opt/modules/my.cwasm}",
        "--set",
        "compile.strategy=optimized",
    ]);
    let container = &the(&objects, "Deployment", RELEASE)["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["image"], json!("registry.example/memcached-operator:1.2.3"));
    assert_eq!(container["imagePullPolicy"], json!("Always"));
    assert_eq!(container["resources"]["limits"]["memory"], json!("1Gi"));
    assert_eq!(container["resources"]["requests"]["memory"], json!("128Mi"), "other resources keep their defaults");
    assert_eq!(the(&objects, "Deployment", RELEASE)["spec"]["replicas"], json!(3));
    let args = args_of(&objects);
    for expected in [
        "--leader-election-id=my-lease",
        "--log-format=text",
        "--module=/opt/memcached-operator/memcached.cwasm",
        "--module=/opt/modules/my.cwasm",
    ] {
        assert!(args.iter().any(|a| a == expected), "{expected} in {args:?}");
    }
    assert!(!args.iter().any(|a| a.starts_with("--compile-strategy")), "optimized is the binary's default: {args:?}");
    let defaults = args_of(&template(&[]));
    assert!(defaults.iter().any(|a| a == "--compile-strategy=tiered"), "the chart's default: {defaults:?}");
    let lease_role = the(&objects, "Role", "memcached-operator-leader-election");
    assert_eq!(
        lease_role["rules"][1]["resourceNames"],
        json!(["my-lease"]),
        "the Role grants the Lease the flag names"
    );

    // Leader election off: one replica, no Lease and no Role for it.
    let single = template(&["--set", "leaderElection.enabled=false,replicaCount=1"]);
    let args = args_of(&single);
    assert!(args.iter().any(|a| a == "--leader-elect=false"), "{args:?}");
    assert!(!args.iter().any(|a| a.starts_with("--leader-election-id")), "{args:?}");
    assert!(single.iter().all(|o| !o["metadata"]["name"].as_str().unwrap_or("").ends_with("-leader-election")));

    // Plain-HTTP metrics: the flag, a port named http, no metrics RBAC; a
    // certificate directory.
    let plain = template(&["--set", "metrics.secure=false,metrics.port=8080"]);
    let args = args_of(&plain);
    assert!(args.iter().any(|a| a == "--metrics-secure=false"), "{args:?}");
    assert!(args.iter().any(|a| a == "--metrics-bind-address=0.0.0.0:8080"), "{args:?}");
    let container = &the(&plain, "Deployment", RELEASE)["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["ports"][0], json!({"name": "http", "containerPort": 8080, "protocol": "TCP"}));
    let service = the(&plain, "Service", "memcached-operator-metrics");
    assert_eq!(
        service["spec"]["ports"],
        json!([{"name": "http", "port": 8080, "targetPort": "http", "protocol": "TCP"}])
    );
    assert!(
        plain.iter().all(|o| !o["metadata"]["name"].as_str().unwrap_or("").contains("-metrics-")),
        "no metrics-auth or metrics-reader role without --metrics-secure"
    );
    let with_certs = template(&["--set", "metrics.certDir=/etc/metrics-certs"]);
    assert!(args_of(&with_certs).iter().any(|a| a == "--metrics-cert-dir=/etc/metrics-certs"));
    assert!(!args_of(&objects).iter().any(|a| a.starts_with("--metrics-cert-dir")), "self-signed by default");

    // The ServiceMonitor: off by default (the default render is deploy/'s);
    // on, deploy/prometheus/monitor.yaml's endpoint for this release's Service.
    assert!(kinds(&objects).iter().all(|k| k != "ServiceMonitor"));
    let example =
        memcached_tests::yaml_file(&control_plane::repo_root().join("deploy/prometheus/monitor.yaml")).remove(0);
    let monitored = template(&[
        "--set",
        "metrics.serviceMonitor.enabled=true,metrics.serviceMonitor.labels.release=kube-prometheus",
    ]);
    let monitor = the(&monitored, "ServiceMonitor", "memcached-operator-metrics");
    assert_eq!(monitor["metadata"]["namespace"], json!(NAMESPACE));
    assert_eq!(monitor["metadata"]["labels"]["release"], json!("kube-prometheus"));
    assert_eq!(monitor["spec"]["endpoints"], example["spec"]["endpoints"], "deploy/prometheus/monitor.yaml's endpoint");
    let mut selector = example["spec"]["selector"].clone();
    selector["matchLabels"]["app.kubernetes.io/instance"] = json!(RELEASE);
    assert_eq!(monitor["spec"]["selector"], selector, "this release's metrics Service");
    let service = the(&monitored, "Service", "memcached-operator-metrics");
    for (label, value) in monitor["spec"]["selector"]["matchLabels"].as_object().expect("matchLabels") {
        assert_eq!(&service["metadata"]["labels"][label], value, "the Service carries {label}");
    }
    let plain_monitor = template(&["--set", "metrics.serviceMonitor.enabled=true,metrics.secure=false"]);
    assert_eq!(
        the(&plain_monitor, "ServiceMonitor", "memcached-operator-metrics")["spec"]["endpoints"],
        json!([{"path": "/metrics", "port": "http", "scheme": "http"}])
    );

    // Another release name names every object after it; rules for an extra
    // module's kinds join the operator's.
    let chart = chart();
    let other = parse_documents(&helm_ok(&[
        "template",
        "cache",
        chart.as_str(),
        "--namespace",
        "ops",
        "--set-json",
        r#"rbac.extraRules=[{"apiGroups":[""],"resources":["configmaps"],"verbs":["list","watch"]}]"#,
    ]))
    .expect("YAML");
    let role = the(&other, "ClusterRole", "cache-memcached-operator");
    let rules = role["rules"].as_array().expect("rules");
    assert_eq!(
        rules.last(),
        Some(&json!({"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list", "watch"]}))
    );
    let binding = the(&other, "ClusterRoleBinding", "cache-memcached-operator");
    assert_eq!(
        binding["subjects"],
        json!([{"kind": "ServiceAccount", "name": "cache-memcached-operator", "namespace": "ops"}])
    );
    assert_eq!(the(&other, "Deployment", "cache-memcached-operator")["metadata"]["namespace"], json!("ops"));

    // An extra module's identity: its ServiceAccount, its rules, bound, and
    // the operator may impersonate it too.
    let greeting_rules = json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}]);
    let extra =
        template(&["--set-json", &format!(r#"rbac.extraModules=[{{"name":"greeting","rules":{greeting_rules}}}]"#)]);
    assert_eq!(the(&extra, "ServiceAccount", "greeting")["metadata"]["namespace"], json!(NAMESPACE));
    assert_eq!(the(&extra, "ClusterRole", "memcached-operator-module-greeting")["rules"], greeting_rules);
    assert_eq!(
        the(&extra, "ClusterRoleBinding", "memcached-operator-module-greeting")["subjects"],
        json!([{"kind": "ServiceAccount", "name": "greeting", "namespace": NAMESPACE}])
    );
    assert_eq!(the(&extra, "Role", IMPERSONATION_ROLE)["rules"][0]["resourceNames"], json!(["memcached", "greeting"]));
    assert!(!args_of(&extra).iter().any(|a| a.starts_with("--module-identity-prefix")), "no prefix by default");

    // moduleIdentityPrefix: every module's account, its binding and the
    // impersonation grant carry it, and so does the flag; the Roles keep
    // their names (already the release's own).
    let prefixed = template(&[
        "--set",
        "moduleIdentityPrefix=team-b-",
        "--set-json",
        &format!(r#"rbac.extraModules=[{{"name":"greeting","rules":{greeting_rules}}}]"#),
    ]);
    assert!(args_of(&prefixed).iter().any(|a| a == "--module-identity-prefix=team-b-"), "{:?}", args_of(&prefixed));
    for module in ["memcached", "greeting"] {
        let account = format!("team-b-{module}");
        assert_eq!(the(&prefixed, "ServiceAccount", &account)["metadata"]["namespace"], json!(NAMESPACE));
        assert_eq!(
            the(&prefixed, "ClusterRoleBinding", &format!("memcached-operator-module-{module}"))["subjects"],
            json!([{"kind": "ServiceAccount", "name": account, "namespace": NAMESPACE}])
        );
    }
    assert!(prefixed.iter().all(|o| o["kind"] != "ServiceAccount" || o["metadata"]["name"] != MODULE_ACCOUNT));
    assert_eq!(
        the(&prefixed, "Role", IMPERSONATION_ROLE)["rules"][0]["resourceNames"],
        json!(["team-b-memcached", "team-b-greeting"])
    );

    // moduleIdentity: operator: no module identities, the modules' rules in
    // the operator's own role, the flag.
    let opted_out = template(&["--set", "moduleIdentity=operator"]);
    assert!(args_of(&opted_out).iter().any(|a| a == "--module-identity=operator"));
    assert!(opted_out.iter().all(|o| {
        let name = o["metadata"]["name"].as_str().unwrap_or("");
        !name.contains("-module-") && name != IMPERSONATION_ROLE && name != MODULE_ACCOUNT
    }));
    let operator_rules = &the(&opted_out, "ClusterRole", RELEASE)["rules"];
    let module_rules = the(&template(&[]), "ClusterRole", MODULE_ROLE)["rules"].clone();
    for rule in module_rules.as_array().expect("rules") {
        assert!(operator_rules.as_array().expect("rules").contains(rule), "{rule} in the operator's role");
    }
}

#[test]
fn bad_values_are_refused_naming_the_value() {
    for (set, names) in [
        ("watchNamespace=Team_A", "at '/watchNamespace'"),
        ("replicas=3", "additional properties 'replicas' not allowed"),
        ("replicaCount=two", "at '/replicaCount'"),
        ("logFormat=xml", "at '/logFormat'"),
        ("metrics.port=70000", "at '/metrics/port'"),
        ("metrics.secure=yes", "at '/metrics/secure'"),
        ("compile.strategy=fast", "at '/compile/strategy'"),
        ("moduleIdentityPrefix=Team_B-", "at '/moduleIdentityPrefix'"),
        ("metrics.serviceMonitor.enable=true", "additional properties 'enable' not allowed"),
        // The chart's own checks.
        ("leaderElection.enabled=false", "replicaCount: 2 replicas would all reconcile"),
        ("modules=null", "modules: name at least one logic module"),
    ] {
        let error = template_error(&["--set", set]);
        assert!(error.contains(names), "--set {set}: the error names {names}:\n{error}");
    }
}

#[test]
fn the_crds_are_deploys_also_in_the_packaged_chart() {
    // crds/ holds exactly deploy/crd/'s files (symlinks: one copy).
    let names = |folder: &Path| -> BTreeSet<String> {
        std::fs::read_dir(folder)
            .unwrap_or_else(|e| panic!("reading {}: {e}", folder.display()))
            .map(|e| e.expect("a folder entry").file_name().to_string_lossy().into_owned())
            .collect()
    };
    let deploy_crds = control_plane::repo_root().join("deploy/crd");
    let chart_crds = chart_dir().join("crds");
    assert_eq!(
        names(&chart_crds),
        names(&deploy_crds),
        "charts/memcached-operator/crds/ links every file of deploy/crd/"
    );
    for name in names(&deploy_crds) {
        let linked = std::fs::read(chart_crds.join(&name)).expect("the chart's CRD");
        assert_eq!(linked, std::fs::read(deploy_crds.join(&name)).expect("deploy's CRD"), "{name}");
    }

    // `helm package` follows the links: the archive carries the CRDs' text.
    let out = std::env::temp_dir().join(format!("memcached-helm-package-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let chart = chart();
    helm_ok(&["package", chart.as_str(), "--destination", &out.to_string_lossy()]);
    let archive = out.join(format!("memcached-operator-{}.tgz", env!("CARGO_PKG_VERSION")));
    let packaged = parse_documents(&helm_ok(&["show", "crds", &archive.to_string_lossy()])).expect("YAML");
    let _ = std::fs::remove_dir_all(&out);
    let expected: Vec<Value> =
        names(&deploy_crds).iter().flat_map(|n| memcached_tests::yaml_file(&deploy_crds.join(n))).collect();
    assert_eq!(packaged, expected);
    // And `helm template --include-crds` renders the same.
    let rendered: Vec<Value> = template(&[]).into_iter().filter(|o| o["kind"] == "CustomResourceDefinition").collect();
    assert_eq!(rendered, expected);
}

// ---------------------------------------------------------------------------
// helm install into a real API server

/// `helm ARGS --kubeconfig <admin>`, which must succeed.
fn helm_on(plane: &ControlPlane, args: &[&str]) -> String {
    let kubeconfig = plane.kubeconfig(User::Admin).to_string_lossy().into_owned();
    let mut all = args.to_vec();
    all.extend(["--kubeconfig", kubeconfig.as_str()]);
    helm_ok(&all)
}

/// The objects a release installed (`helm get manifest`).
fn release_objects(plane: &ControlPlane, release: &str, namespace: &str) -> Vec<Value> {
    parse_documents(&helm_on(plane, &["get", "manifest", release, "--namespace", namespace])).expect("YAML")
}

/// `kind.group/name` for kubectl.
fn kubectl_name(object: &Value) -> String {
    let kind = object["kind"].as_str().expect("a kind").to_lowercase();
    let group = object["apiVersion"].as_str().expect("an apiVersion").rsplit_once('/').map_or("", |(g, _)| g);
    let name = object["metadata"]["name"].as_str().expect("a name");
    if group.is_empty() { format!("{kind}/{name}") } else { format!("{kind}.{group}/{name}") }
}

/// The object on the server, or None when it is not there.
fn live(plane: &ControlPlane, object: &Value) -> Option<Value> {
    let mut kubectl = plane.kubectl();
    kubectl.args(["get", &kubectl_name(object), "-o", "json"]);
    if let Some(namespace) = object["metadata"]["namespace"].as_str() {
        kubectl.args(["--namespace", namespace]);
    }
    let output = kubectl.output().expect("running kubectl");
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() {
        assert!(stderr.contains("NotFound"), "kubectl get {}: {stderr}", kubectl_name(object));
        return None;
    }
    Some(serde_json::from_slice(&output.stdout).expect("kubectl prints JSON"))
}

/// Every object the release rendered is on the server as rendered.
fn assert_installed(plane: &ControlPlane, objects: &[Value]) {
    for object in objects {
        let what = key(object);
        let live = live(plane, object).unwrap_or_else(|| panic!("{what} was not installed"));
        for field in ["rules", "roleRef", "subjects"] {
            assert_eq!(live[field], object[field], "{what}: {field}");
        }
        for (label, value) in object["metadata"]["labels"].as_object().into_iter().flatten() {
            assert_eq!(&live["metadata"]["labels"][label], value, "{what}: label {label}");
        }
        if object["kind"] == "Deployment" {
            let (rendered, live) = (&object["spec"]["template"]["spec"], &live["spec"]["template"]["spec"]);
            assert_eq!(live["containers"][0]["args"], rendered["containers"][0]["args"], "{what}: args");
            assert_eq!(live["containers"][0]["image"], rendered["containers"][0]["image"], "{what}: image");
            assert_eq!(live["serviceAccountName"], rendered["serviceAccountName"], "{what}: serviceAccountName");
        }
    }
}

async fn wait_uninstalled(plane: &ControlPlane, objects: &[Value]) {
    for object in objects {
        eventually(&format!("{} to be deleted", key(object)), || async { live(plane, object).is_none().then_some(()) })
            .await;
    }
}

/// One access question: may `user` do `verb` on `resource` (`group/resource`,
/// "" group for core; `resource/subresource`), named `name`, in `namespace`
/// (None: cluster-wide)?
struct Access<'a> {
    verb: &'a str,
    resource: &'a str,
    namespace: Option<&'a str>,
    name: Option<&'a str>,
}

fn access<'a>(verb: &'a str, resource: &'a str, namespace: Option<&'a str>) -> Access<'a> {
    Access { verb, resource, namespace, name: None }
}

/// Waits until the API server's authorizer answers `allowed` for `user`
/// (RBAC objects reach it through an informer, so the answer can lag).
async fn expect_access(admin: &kube::Client, user: &str, question: &Access<'_>, allowed: bool) {
    let reviews: Api<SubjectAccessReview> = Api::all(admin.clone());
    let (group, resource) = question.resource.split_once('/').expect("group/resource");
    let (resource, subresource) = match resource.split_once('/') {
        Some((resource, sub)) => (resource, Some(sub.to_owned())),
        None => (resource, None),
    };
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(user.to_owned()),
            resource_attributes: Some(ResourceAttributes {
                verb: Some(question.verb.to_owned()),
                group: Some(group.to_owned()),
                resource: Some(resource.to_owned()),
                subresource,
                namespace: question.namespace.map(String::from),
                name: question.name.map(String::from),
                ..ResourceAttributes::default()
            }),
            ..SubjectAccessReviewSpec::default()
        },
        ..SubjectAccessReview::default()
    };
    let what = format!(
        "{user} {} to {} {} in {} (name {:?})",
        if allowed { "allowed" } else { "refused" },
        question.verb,
        question.resource,
        question.namespace.unwrap_or("every namespace"),
        question.name
    );
    eventually(&what, || async {
        let answer = reviews.create(&PostParams::default(), &review).await.expect("a SubjectAccessReview");
        (answer.status.is_some_and(|s| s.allowed) == allowed).then_some(())
    })
    .await;
}

fn service_account_user(namespace: &str, name: &str) -> String {
    format!("system:serviceaccount:{namespace}:{name}")
}

/// `memcached-operator run` with the release's Deployment args, as its
/// ServiceAccount (a token from the TokenRequest API). The bind addresses
/// become free loopback ports; the image's precompiled module path gives way
/// to the binary's built-in module (the same component). Killed on drop.
struct ChartOperator {
    child: Child,
    log: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl Drop for ChartOperator {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl ChartOperator {
    fn start(plane: &ControlPlane, release_objects: &[Value], namespace: &str) -> Self {
        let deployment = release_objects.iter().find(|o| o["kind"] == "Deployment").expect("the Deployment");
        let pod = &deployment["spec"]["template"]["spec"];
        let account = pod["serviceAccountName"].as_str().expect("a ServiceAccount");
        let token = plane
            .kubectl()
            .args(["create", "token", account, "--namespace", namespace, "--duration", "1h"])
            .output()
            .expect("running kubectl create token");
        assert!(token.status.success(), "kubectl create token: {}", String::from_utf8_lossy(&token.stderr));
        let token = String::from_utf8_lossy(&token.stdout).trim().to_owned();
        let admin = std::fs::read_to_string(plane.kubeconfig(User::Admin)).expect("the admin kubeconfig");
        let mut kubeconfig = parse_documents(&admin).expect("a kubeconfig").remove(0);
        kubeconfig["users"][0]["user"] = json!({ "token": token });
        let path = plane.dir().join(format!("helm-{account}.kubeconfig"));
        std::fs::write(&path, kubeconfig.to_string()).expect("writing a kubeconfig");

        let args: Vec<String> = serde_json::from_value(pod["containers"][0]["args"].clone()).expect("args");
        let args: Vec<String> = args
            .into_iter()
            .filter(|a| !a.starts_with("--module=") && a != "--allow-precompiled")
            .map(|a| match a.split_once('=') {
                Some((flag @ ("--metrics-bind-address" | "--health-probe-bind-address"), _)) => {
                    format!("{flag}=127.0.0.1:0")
                }
                _ => a,
            })
            .collect();
        let binary = control_plane::repo_root().join("target/release/memcached-operator");
        assert!(binary.is_file(), "{} is missing: run `make build`", binary.display());
        let mut child = Command::new(binary)
            .args(&args)
            .env("KUBECONFIG", &path)
            // What the Deployment's fieldRefs give the pod.
            .env("POD_NAMESPACE", namespace)
            .env("POD_NAME", "helm-test")
            .env_remove("WATCH_NAMESPACE")
            .env_remove("WASM_OPERATOR_MODULES")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("starting the operator");
        let stderr = child.stderr.take().expect("stderr");
        let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                sink.lock().expect("the log").push(line);
            }
        });
        Self { child, log }
    }

    fn log(&self) -> String {
        self.log.lock().expect("the log").join("\n")
    }

    /// The address /metrics is served on, once it is (the JSON log says).
    async fn metrics_address(&self) -> String {
        eventually("the operator to serve /metrics", || async {
            let lines = self.log.lock().expect("the log").clone();
            lines.iter().filter_map(|l| serde_json::from_str::<Value>(l).ok()).find_map(|line| {
                (line["message"] == "serving /metrics, /healthz and /readyz")
                    .then(|| line["metrics_address"].as_str().map(String::from))
                    .flatten()
            })
        })
        .await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn helm_install_grants_the_rbac_runs_in_one_namespace_and_uninstalls() {
    let plane = ControlPlane::shared();
    let admin = plane.client(User::Admin).await.expect("an admin client");
    let chart = chart();

    // Cluster-wide, as the README installs it: deploy/'s namespace (Pod
    // Security labels), then the release.
    plane
        .apply_yaml(&std::fs::read_to_string(control_plane::repo_root().join("deploy/namespace.yaml")).expect("read"))
        .await
        .expect("creating memcached-system");
    helm_on(plane, &["install", RELEASE, chart.as_str(), "--namespace", NAMESPACE]);
    let status: Value =
        serde_json::from_str(&helm_on(plane, &["status", RELEASE, "--namespace", NAMESPACE, "--output", "json"]))
            .expect("helm status prints JSON");
    assert_eq!(status["info"]["status"], json!("deployed"));
    let cluster_wide = release_objects(plane, RELEASE, NAMESPACE);
    assert_eq!(
        kinds(&cluster_wide),
        ["ClusterRole", "ClusterRoleBinding", "Deployment", "Role", "RoleBinding", "Service", "ServiceAccount"]
            .map(String::from)
            .into(),
    );
    assert_installed(plane, &cluster_wide);
    // The CRD from crds/, established.
    let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                     "metadata": {"name": "memcacheds.memcached.c5c3.io"}});
    eventually("the CRD to be Established", || async {
        let live = live(plane, &crd)?;
        let conditions = live["status"]["conditions"].as_array()?.clone();
        conditions.iter().any(|c| c["type"] == "Established" && c["status"] == "True").then_some(())
    })
    .await;

    let operator = service_account_user(NAMESPACE, RELEASE);
    let module = service_account_user(NAMESPACE, MODULE_ACCOUNT);
    let anywhere = plane.create_namespace("helm-anywhere").await.expect("a namespace");
    // The module's identity writes; the operator watches and acts as it.
    for question in [
        access("patch", "memcached.c5c3.io/memcacheds/status", Some(&anywhere)),
        access("create", "apps/deployments", Some(&anywhere)),
        access("list", "/secrets", None),
    ] {
        expect_access(&admin, &module, &question, true).await;
    }
    for question in [access("get", "/secrets", Some(&anywhere)), access("create", "/configmaps", Some(&anywhere))] {
        expect_access(&admin, &module, &question, false).await;
    }
    for question in [
        access("patch", "memcached.c5c3.io/memcacheds/status", Some(&anywhere)),
        access("create", "apps/deployments", Some(&anywhere)),
    ] {
        expect_access(&admin, &operator, &question, false).await;
    }
    for question in [
        access("list", "memcached.c5c3.io/memcacheds", None),
        access("watch", "memcached.c5c3.io/memcacheds", Some(&anywhere)),
        access("list", "/secrets", None),
        Access {
            verb: "impersonate",
            resource: "/serviceaccounts",
            namespace: Some(NAMESPACE),
            name: Some(MODULE_ACCOUNT),
        },
        access("create", "coordination.k8s.io/leases", Some(NAMESPACE)),
        Access {
            verb: "update",
            resource: "coordination.k8s.io/leases",
            namespace: Some(NAMESPACE),
            name: Some(RELEASE),
        },
    ] {
        expect_access(&admin, &operator, &question, true).await;
    }
    for question in [
        access("get", "/secrets", Some(&anywhere)),
        access("create", "/secrets", Some(&anywhere)),
        access("create", "coordination.k8s.io/leases", Some(&anywhere)),
        Access {
            verb: "update",
            resource: "coordination.k8s.io/leases",
            namespace: Some(NAMESPACE),
            name: Some("other"),
        },
    ] {
        expect_access(&admin, &operator, &question, false).await;
    }

    // Namespace-scoped, beside it: release in one namespace, watching another.
    let ops = plane.create_namespace("helm-ops").await.expect("a namespace");
    let team = plane.create_namespace("helm-team").await.expect("a namespace");
    let watch = format!("watchNamespace={team}");
    helm_on(plane, &["install", "scoped", chart.as_str(), "--namespace", &ops, "--set", &watch]);
    let scoped = release_objects(plane, "scoped", &ops);
    assert_eq!(
        kinds(&scoped),
        ["ClusterRole", "ClusterRoleBinding", "Deployment", "Role", "RoleBinding", "Service", "ServiceAccount"]
            .map(String::from)
            .into(),
    );
    let scoped_cluster_wide: BTreeSet<String> =
        scoped.iter().filter(|o| o["metadata"]["namespace"].is_null()).map(key).collect();
    assert_eq!(
        scoped_cluster_wide,
        [
            "ClusterRole//scoped-memcached-operator-metrics-auth",
            "ClusterRoleBinding//scoped-memcached-operator-metrics-auth",
            "ClusterRole//scoped-memcached-operator-metrics-reader",
            "ClusterRole//scoped-memcached-operator-records-reader",
        ]
        .map(String::from)
        .into(),
        "no cluster-wide RBAC but the metrics reviews' and readers'"
    );
    assert_installed(plane, &scoped);
    let scoped_user = service_account_user(&ops, "scoped-memcached-operator");
    let scoped_module = service_account_user(&ops, MODULE_ACCOUNT);
    for question in [
        access("list", "memcached.c5c3.io/memcacheds", Some(&team)),
        access("watch", "/secrets", Some(&team)),
        access("create", "coordination.k8s.io/leases", Some(&ops)),
    ] {
        expect_access(&admin, &scoped_user, &question, true).await;
    }
    expect_access(&admin, &scoped_module, &access("create", "apps/deployments", Some(&team)), true).await;
    for question in [
        access("list", "memcached.c5c3.io/memcacheds", None),
        access("list", "memcached.c5c3.io/memcacheds", Some(&anywhere)),
        access("list", "/secrets", Some(&anywhere)),
        access("create", "apps/deployments", Some(&team)),
    ] {
        expect_access(&admin, &scoped_user, &question, false).await;
    }
    for question in [access("create", "apps/deployments", Some(&ops)), access("list", "/secrets", Some(&anywhere))] {
        expect_access(&admin, &scoped_module, &question, false).await;
    }

    // A second release in the same namespace, for another team. Without a
    // prefix Helm refuses it, naming the module's ServiceAccount (the first
    // release's); with one, its module acts as an account of its own, which
    // only that release's operator may impersonate.
    let other_team = plane.create_namespace("helm-team-b").await.expect("a namespace");
    let watch_other = format!("watchNamespace={other_team}");
    let kubeconfig = plane.kubeconfig(User::Admin).to_string_lossy().into_owned();
    let install = ["install", "team-b", chart.as_str(), "--namespace", ops.as_str(), "--set", watch_other.as_str()];
    let clash = helm(&[&install[..], &["--kubeconfig", kubeconfig.as_str()]].concat());
    let clash_error = String::from_utf8_lossy(&clash.stderr);
    assert!(!clash.status.success(), "a second release with the same module account installed");
    assert!(clash_error.contains(r#"ServiceAccount "memcached""#), "{clash_error}");
    let listed = helm_on(plane, &["list", "--namespace", &ops, "--failed", "--short"]);
    if listed.lines().any(|release| release == "team-b") {
        helm_on(plane, &["uninstall", "team-b", "--namespace", &ops]);
    }
    helm_on(plane, &[&install[..], &["--set", "moduleIdentityPrefix=team-b-"]].concat());
    let team_b = release_objects(plane, "team-b", &ops);
    assert_installed(plane, &team_b);
    let team_b_module = service_account_user(&ops, "team-b-memcached");
    let team_b_operator = service_account_user(&ops, "team-b-memcached-operator");
    expect_access(&admin, &team_b_module, &access("create", "apps/deployments", Some(&other_team)), true).await;
    expect_access(&admin, &team_b_module, &access("create", "apps/deployments", Some(&team)), false).await;
    expect_access(&admin, &scoped_module, &access("create", "apps/deployments", Some(&other_team)), false).await;
    let impersonate =
        |name| Access { verb: "impersonate", resource: "/serviceaccounts", namespace: Some(&ops), name: Some(name) };
    expect_access(&admin, &team_b_operator, &impersonate("team-b-memcached"), true).await;
    expect_access(&admin, &team_b_operator, &impersonate(MODULE_ACCOUNT), false).await;
    expect_access(&admin, &scoped_user, &impersonate("team-b-memcached"), false).await;
    helm_on(plane, &["uninstall", "team-b", "--namespace", &ops]);
    wait_uninstalled(plane, &team_b).await;
    assert!(
        live(plane, &the(&scoped, "ServiceAccount", MODULE_ACCOUNT).clone()).is_some(),
        "the first release's stays"
    );

    // The scoped release's Deployment, run as its ServiceAccount: it
    // reconciles a CR in the watched namespace, and the API server refuses
    // it nothing (audit log).
    // (The ServiceMonitor CRD, which the operator watches when served.)
    for entry in std::fs::read_dir(control_plane::repo_root().join("tests/crds")).expect("tests/crds") {
        let file = entry.expect("an entry").path();
        plane.apply_yaml(&std::fs::read_to_string(&file).expect("a CRD")).await.expect("applying a test CRD");
    }
    let mark = plane.audit_mark().expect("the audit log");
    let running = ChartOperator::start(plane, &scoped, &ops);
    let memcacheds = Api::<kube::api::DynamicObject>::namespaced_with(admin.clone(), &team, &memcached_resource());
    let cr: kube::api::DynamicObject = serde_json::from_value(json!({
        "apiVersion": "memcached.c5c3.io/v1alpha1", "kind": "Memcached", "metadata": {"name": "cache"}, "spec": {},
    }))
    .expect("a Memcached");
    memcacheds.create(&PostParams::default(), &cr).await.expect("creating a Memcached");
    let refused = || -> Vec<String> {
        let events = plane.audit_events_since(mark).expect("the audit log");
        events
            .iter()
            .filter(|e| e.user == scoped_user && matches!(e.code, Some(401 | 403)))
            .map(|e| format!("{} {} ({:?})", e.verb, e.request_uri, e.code))
            .collect()
    };
    // Compiling the component at start takes a few seconds of CPU.
    operator_support::eventually_within(std::time::Duration::from_secs(180), "the CR's children and status", || {
        let (refused, memcacheds, admin, team) = (refused(), memcacheds.clone(), admin.clone(), team.clone());
        let log = running.log();
        async move {
            assert!(refused.is_empty(), "requests refused with the chart's Role:\n{}\n{log}", refused.join("\n"));
            for (_, resource) in owned_kinds().into_iter().take(2) {
                Api::<kube::api::DynamicObject>::namespaced_with(admin.clone(), &team, &resource)
                    .get_opt("cache")
                    .await
                    .ok()??;
            }
            let cr = memcacheds.get("cache").await.ok()?;
            (cr.data["status"]["observedGeneration"] == json!(cr.metadata.generation?)).then_some(())
        }
    })
    .await;
    plane.audit_sync().await.expect("the audit log");
    let requests = plane.audit_events_since(mark).expect("the audit log");
    assert!(
        requests.iter().any(|e| e.user == scoped_user
            && e.resource.as_deref() == Some("leases")
            && e.namespace.as_deref() == Some(ops.as_str())
            && e.is_write()
            && e.code.is_some_and(|c| c < 300)),
        "the operator took its Lease in {ops}"
    );
    assert_eq!(refused(), Vec::<String>::new(), "requests refused with the chart's Role");

    // Its /metrics: HTTPS, reviewed with the chart's metrics-auth
    // ClusterRole, readable by a ServiceAccount bound to its metrics-reader.
    let metrics = running.metrics_address().await;
    let reader = "scoped-memcached-operator-metrics-reader";
    let binding = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": "test-helm-prometheus"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": reader},
        "subjects": [{"kind": "ServiceAccount", "name": "prometheus", "namespace": ops}],
    });
    plane.apply_yaml(&binding.to_string()).await.expect("binding the metrics reader");
    let token = metrics_support::service_account_token(&admin, &ops, "prometheus").await;
    let unbound = metrics_support::service_account_token(&admin, &ops, "someone").await;
    eventually("the metrics-reader binding to reach the authorizer", || async {
        metrics_support::may_read_metrics(&admin, &ops, "prometheus").await.then_some(())
    })
    .await;
    let reply = metrics_support::https_get(&metrics, "/metrics", Some(&token)).await.expect("an HTTPS answer");
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert!(reply.body.contains("wasm_operator_reconciles_total"), "{}", reply.body);
    let reply = metrics_support::https_get(&metrics, "/metrics", Some(&unbound)).await.expect("an HTTPS answer");
    assert_eq!(reply.status, 403, "{}", reply.body);
    plane.audit_sync().await.expect("the audit log");
    assert_eq!(refused(), Vec::<String>::new(), "reviews refused with the chart's metrics-auth ClusterRole");
    drop(running);

    // `helm upgrade` of the cluster-wide release to one watched namespace:
    // the ClusterRole and its binding go, a Role and RoleBinding there come.
    let watch_anywhere = format!("watchNamespace={anywhere}");
    helm_on(plane, &["upgrade", RELEASE, chart.as_str(), "--namespace", NAMESPACE, "--set", &watch_anywhere]);
    let upgraded = release_objects(plane, RELEASE, NAMESPACE);
    assert_eq!(kinds(&upgraded), kinds(&scoped), "the upgraded release is namespace-scoped");
    assert_installed(plane, &upgraded);
    // (The metrics ClusterRoles stay: watchNamespace does not change them.)
    let cluster_scoped: Vec<Value> = cluster_wide
        .iter()
        .filter(|o| o["metadata"]["namespace"].is_null() && o["metadata"]["name"] == RELEASE)
        .cloned()
        .collect();
    assert_eq!(kinds(&cluster_scoped), ["ClusterRole", "ClusterRoleBinding"].map(String::from).into());
    wait_uninstalled(plane, &cluster_scoped).await;
    expect_access(&admin, &operator, &access("list", "memcached.c5c3.io/memcacheds", None), false).await;
    expect_access(&admin, &operator, &access("list", "memcached.c5c3.io/memcacheds", Some(&anywhere)), true).await;

    // Uninstall: every object goes, the CRD (and so the CRs) stays.
    helm_on(plane, &["uninstall", "scoped", "--namespace", &ops]);
    helm_on(plane, &["uninstall", RELEASE, "--namespace", NAMESPACE]);
    wait_uninstalled(plane, &scoped).await;
    wait_uninstalled(plane, &cluster_wide).await;
    wait_uninstalled(plane, &upgraded).await;
    expect_access(&admin, &operator, &access("list", "memcached.c5c3.io/memcacheds", Some(&anywhere)), false).await;
    expect_access(&admin, &scoped_user, &access("list", "memcached.c5c3.io/memcacheds", Some(&team)), false).await;
    assert!(live(plane, &crd).is_some(), "helm never deletes a CRD from crds/ (nor the CRs with it)");
    assert!(memcacheds.get_opt("cache").await.expect("reading the CR").is_some(), "the CR outlives the release");
}
