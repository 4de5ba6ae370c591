//! `record --module` takes the module's name (as the operator's /records
//! and /metrics label it) or its file, whose manifest names it; its help
//! says so. Through the binary, against an address where nothing listens:
//! the request that fails names the module it asked for.

use std::path::PathBuf;
use std::process::{Command, Output};

fn wasm_operator(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_wasm-operator")).args(args).output().expect("the binary runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn the_help_says_a_name_or_a_file() {
    let help = wasm_operator(&["record", "--help"]);
    let stdout = text(&help.stdout);
    assert!(help.status.success(), "{}", text(&help.stderr));
    assert!(stdout.contains("--module <NAME|FILE>"), "{stdout}");
    assert!(stdout.contains("its manifest name"), "{stdout}");
    assert!(!stdout.contains("--module <PATH>"), "{stdout}");
    assert!(!stdout.contains("A logic module (a component"), "the global --module's text: {stdout}");
}

#[test]
fn a_name_or_a_file_asks_for_the_modules_name() {
    let module = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/greeting.wasm");
    assert!(module.is_file(), "{} is missing: `make test` builds it", module.display());
    let module = module.to_str().expect("a UTF-8 path");
    // Port 9 (discard): nothing listens on it here.
    for given in ["greeting", module] {
        let out = wasm_operator(&["record", "--module", given, "--address", "http://127.0.0.1:9"]);
        let stderr = text(&out.stderr);
        assert!(!out.status.success(), "{given}: {stderr}");
        assert!(stderr.contains("/records?module=greeting"), "{given}: {stderr}");
        assert!(!stderr.contains("greeting.wasm"), "{given}: {stderr}");
    }
}
