//! The harness itself against the real binaries: users and RBAC, the audit
//! log, kubectl, an API server restart, and teardown.

use std::net::TcpStream;
use std::time::Duration;

use control_plane::{ControlPlane, Options, User};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ObjectMeta, PostParams};

fn config_map(name: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta { name: Some(name.into()), ..ObjectMeta::default() },
        data: Some([("key".to_string(), "value".to_string())].into()),
        ..ConfigMap::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operator_user_gets_only_bound_rbac_and_the_audit_log_records_it() {
    let plane = ControlPlane::start().expect("control plane");
    eprintln!("started in {:.2}s", plane.startup_time().as_secs_f64());
    let namespace = plane.create_namespace("harness").await.expect("namespace");
    let operator: Api<ConfigMap> = Api::namespaced(plane.client(User::Operator).await.expect("client"), &namespace);
    let mark = plane.audit_mark().expect("audit mark");

    // No RBAC yet: the operator user may not create.
    let denied = operator.create(&PostParams::default(), &config_map("denied")).await;
    assert!(matches!(&denied, Err(kube::Error::Api(s)) if s.code == 403), "expected 403, got {denied:?}");

    plane
        .apply_yaml(&format!(
            "apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {{ name: config-maps, namespace: {namespace} }}
rules:
  - apiGroups: ['']
    resources: [configmaps]
    verbs: [get, create]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{ name: config-maps, namespace: {namespace} }}
roleRef: {{ apiGroup: rbac.authorization.k8s.io, kind: Role, name: config-maps }}
subjects:
  - {{ kind: User, name: {user}, apiGroup: rbac.authorization.k8s.io }}
",
            user = User::Operator.name()
        ))
        .await
        .expect("apply RBAC");
    plane
        .wait_until_allowed(User::Operator, "create", "", "configmaps", Some(&namespace))
        .await
        .expect("RBAC in effect");
    operator.create(&PostParams::default(), &config_map("allowed")).await.expect("create after RBAC");
    operator.get("allowed").await.expect("get");

    plane.audit_sync().await.expect("audit sync");
    let writes = plane.writes_by(User::Operator.name(), mark).expect("audit events");
    let summary: Vec<_> = writes
        .iter()
        .map(|e| (e.verb.as_str(), e.resource.as_deref(), e.namespace.as_deref(), e.name.as_deref(), e.code))
        .collect();
    // The denied create has no name in its objectRef: the body is never read.
    assert_eq!(
        summary,
        [
            ("create", Some("configmaps"), Some(namespace.as_str()), None, Some(403)),
            ("create", Some("configmaps"), Some(namespace.as_str()), Some("allowed"), Some(201)),
        ]
    );
    let admin_writes: Vec<_> = plane
        .writes_by(User::Admin.name(), mark)
        .expect("audit events")
        .into_iter()
        .filter(|e| e.resource.as_deref() != Some("subjectaccessreviews"))
        .collect();
    let applied: Vec<_> = admin_writes.iter().map(|e| (e.verb.as_str(), e.resource.as_deref())).collect();
    assert_eq!(applied, [("patch", Some("roles")), ("patch", Some("rolebindings"))], "server-side apply is a patch");
    assert!(admin_writes.iter().all(|e| e.api_group.as_deref() == Some("rbac.authorization.k8s.io")));

    // kubectl is wired to the admin kubeconfig.
    let output = plane
        .kubectl()
        .args(["get", "configmap", "allowed", "-n", &namespace, "-o", "jsonpath={.data.key}"])
        .output()
        .expect("kubectl");
    assert!(output.status.success(), "kubectl: {}", String::from_utf8_lossy(&output.stderr));
    assert_eq!(String::from_utf8_lossy(&output.stdout), "value");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_keeps_data_and_clients_and_drop_cleans_up() {
    let plane =
        ControlPlane::start_with(Options { controller_manager: false, ..Options::default() }).expect("control plane");
    let client = plane.client(User::Admin).await.expect("client");
    let config_maps: Api<ConfigMap> = Api::namespaced(client, "default");
    config_maps.create(&PostParams::default(), &config_map("survivor")).await.expect("create");

    let port = plane.server_url().rsplit(':').next().and_then(|p| p.parse::<u16>().ok()).expect("a port");
    let began = std::time::Instant::now();
    plane.restart_apiserver().expect("restart");
    eprintln!("API server restarted in {:.2}s", began.elapsed().as_secs_f64());
    // The client made before the restart reconnects on its own, same port and CA.
    let back = config_maps.get("survivor").await.expect("the ConfigMap after the restart");
    assert_eq!(back.data.and_then(|d| d.get("key").cloned()).as_deref(), Some("value"));

    let dir = plane.dir().to_owned();
    assert!(dir.join("kubeconfig").is_file());
    drop(plane);
    assert!(!dir.exists(), "the temp dir is removed");
    let refused = TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_secs(1));
    assert!(refused.is_err(), "nothing listens on the API server's port any more");
}

/// The pods mode: a Deployment's Pods are spread by the scheduler over the
/// fake Nodes (hard anti-affinity), kwok gives each an IP from its Node's
/// podCIDR and makes it Ready, a scale-down deletes them, and dropping the
/// plane stops kwok and the scheduler with the rest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_mode_schedules_starts_and_deletes_pods() {
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::core::v1::Pod;
    use kube::api::{ListParams, Patch, PatchParams};

    let plane = ControlPlane::start_with(Options { audit_log: false, ..Options::pods() }).expect("control plane");
    eprintln!("pods mode started in {:.2}s", plane.startup_time().as_secs_f64());
    let client = plane.client(User::Admin).await.expect("client");
    let deployment: Deployment = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "containers": [{"name": "web", "image": "registry.k8s.io/pause:3.10"}],
                    "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                        {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}
                    ]}}
                }
            }
        }
    }))
    .expect("a Deployment");
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    deployments.create(&PostParams::default(), &deployment).await.expect("create");
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let web = ListParams::default().labels("app=web");
    let settled = |count: usize| {
        let (pods, web) = (pods.clone(), web.clone());
        async move {
            for _ in 0..300 {
                let list = pods.list(&web).await.expect("listing Pods").items;
                if list.len() == count && list.iter().all(control_plane::pod_ready_with_ip) {
                    return list;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            panic!("{count} Ready Pods did not appear in 30s");
        }
    };
    let running = settled(3).await;
    let mut nodes: Vec<String> = Vec::new();
    for pod in &running {
        let node = pod.spec.as_ref().and_then(|s| s.node_name.clone()).expect("scheduled");
        let index = control_plane::FAKE_NODES.iter().position(|(n, _)| *n == node).expect("a fake Node");
        let ip = pod.status.as_ref().and_then(|s| s.pod_ip.clone()).expect("an IP");
        assert!(ip.starts_with(&format!("10.244.{}.", index + 1)), "{ip} is not from {node}'s podCIDR");
        nodes.push(node);
    }
    nodes.sort();
    nodes.dedup();
    assert_eq!(nodes.len(), 3, "one Pod per Node");

    let scale = serde_json::json!({"spec": {"replicas": 1}});
    deployments.patch("web", &PatchParams::default(), &Patch::Merge(&scale)).await.expect("scale");
    settled(1).await;

    let dir = plane.dir().to_owned();
    drop(plane);
    assert!(!dir.exists(), "the temp dir is removed");
    let left: Vec<String> = std::fs::read_dir("/proc")
        .expect("/proc")
        .flatten()
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.contains(&*dir.to_string_lossy()))
        .collect();
    assert!(left.is_empty(), "processes left behind: {left:?}");
}
