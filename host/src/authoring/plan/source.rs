//! Where the two versions come from: a component file, or an OCI reference
//! pinned by digest (pulled as a LogicModule's image is, `runtime/oci.rs`);
//! the current version by default from the cluster: the version a
//! LogicModule serves (`status.activeReference`).

use std::path::{Path, PathBuf};

use kube::Client;
use kube::api::{Api, DynamicObject};
use serde_json::Value;

use crate::operator::swapping::logic_modules;
use crate::runtime::engine::ModuleEngine;
use crate::runtime::logic_module::{LoadError, LogicModule, ModuleSource};
use crate::runtime::oci::{OciError, Registry};

#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error("{flag} {}: no such file (and not an OCI reference pinned by digest, registry/repository@sha256:...)", .path.display())]
    NoSuchFile { flag: &'static str, path: PathBuf },
    #[error(
        "{flag} {reference}: no such file, and as an OCI reference it names no digest: pin it as {reference}@sha256:<digest> (`wasm-operator push` prints it)"
    )]
    TagWithoutDigest { flag: &'static str, reference: String },
    #[error("{flag}: {error}")]
    Load { flag: &'static str, error: LoadError },
    #[error("{flag}: {error}")]
    Pull { flag: &'static str, error: OciError },
    #[error(
        "no --against given, and there is no LogicModule {name} (cluster-scoped, {group}/{version}) to take the serving version from (or its CRD is not installed): give the current version with --against FILE|REFERENCE, or the LogicModule with --logic-module NAME",
        group = logic_modules::GROUP,
        version = logic_modules::VERSION
    )]
    NoLogicModule { name: String },
    #[error(
        "no --against given, and LogicModule {name} has no status.activeReference: no version pulled from a registry serves yet (a version given to the operator as a file may serve; the LogicModule's status says which); give the current version with --against FILE|REFERENCE"
    )]
    NoActiveReference { name: String },
    #[error("reading LogicModule {name}: {error}")]
    ReadLogicModule { name: String, error: Box<kube::Error> },
}

/// A version as given on the command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VersionSource {
    File(PathBuf),
    /// Pinned by digest.
    Reference(String),
}

impl VersionSource {
    /// A file when one exists at `text`; else an OCI reference, which must
    /// name a digest.
    pub fn parse(flag: &'static str, text: &str) -> Result<Self, SourceError> {
        let path = Path::new(text);
        if path.exists() {
            return Ok(VersionSource::File(path.to_owned()));
        }
        if text.contains("@sha256:") {
            return Ok(VersionSource::Reference(text.to_owned()));
        }
        // host[:port]/repository[:tag]: a reference without a digest.
        let looks_like_reference = !text.ends_with(".wasm")
            && text.split_once('/').is_some_and(|(host, rest)| {
                !host.starts_with('.') && (host.contains('.') || host.contains(':')) && !rest.is_empty()
            });
        if looks_like_reference {
            return Err(SourceError::TagWithoutDigest { flag, reference: text.to_owned() });
        }
        Err(SourceError::NoSuchFile { flag, path: path.to_owned() })
    }
}

/// Loads (pulling first for a reference) the version `source` names.
pub async fn load(
    engine: &ModuleEngine,
    registry: &Registry,
    flag: &'static str,
    source: &VersionSource,
    allow_precompiled: bool,
) -> Result<LogicModule, SourceError> {
    match source {
        VersionSource::File(path) => {
            LogicModule::from_file(engine, path, allow_precompiled).map_err(|error| SourceError::Load { flag, error })
        }
        VersionSource::Reference(reference) => {
            tracing::info!(reference, "pulling");
            let pulled = registry.pull(reference, false).await.map_err(|error| SourceError::Pull { flag, error })?;
            LogicModule::from_bytes(engine, ModuleSource::Registry(pulled.pinned), &pulled.bytes, false)
                .map_err(|error| SourceError::Load { flag, error })
        }
    }
}

/// The reference the LogicModule `name` says its serving version came from.
pub async fn serving_reference(client: &Client, name: &str) -> Result<String, SourceError> {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &logic_modules::api_resource());
    let resource = match api.get_opt(name).await {
        Ok(Some(resource)) => resource,
        // No such object, or no such resource (the CRD is not installed).
        Ok(None) => return Err(SourceError::NoLogicModule { name: name.to_owned() }),
        Err(kube::Error::Api(status)) if status.code == 404 => {
            return Err(SourceError::NoLogicModule { name: name.to_owned() });
        }
        Err(error) => return Err(SourceError::ReadLogicModule { name: name.to_owned(), error: Box::new(error) }),
    };
    resource
        .data
        .pointer("/status/activeReference")
        .and_then(Value::as_str)
        .filter(|reference| !reference.is_empty())
        .map(str::to_owned)
        .ok_or_else(|| SourceError::NoActiveReference { name: name.to_owned() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_a_pinned_reference_or_a_clear_error() {
        let here = std::env::temp_dir().join(format!("plan-source-{}.wasm", std::process::id()));
        std::fs::write(&here, b"").expect("a file");
        let text = here.to_str().expect("UTF-8");
        assert_eq!(VersionSource::parse("--module", text).ok(), Some(VersionSource::File(here.clone())));
        let _ = std::fs::remove_file(&here);
        let pinned = "127.0.0.1:5000/modules/greeting@sha256:0123";
        assert_eq!(VersionSource::parse("--against", pinned).ok(), Some(VersionSource::Reference(pinned.into())));
        let error = VersionSource::parse("--against", "127.0.0.1:5000/modules/greeting:v2").expect_err("a tag");
        assert!(
            error.to_string().starts_with(
                "--against 127.0.0.1:5000/modules/greeting:v2: no such file, and as an OCI reference it names no digest"
            ),
            "{error}"
        );
        let error = VersionSource::parse("--module", "target/nothing-here.wasm").expect_err("no file");
        assert!(error.to_string().starts_with("--module target/nothing-here.wasm: no such file"), "{error}");
        let error = VersionSource::parse("--module", "./registry.example/x.wasm").expect_err("no file");
        assert!(matches!(error, SourceError::NoSuchFile { .. }), "{error}");
    }
}
