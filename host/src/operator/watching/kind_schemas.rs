//! Each owned kind's merge semantics (`planning/kind_schema.rs`), read from
//! the OpenAPI v3 documents the API server publishes: one request for the
//! index, one per group version, when a module version that writes by
//! server-side apply starts. The documents themselves are not kept, only
//! the shapes of the kinds asked for.

use std::collections::BTreeMap;
use std::sync::Arc;

use kube::Client;
use serde_json::Value;

use crate::planning::kind_schema::{KindSchema, SchemaError};
use crate::planning::kinds::Kind;

#[derive(Debug, thiserror::Error)]
pub enum KindSchemaError {
    #[error("reading {url} from the API server: {source}")]
    Request { url: String, source: kube::Error },
    #[error("{url} is not JSON: {source}")]
    NotJson { url: String, source: serde_json::Error },
    #[error("the API server publishes no OpenAPI v3 document for {group_version} (its /openapi/v3 lists: {listed})")]
    NotPublished { group_version: String, listed: String },
    #[error("{url}: {source}")]
    Schema { url: String, source: SchemaError },
}

/// The path of a group version in the OpenAPI v3 index: `api/v1`,
/// `apis/apps/v1`.
fn index_path(kind: &Kind) -> String {
    let resource = &kind.resource;
    if resource.group.is_empty() {
        format!("api/{}", resource.version)
    } else {
        format!("apis/{}/{}", resource.group, resource.version)
    }
}

async fn get_json(client: &Client, url: &str) -> Result<Value, KindSchemaError> {
    let request = http::Request::get(url)
        .body(Vec::new())
        .map_err(|error| KindSchemaError::Request { url: url.to_owned(), source: kube::Error::HttpError(error) })?;
    let text = client
        .request_text(request)
        .await
        .map_err(|source| KindSchemaError::Request { url: url.to_owned(), source })?;
    serde_json::from_str(&text).map_err(|source| KindSchemaError::NotJson { url: url.to_owned(), source })
}

/// The schema of each of `kinds`, in their order (each group version's
/// document read once).
pub async fn fetch(client: &Client, kinds: &[Kind]) -> Result<Vec<Arc<KindSchema>>, KindSchemaError> {
    let index = get_json(client, "/openapi/v3").await?;
    let mut by_path: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (at, kind) in kinds.iter().enumerate() {
        by_path.entry(index_path(kind)).or_default().push(at);
    }
    let mut schemas: Vec<Option<Arc<KindSchema>>> = vec![None; kinds.len()];
    for (path, ats) in by_path {
        let url = match index.pointer(&format!("/paths/{}/serverRelativeURL", path.replace('/', "~1"))) {
            Some(Value::String(url)) => url.clone(),
            _ => {
                let listed = index
                    .get("paths")
                    .and_then(Value::as_object)
                    .map(|paths| paths.keys().cloned().collect::<Vec<_>>().join(", "))
                    .unwrap_or_default();
                return Err(KindSchemaError::NotPublished { group_version: path, listed });
            }
        };
        let document = get_json(client, &url).await?;
        for at in ats {
            let resource = &kinds[at].resource;
            let schema = KindSchema::from_openapi(&document, &resource.group, &resource.version, &resource.kind)
                .map_err(|source| KindSchemaError::Schema { url: url.clone(), source })?;
            schemas[at] = Some(Arc::new(schema));
        }
    }
    Ok(schemas.into_iter().map(|schema| schema.unwrap_or_else(|| Arc::new(KindSchema::untyped()))).collect())
}
