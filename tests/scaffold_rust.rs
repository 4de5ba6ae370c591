//! `wasm-operator new --lang rust`: built outside the repo with `make`,
//! tested with `wasm-operator test`, run by the host.

#[path = "operator_support.rs"]
mod operator_support;
#[path = "scaffold_support.rs"]
mod scaffold_support;

use scaffold_support::{Parent, runs_in_the_host, scaffold_and_make};

const PARENT: Parent = Parent { group: "rust.scaffold.example.com", kind: "Banner", plural: "banners" };

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rust_project_from_new_builds_outside_the_repo_and_runs_in_the_host() {
    let module = tokio::task::spawn_blocking(|| scaffold_and_make("demo-rust", "rust", &PARENT)).await.expect("built");
    runs_in_the_host(&module, &PARENT).await;
}
