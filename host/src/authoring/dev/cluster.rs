//! What `dev` writes to the cluster: the module's CRD and the samples, both
//! by server-side apply (field manager `wasm-operator-dev`, forced: a
//! developer's files win), as the kubeconfig's user.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use kube::discovery::{self, ApiCapabilities, ApiResource, Scope};
use serde_json::Value;

use super::FIELD_MANAGER;
use crate::authoring::documents;
use crate::runtime::bindings::Manifest;

/// Every object of the sample files and folders, in order.
pub fn read_samples(paths: &[PathBuf]) -> Result<Vec<Value>> {
    let mut objects = Vec::new();
    for path in paths {
        for file in sample_files(path)? {
            let text = std::fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
            objects.extend(documents::objects(&text).with_context(|| format!("reading {}", file.display()))?);
        }
    }
    Ok(objects)
}

/// `path` itself, or the YAML and JSON files under it, sorted.
fn sample_files(path: &Path) -> Result<Vec<PathBuf>> {
    if !path.is_dir() {
        return Ok(vec![path.to_owned()]);
    }
    let mut files = Vec::new();
    let mut folders = vec![path.to_owned()];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).with_context(|| format!("reading {}", folder.display()))? {
            let entry = entry.with_context(|| format!("reading {}", folder.display()))?.path();
            if entry.is_dir() {
                folders.push(entry);
            } else if entry.extension().is_some_and(|e| e == "yaml" || e == "yml" || e == "json") {
                files.push(entry);
            }
        }
    }
    if files.is_empty() {
        bail!("{} holds no YAML or JSON file", path.display());
    }
    files.sort();
    Ok(files)
}

/// The CRD the module ships, applied, and established.
pub async fn install_crd(client: &kube::Client, manifest: &Manifest) -> Result<()> {
    if manifest.crd.trim().is_empty() {
        eprintln!("dev: {} ships no CRD; its kind {} must be installed already", manifest.name, manifest.parent.kind);
        return Ok(());
    }
    let crd = documents::objects(&manifest.crd)
        .context("reading the module's CRD")?
        .into_iter()
        .next()
        .context("the module's CRD is empty")?;
    let crd: CustomResourceDefinition =
        serde_json::from_value(crd).context("the module's CRD is not a CustomResourceDefinition")?;
    let name = crd.metadata.name.clone().context("the module's CRD has no name")?;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.patch(&name, &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(&crd))
        .await
        .with_context(|| format!("applying the CRD {name}"))?;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let current = crds.get(&name).await.with_context(|| format!("reading the CRD {name}"))?;
        let established = current
            .status
            .and_then(|status| status.conditions)
            .into_iter()
            .flatten()
            .any(|condition| condition.type_ == "Established" && condition.status == "True");
        if established {
            break;
        }
        if Instant::now() > deadline {
            bail!("the CRD {name} was not established in 60 s");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Discovery serves the kind a moment after the CRD is established.
    let parent = &manifest.parent;
    let gvk = GroupVersionKind::gvk(&parent.group, &parent.version, &parent.kind);
    served(client, &gvk).await.with_context(|| format!("the CRD {name} is established, but"))?;
    eprintln!("dev: CRD {name} applied");
    Ok(())
}

/// The resource of `gvk` as the API server's discovery serves it, asked
/// again for up to 30 s (a new CRD's kind takes a moment to appear).
async fn served(client: &kube::Client, gvk: &GroupVersionKind) -> Result<(ApiResource, ApiCapabilities)> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match discovery::pinned_kind(client, gvk).await {
            Ok(found) => return Ok(found),
            Err(error) if Instant::now() > deadline => {
                return Err(error)
                    .with_context(|| format!("the cluster does not serve {}/{} {}", gvk.group, gvk.version, gvk.kind));
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(250)).await,
        }
    }
}

/// A sample as applied: its kind and where it is.
#[derive(Clone, Debug)]
pub struct Applied {
    pub api_version: String,
    pub kind: String,
    pub namespace: Option<String>,
    pub name: String,
}

/// Each sample applied in turn (namespaced ones without a namespace in
/// `namespace`, else the kubeconfig's); a namespace that does not exist is
/// created first.
pub async fn apply_samples(client: &kube::Client, samples: &[Value], namespace: Option<&str>) -> Result<Vec<Applied>> {
    let default_namespace = namespace.unwrap_or(client.default_namespace()).to_owned();
    let mut applied = Vec::new();
    for sample in samples {
        let described = documents::describe(sample);
        let api_version = sample["apiVersion"].as_str().unwrap_or_default().to_owned();
        let kind = sample["kind"].as_str().unwrap_or_default().to_owned();
        let name = sample.pointer("/metadata/name").and_then(Value::as_str).context(format!("{described}: no name"))?;
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", &api_version));
        let gvk = GroupVersionKind::gvk(group, version, &kind);
        let (resource, capabilities) = served(client, &gvk).await.with_context(|| described.clone())?;
        let (api, namespace) = if capabilities.scope == Scope::Namespaced {
            let namespace =
                sample.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or(&default_namespace).to_owned();
            ensure_namespace(client, &namespace).await?;
            (Api::<DynamicObject>::namespaced_with(client.clone(), &namespace, &resource), Some(namespace))
        } else {
            (Api::<DynamicObject>::all_with(client.clone(), &resource), None)
        };
        let mut body = sample.clone();
        if let Some(namespace) = &namespace {
            body["metadata"]["namespace"] = Value::String(namespace.clone());
        }
        api.patch(name, &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(&body))
            .await
            .with_context(|| format!("applying {described}"))?;
        let applied_one = Applied { api_version, kind, namespace, name: name.to_owned() };
        eprintln!("dev: applied {}", applied_one.describe());
        applied.push(applied_one);
    }
    Ok(applied)
}

impl Applied {
    pub fn describe(&self) -> String {
        match &self.namespace {
            Some(namespace) => format!("{} {namespace}/{}", self.kind, self.name),
            None => format!("{} {}", self.kind, self.name),
        }
    }
}

async fn ensure_namespace(client: &kube::Client, name: &str) -> Result<()> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    if namespaces.get_opt(name).await.with_context(|| format!("reading namespace {name}"))?.is_some() {
        return Ok(());
    }
    let namespace = Namespace {
        metadata: kube::api::ObjectMeta { name: Some(name.to_owned()), ..Default::default() },
        ..Default::default()
    };
    match namespaces.create(&PostParams::default(), &namespace).await {
        Ok(_) => {
            eprintln!("dev: created namespace {name}");
            Ok(())
        }
        Err(kube::Error::Api(status)) if status.is_already_exists() => Ok(()),
        Err(error) => Err(error).with_context(|| format!("creating namespace {name}")),
    }
}
