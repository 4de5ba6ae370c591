//! The component glue: the `wasm-operator:controller` contract's
//! `logic-module` world. The cargo features build deliberately broken
//! variants, which the host must refuse at load with a clear message.

#[cfg(not(any(feature = "contract-v2", feature = "missing-functions", feature = "wrong-world")))]
mod module {
    use crate::Error;

    wit_bindgen::generate!({
        path: "../../../wit/controller",
        world: "logic-module",
    });

    use exports::wasm_operator::controller::reconciler::{
        self as wit, Error as WitError, FieldError, KindInfo, ModuleManifest as Manifest, ObjectRef,
    };

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
        KindInfo {
            group: group.into(),
            version: version.into(),
            kind: kind.into(),
            plural: plural.into(),
            namespaced: true,
        }
    }

    impl wit::Guest for Component {
        fn manifest() -> Manifest {
            Manifest {
                name: "greeting".into(),
                version: crate::MODULE_VERSION.into(),
                parent: kind(crate::GROUP, crate::VERSION, "Greeting", "greetings"),
                crd: crate::CRD_YAML.into(),
                owned: if crate::OWNS_SERVICE_ACCOUNTS {
                    vec![kind("", "v1", "ConfigMap", "configmaps"), kind("", "v1", "ServiceAccount", "serviceaccounts")]
                } else {
                    vec![kind("", "v1", "ConfigMap", "configmaps")]
                },
                reads: vec![kind("", "v1", "Secret", "secrets")],
                field_manager: "greeting-operator".into(),
                event_reporter: "greeting-operator".into(),
            }
        }

        fn references(parent: String) -> Result<Vec<ObjectRef>, WitError> {
            Ok(crate::references(&parent)?
                .into_iter()
                .map(|name| ObjectRef {
                    group: String::new(),
                    version: "v1".into(),
                    kind: "Secret".into(),
                    namespace: None,
                    name,
                })
                .collect())
        }

        fn desired(parent: String, owned: Vec<String>, related: Vec<String>) -> Result<Vec<String>, WitError> {
            Ok(crate::desired(&parent, &owned, &related)?)
        }

        fn status(
            parent: String,
            owned: Vec<String>,
            _related: Vec<String>,
            _now: String,
            _problem: Option<String>,
        ) -> Result<String, WitError> {
            Ok(crate::status(&parent, &owned)?)
        }
    }
}

/// A module built against a contract version this host does not run.
#[cfg(feature = "contract-v2")]
mod module {
    wit_bindgen::generate!({
        inline: "package wasm-operator:controller@2.0.0;
                 interface reconciler { manifest: func() -> string; }
                 world logic-module { export reconciler; }",
    });

    struct Component;

    export!(Component);

    impl exports::wasm_operator::controller::reconciler::Guest for Component {
        fn manifest() -> String {
            "greeting, built for contract 2".into()
        }
    }
}

/// The right contract and version, but only one of its functions.
#[cfg(feature = "missing-functions")]
mod module {
    wit_bindgen::generate!({
        inline: "package wasm-operator:controller@1.0.0;
                 interface reconciler { references: func(parent: string) -> list<string>; }
                 world logic-module { export reconciler; }",
    });

    struct Component;

    export!(Component);

    impl exports::wasm_operator::controller::reconciler::Guest for Component {
        fn references(_parent: String) -> Vec<String> {
            Vec::new()
        }
    }
}

/// A component for something else entirely.
#[cfg(feature = "wrong-world")]
mod module {
    wit_bindgen::generate!({
        inline: "package example:greeter@1.0.0;
                 interface greeter { greet: func(name: string) -> string; }
                 world greeting-service { export greeter; }",
    });

    struct Component;

    export!(Component);

    impl exports::example::greeter::greeter::Guest for Component {
        fn greet(name: String) -> String {
            format!("hello, {name}")
        }
    }
}
