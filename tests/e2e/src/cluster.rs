//! What `make bench-e2e` and `make soak` both set up: the Memcached kinds,
//! the samples they create CRs from (and how many objects each renders
//! to), and namespaces holding the two Secrets the samples reference.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::Client;
use kube::api::{Api, ApiResource, GroupVersionKind, ObjectMeta, PostParams};
use serde_json::Value;

#[derive(Debug, thiserror::Error)]
pub enum SampleError {
    #[error("{context}: {source}")]
    Io { context: String, source: std::io::Error },
    #[error("the sample {path}: {message}")]
    Sample { path: PathBuf, message: String },
    #[error("no sample in {0}")]
    NoSample(PathBuf),
}

pub fn resource(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

/// Ours' and the Go operator's CRDs both serve v1alpha1 (the Go operator's
/// stores v1beta1).
pub fn memcached_resource() -> ApiResource {
    resource("memcached.c5c3.io", "v1alpha1", "Memcached", "memcacheds")
}

/// Every kind a Memcached may own.
pub fn owned_resources() -> Vec<ApiResource> {
    vec![
        resource("apps", "v1", "Deployment", "deployments"),
        resource("", "v1", "Service", "services"),
        resource("policy", "v1", "PodDisruptionBudget", "poddisruptionbudgets"),
        resource("autoscaling", "v2", "HorizontalPodAutoscaler", "horizontalpodautoscalers"),
        resource("monitoring.coreos.com", "v1", "ServiceMonitor", "servicemonitors"),
        resource("networking.k8s.io", "v1", "NetworkPolicy", "networkpolicies"),
    ]
}

/// A sample CR, by file name, and how many objects it renders to.
pub struct Sample {
    pub name: String,
    pub object: Value,
    pub children: usize,
}

/// Every `*.yaml` of `folder`, rendered by `operator render` to count what it owns.
pub fn read_samples(folder: &Path, operator: &Path) -> Result<Vec<Sample>, SampleError> {
    let io = |context: String| move |source| SampleError::Io { context, source };
    let mut paths: Vec<PathBuf> = std::fs::read_dir(folder)
        .map_err(io(format!("reading {}", folder.display())))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.extension().is_some_and(|e| e == "yaml"))
        .collect();
    paths.sort();
    let mut samples = Vec::new();
    for path in paths {
        let sample_error = |message: String| SampleError::Sample { path: path.clone(), message };
        let text = std::fs::read_to_string(&path).map_err(io(format!("reading {}", path.display())))?;
        let object: Value = serde_norway::from_str(&text).map_err(|e| sample_error(e.to_string()))?;
        if object.pointer("/spec").is_none_or(Value::is_null) {
            return Err(sample_error("no spec".into()));
        }
        let rendered = Command::new(operator)
            .args(["render", "-o", "json", "-f"])
            .arg(&path)
            .stderr(Stdio::inherit())
            .output()
            .map_err(io(format!("running {} render", operator.display())))?;
        let list: Value = serde_json::from_slice(&rendered.stdout)
            .map_err(|e| sample_error(format!("`render -o json` printed no JSON list: {e}")))?;
        let children =
            list["items"].as_array().map_or(0, |items| items.iter().filter(|i| i["kind"] != "Memcached").count());
        if !rendered.status.success() || children == 0 {
            return Err(sample_error(format!("`render` renders no object ({})", rendered.status)));
        }
        let name = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        samples.push(Sample { name, object, children });
    }
    if samples.is_empty() {
        return Err(SampleError::NoSample(folder.to_owned()));
    }
    Ok(samples)
}

/// Creates `namespace` with placeholder Secrets `memcached-sasl` and
/// `memcached-tls`, which the samples reference (no pod mounts them here).
pub async fn create_namespace_with_secrets(client: &Client, namespace: &str) -> Result<(), kube::Error> {
    let meta = |name: &str| ObjectMeta { name: Some(name.to_owned()), ..ObjectMeta::default() };
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &Namespace { metadata: meta(namespace), ..Namespace::default() })
        .await?;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let strings = |pairs: &[(&str, &str)]| pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
    let sasl = Secret {
        metadata: meta("memcached-sasl"),
        string_data: Some(strings(&[("password-file", "memcached:bench-password")])),
        ..Secret::default()
    };
    let tls = Secret {
        metadata: meta("memcached-tls"),
        string_data: Some(strings(&[
            ("tls.crt", "placeholder"),
            ("tls.key", "placeholder"),
            ("ca.crt", "placeholder"),
        ])),
        ..Secret::default()
    };
    for secret in [sasl, tls] {
        secrets.create(&PostParams::default(), &secret).await?;
    }
    Ok(())
}
