// Included by host/build.rs and memcached-operator/build.rs (a build script
// has no crate to share code with).
//
// Lays out the functions the operator runs while it serves first in the
// binary's code, together, then those only starting up touched
// (`serving-functions.txt`, written by `scripts/code-order.py`). The kernel
// maps a binary's code 64 KiB around each page a fault reads; scattered over
// 23 MiB of code, the few MiB a reconcile runs kept ~9 MiB resident at 1000
// CRs, laid out together they keep about what they are.
//
// Only lld reads the list (Rust's default linker on x86_64 Linux since 1.90);
// a name the build does not have (another crate version, another profile) is
// skipped, so a stale list costs memory, never a failed or different build.

/// Tells cargo to link this package's binaries with the serving functions first.
fn lay_out_serving_code_first(manifest_dir: &std::path::Path) {
    let list = manifest_dir.join("../host/link/serving-functions.txt");
    println!("cargo:rerun-if-changed={}", list.display());
    let target = std::env::var("TARGET").unwrap_or_default();
    // Another linker than the default one (GNU ld, gold, mold) may not know the option.
    let flags = std::env::var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default();
    let other_linker = ["fuse-ld", "linker-features", "linker-flavor", "linker="]
        .iter()
        .any(|flag| flags.contains(flag));
    if target != "x86_64-unknown-linux-gnu" || other_linker || !list.exists() {
        return;
    }
    println!("cargo:rustc-link-arg-bins=-Wl,--symbol-ordering-file={}", list.display());
    println!("cargo:rustc-link-arg-bins=-Wl,--no-warn-symbol-ordering");
}
