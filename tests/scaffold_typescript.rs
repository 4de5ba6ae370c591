//! `wasm-operator new --lang typescript`: the project (host/templates/typescript,
//! the TypeScript SDK vendored) built outside the repo with `make` (npm ci of
//! the pinned tools, the component, `tsc --noEmit`, its unit tests and its
//! golden cases through `wasm-operator test`), then run by the host. Needs
//! Node.js >= 20 with npm, and the npm registry or a warm npm cache.

#[path = "operator_support.rs"]
mod operator_support;
#[path = "scaffold_support.rs"]
mod scaffold_support;

use scaffold_support::{Parent, runs_in_the_host, scaffold_and_make};

const PARENT: Parent = Parent { group: "typescript.scaffold.example.com", kind: "Banner", plural: "banners" };

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_typescript_project_from_new_builds_outside_the_repo_and_runs_in_the_host() {
    let module =
        tokio::task::spawn_blocking(|| scaffold_and_make("demo-ts", "typescript", &PARENT)).await.expect("built");
    let project = module.parent().and_then(|target| target.parent()).expect("the project").to_owned();
    for file in [
        "package-lock.json",
        "crd.yaml",
        "samples/banner.yaml",
        "wit/controller.wit",
        "vendor/wasm-operator-sdk/src/index.ts",
    ] {
        assert!(project.join(file).is_file(), "the project has {file}");
    }
    runs_in_the_host(&module, &PARENT).await;
}
