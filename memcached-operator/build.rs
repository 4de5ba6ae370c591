//! Bakes the Memcached logic component into the binary. `make build` writes
//! it to target/memcached.wasm first; MEMCACHED_WASM overrides the path.
//! Links the binary with the code it serves with laid out first.

use std::path::PathBuf;

include!("../host/link/code_order.rs");

fn main() {
    let manifest_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    lay_out_serving_code_first(&manifest_dir);
    let path = std::env::var_os("MEMCACHED_WASM")
        .map(PathBuf::from)
        .unwrap_or_else(|| manifest_dir.join("../target/memcached.wasm"));
    println!("cargo:rerun-if-env-changed=MEMCACHED_WASM");
    println!("cargo:rerun-if-changed={}", path.display());
    if !path.exists() {
        panic!("the logic component {} does not exist: run `make build` (or `make wasm`) first", path.display());
    }
    println!("cargo:rustc-env=MEMCACHED_WASM_PATH={}", path.display());
}
