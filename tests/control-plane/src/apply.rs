//! Multi-document server-side apply, resolving each kind by discovery, so
//! CRDs, RBAC and custom resources all go through one call.

use std::time::{Duration, Instant};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::discovery::{ApiCapabilities, ApiResource, Scope, pinned_kind};
use kube::runtime::wait::{await_condition, conditions::is_crd_established};
use serde::Deserialize;

use crate::Error;

pub const FIELD_MANAGER: &str = "control-plane";

pub(crate) async fn apply_yaml(client: &Client, yaml: &str) -> Result<Vec<DynamicObject>, Error> {
    let mut applied = Vec::new();
    for (index, document) in serde_norway::Deserializer::from_str(yaml).enumerate() {
        let bad = |message: String| Error::Manifest { index, message };
        let value = serde_json::Value::deserialize(document).map_err(|e| bad(e.to_string()))?;
        if value.is_null() {
            continue; // an empty document, e.g. a trailing `---`
        }
        let object: DynamicObject = serde_json::from_value(value).map_err(|e| bad(e.to_string()))?;
        let types = object.types.as_ref().ok_or_else(|| bad("no apiVersion and kind".into()))?;
        let gvk = GroupVersionKind::try_from(types).map_err(|e| bad(e.to_string()))?;
        let name = object.metadata.name.clone().ok_or_else(|| bad("no metadata.name".into()))?;
        let (resource, capabilities) = discover(client, &gvk).await?;
        let api: Api<DynamicObject> = match capabilities.scope {
            Scope::Namespaced => {
                let namespace = object.metadata.namespace.as_deref().unwrap_or("default");
                Api::namespaced_with(client.clone(), namespace, &resource)
            }
            Scope::Cluster => Api::all_with(client.clone(), &resource),
        };
        let params = PatchParams::apply(FIELD_MANAGER).force();
        let result = api
            .patch(&name, &params, &Patch::Apply(&object))
            .await
            .map_err(|source| Error::Apply { object: format!("{} {name}", gvk.kind), source: Box::new(source) })?;
        if gvk.group == "apiextensions.k8s.io" && gvk.kind == "CustomResourceDefinition" {
            wait_established(client, &name).await?;
        }
        applied.push(result);
    }
    Ok(applied)
}

/// Discovery of one kind; a kind whose CRD was established a moment ago can
/// be missing from discovery for a short while, so not-found is retried.
async fn discover(client: &Client, gvk: &GroupVersionKind) -> Result<(ApiResource, ApiCapabilities), Error> {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        match pinned_kind(client, gvk).await {
            Ok(found) => return Ok(found),
            Err(e) if Instant::now() < deadline => {
                tracing::debug!(kind = %gvk.kind, error = %e, "not in discovery yet");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => return Err(Error::Kube(e)),
        }
    }
}

pub(crate) async fn wait_established(client: &Client, name: &str) -> Result<(), Error> {
    const SECONDS: u64 = 30;
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let wait = await_condition(api, name, is_crd_established());
    match tokio::time::timeout(Duration::from_secs(SECONDS), wait).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(source)) => Err(Error::Wait { what: format!("CRD {name} to be Established"), source }),
        Err(_) => Err(Error::Timeout { what: format!("CRD {name} to be Established"), seconds: SECONDS }),
    }
}
