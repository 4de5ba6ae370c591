//! The StaticSite module: a site's files in a ConfigMap, served by nginx in
//! a Deployment, behind a Service; the status says how many replicas are
//! ready, where the site is, and a `Ready` condition. A site without an
//! `index.html` is invalid, reported at `spec.files`.

use std::collections::BTreeMap;

use kube_derive::CustomResource;
use schemars::JsonSchema;
use sdk::k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use sdk::k8s_openapi::api::core::v1::*;
use sdk::prelude::*;
use serde::{Deserialize, Serialize};
use wasm_operator_sdk as sdk;

/// A static web site.
#[derive(CustomResource, Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[kube(group = "sites.example.com", version = "v1", kind = "StaticSite", namespaced, status = "StaticSiteStatus")]
// kube-derive's generated code reaches these crates through the SDK.
#[kube(crates(kube_core = "sdk::kube_core", k8s_openapi = "sdk::k8s_openapi", serde_json = "sdk::serde_json"))]
pub struct StaticSiteSpec {
    /// The site's files by name; `index.html` is required.
    pub files: BTreeMap<String, String>,
    /// How many nginx Pods serve it.
    #[serde(default = "one")]
    #[schemars(range(min = 0))]
    pub replicas: i32,
    /// The web server's image.
    #[serde(default = "nginx")]
    pub image: String,
}

fn one() -> i32 {
    1
}

fn nginx() -> String {
    "nginx:1.27-alpine".to_owned()
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
/// Every field defaults: the server may hold a status written by the host alone.
#[serde(rename_all = "camelCase", default)]
pub struct StaticSiteStatus {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    pub ready_replicas: i32,
    pub url: String,
    /// `Ready`, and the host's own `Stalled` when the module fails.
    pub conditions: Vec<Condition>,
}

/// Where nginx serves files from.
const ROOT: &str = "/usr/share/nginx/html";

pub struct StaticSites;

impl Reconciler for StaticSites {
    type Parent = StaticSite;
    type Status = StaticSiteStatus;

    fn manifest() -> Manifest {
        Manifest::new::<StaticSite>("static-site", env!("CARGO_PKG_VERSION"))
            .owns::<ConfigMap>()
            .owns::<Deployment>()
            .owns::<Service>()
    }

    // Only the fields the module sets: the SDK adds the namespace and the
    // owner reference and merges onto what the server has.
    fn desired(site: &StaticSite, _ctx: &Context) -> Result<Vec<Object>, Error> {
        if !site.spec.files.contains_key("index.html") {
            return Err(Error::invalid("spec.files", "must have an index.html"));
        }
        let (name, files) = (site.name_any(), format!("{}-files", site.name_any()));
        let labels = BTreeMap::from([
            ("app.kubernetes.io/name".into(), "static-site".into()),
            ("app.kubernetes.io/instance".into(), name.clone()),
        ]);
        let meta =
            |name: &str| ObjectMeta { name: Some(name.into()), labels: Some(labels.clone()), ..Default::default() };
        let config_map =
            ConfigMap { metadata: meta(&files), data: Some(site.spec.files.clone()), ..Default::default() };
        let port = ContainerPort { name: Some("http".into()), container_port: 80, ..Default::default() };
        let mount =
            VolumeMount { name: "files".into(), mount_path: ROOT.into(), read_only: Some(true), ..Default::default() };
        let web = Container {
            name: "web".into(),
            image: Some(site.spec.image.clone()),
            ports: Some(vec![port]),
            volume_mounts: Some(vec![mount]),
            ..Default::default()
        };
        let files = ConfigMapVolumeSource { name: files, ..Default::default() };
        let volume = Volume { name: "files".into(), config_map: Some(files), ..Default::default() };
        let pod = PodSpec { containers: vec![web], volumes: Some(vec![volume]), ..Default::default() };
        let pod_meta = ObjectMeta { labels: Some(labels.clone()), ..Default::default() };
        let template = PodTemplateSpec { metadata: Some(pod_meta), spec: Some(pod) };
        let selector = LabelSelector { match_labels: Some(labels.clone()), ..Default::default() };
        let spec = DeploymentSpec { replicas: Some(site.spec.replicas), selector, template, ..Default::default() };
        let deployment = Deployment { metadata: meta(&name), spec, ..Default::default() };
        let http = Some(IntOrString::String("http".into()));
        let port = ServicePort { name: Some("http".into()), port: 80, target_port: http, ..Default::default() };
        let spec = ServiceSpec { selector: Some(labels.clone()), ports: Some(vec![port]), ..Default::default() };
        let service = Service { metadata: meta(&name), spec: Some(spec), ..Default::default() };
        // The files are the module's whole: a file removed from the spec goes.
        Ok(vec![Object::new(&config_map).replacing("/data"), Object::new(&deployment), Object::new(&service)])
    }

    fn status(site: &StaticSite, ctx: &Context) -> Result<StaticSiteStatus, Error> {
        let (name, namespace) = (site.name_any(), site.namespace().unwrap_or_default());
        let ready = ctx.owned::<Deployment>(&name).and_then(|d| d.status).and_then(|s| s.ready_replicas).unwrap_or(0);
        let wanted = site.spec.replicas;
        // Only our own condition: the host's Stalled goes once we answer.
        let mut conditions: Vec<Condition> =
            site.status.iter().flat_map(|s| s.conditions.clone()).filter(|c| c.type_ == "Ready").collect();
        let (is_ready, reason, message) = match ctx.problem() {
            Some(problem) => (false, "Failed", problem.to_owned()),
            None if ready >= wanted => (true, "Available", format!("{ready} of {wanted} replicas ready")),
            None => (false, "Progressing", format!("{ready} of {wanted} replicas ready")),
        };
        let generation = site.metadata.generation;
        set_condition(&mut conditions, "Ready", is_ready, reason, message, generation, &ctx.now());
        let url = format!("http://{name}.{namespace}.svc");
        Ok(StaticSiteStatus { observed_generation: generation, ready_replicas: ready, url, conditions })
    }
}

export_reconciler!(StaticSites);
