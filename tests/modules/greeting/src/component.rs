//! Deliberately broken builds (cargo features), which the host must refuse
//! at load with a clear message. They use wit-bindgen directly: the SDK
//! would not let them be this wrong.

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
