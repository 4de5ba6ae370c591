//! Bakes the Memcached logic component into the binary. `make build` writes
//! it to target/memcached.wasm first; MEMCACHED_WASM overrides the path.

use std::path::PathBuf;

fn main() {
    let path = std::env::var_os("MEMCACHED_WASM").map(PathBuf::from).unwrap_or_else(|| {
        PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"))
            .join("../target/memcached.wasm")
    });
    println!("cargo:rerun-if-env-changed=MEMCACHED_WASM");
    println!("cargo:rerun-if-changed={}", path.display());
    if !path.exists() {
        panic!("the logic component {} does not exist: run `make build` (or `make wasm`) first", path.display());
    }
    println!("cargo:rustc-env=MEMCACHED_WASM_PATH={}", path.display());
}
