//! The component glue for the `controller-logic` world.

use crate::Error;

wit_bindgen::generate!({
    path: "../../../wit",
    world: "controller-logic",
});

use exports::c5c3::memcached::controller::{self as wit, KindInfo, ModuleManifest, ObjectRef};
use exports::c5c3::memcached::errors::{Error as WitError, FieldError};

struct Component;

export!(Component);

impl From<Error> for WitError {
    fn from(error: Error) -> Self {
        match error {
            Error::Invalid(path, message) => WitError::Invalid(vec![FieldError { path, message }]),
            Error::Malformed(message) => WitError::Malformed(vec![FieldError { path: String::new(), message }]),
            Error::Unsupported(message) => WitError::Unsupported(message),
        }
    }
}

fn kind(group: &str, version: &str, kind: &str, plural: &str) -> KindInfo {
    KindInfo { group: group.into(), version: version.into(), kind: kind.into(), plural: plural.into(), namespaced: true }
}


impl wit::Guest for Component {
    fn manifest() -> ModuleManifest {
        ModuleManifest {
            parent: kind(crate::GROUP, crate::VERSION, "Greeting", "greetings"),
            owned: vec![kind("", "v1", "ConfigMap", "configmaps")],
            reads: vec![kind("", "v1", "Secret", "secrets")],
        }
    }

    fn references(parent: String) -> Result<Vec<ObjectRef>, WitError> {
        Ok(crate::references(&parent)?
            .into_iter()
            .map(|name| ObjectRef { group: String::new(), version: "v1".into(), kind: "Secret".into(), name })
            .collect())
    }

    fn desired(kind: String, parent: String, current: Option<String>, related: Vec<String>) -> Result<Option<String>, WitError> {
        Ok(crate::desired(&kind, &parent, current.as_deref(), &related)?)
    }

    fn desired_all(parent: String, current: Vec<Option<String>>, related: Vec<String>) -> Result<Vec<Option<String>>, WitError> {
        let current = current.into_iter().next().flatten();
        Ok(vec![crate::desired("ConfigMap", &parent, current.as_deref(), &related)?])
    }

    fn status(parent: String, owned: Vec<String>, _related: Vec<String>, _now: String, _problem: Option<String>) -> Result<String, WitError> {
        Ok(crate::status(&parent, &owned)?)
    }
}
