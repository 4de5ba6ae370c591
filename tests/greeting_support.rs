//! What the tests with many Greetings (the test module's parents) share:
//! creating them, and reading what each published in its ConfigMap.
//! Include it beside operator_support.rs.

#![allow(dead_code)]

use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use serde_json::json;

use crate::operator_support::gvk;

pub fn greetings_resource() -> ApiResource {
    gvk("example.c5c3.io", "v1", "Greeting", "greetings")
}

pub fn configmaps_resource() -> ApiResource {
    gvk("", "v1", "ConfigMap", "configmaps")
}

/// Greetings `g-000` … to `count`, each saying `hi N`, a few created at once.
pub async fn create_greetings(api: &Api<DynamicObject>, count: usize) {
    let mut tasks = tokio::task::JoinSet::new();
    let per_task = count.div_ceil(8).max(1);
    for start in (0..count).step_by(per_task) {
        let api = api.clone();
        tasks.spawn(async move {
            for i in start..(start + per_task).min(count) {
                let greeting: DynamicObject = serde_json::from_value(json!({
                    "apiVersion": "example.c5c3.io/v1", "kind": "Greeting",
                    "metadata": {"name": format!("g-{i:03}")}, "spec": {"message": format!("hi {i}")},
                }))
                .expect("a Greeting");
                api.create(&PostParams::default(), &greeting).await.expect("creating a Greeting");
            }
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.expect("a creating task");
    }
}

/// The message in the ConfigMap of Greeting `name`, if it has one.
pub async fn published(configmaps: &Api<DynamicObject>, name: &str) -> Option<String> {
    let configmap = configmaps.get_opt(name).await.expect("reading a ConfigMap")?;
    configmap.data["data"]["message"].as_str().map(str::to_owned)
}

/// RUST_LOG=wasm_operator=debug shows the operator's log in a failing test.
pub fn log_to_test_output() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
}
