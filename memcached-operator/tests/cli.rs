//! The `memcached-operator` binary as a user runs it.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures").join(name)
}

fn operator(args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_memcached-operator"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary runs");
    if let Some(input) = stdin {
        child.stdin.take().expect("stdin").write_all(input.as_bytes()).expect("stdin writable");
    }
    drop(child.stdin.take());
    child.wait_with_output().expect("the binary finishes")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn render_prints_the_golden_objects_as_json_and_yaml() {
    for name in ["minimal", "everything"] {
        let cr = fixture(name).join("memcached.yaml");
        let cr = cr.to_str().expect("utf-8 path");
        let json = operator(&["render", "-f", cr, "-o", "json"], None);
        assert!(json.status.success(), "{}", text(&json.stderr));
        let golden = std::fs::read_to_string(fixture(name).join("objects.json")).expect("golden");
        assert_eq!(text(&json.stdout), golden, "{name}");

        let yaml = operator(&["render", "-f", cr], None);
        assert!(yaml.status.success(), "{}", text(&yaml.stderr));
        let golden = std::fs::read_to_string(fixture(name).join("objects.yaml")).expect("golden");
        assert_eq!(text(&yaml.stdout), golden, "{name}");
    }
}

#[test]
fn render_reads_several_crs_from_stdin_and_defaults_the_namespace() {
    let input = "apiVersion: memcached.c5c3.io/v1alpha1\nkind: Memcached\nmetadata: {name: one}\nspec: {}\n---\n\
                 apiVersion: memcached.c5c3.io/v1alpha1\nkind: Memcached\nmetadata: {name: two, namespace: cache}\nspec:\n  security:\n    networkPolicy: {enabled: true}\n";
    let out = operator(&["render", "-f", "-", "-o", "json"], Some(input));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let list: serde_json::Value = serde_json::from_slice(&out.stdout).expect("a JSON List");
    assert_eq!(list["kind"], "List");
    let items: Vec<(String, String, String)> = list["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|o| {
            let field = |p: &str| o.pointer(p).and_then(|v| v.as_str()).unwrap_or_default().to_owned();
            (field("/kind"), field("/metadata/name"), field("/metadata/namespace"))
        })
        .collect();
    let want = [
        ("Deployment", "one", "default"),
        ("Service", "one", "default"),
        ("Deployment", "two", "cache"),
        ("Service", "two", "cache"),
        ("NetworkPolicy", "two", "cache"),
    ];
    let want: Vec<(String, String, String)> =
        want.iter().map(|(k, n, ns)| (k.to_string(), n.to_string(), ns.to_string())).collect();
    assert_eq!(items, want);
}

#[test]
fn invalid_input_exits_non_zero_naming_each_field() {
    let input = "apiVersion: memcached.c5c3.io/v1alpha1\nkind: Memcached\nmetadata: {name: bad}\nspec:\n  replicas: 99\n  security:\n    tls: {enabled: true}\n";
    let out = operator(&["render", "-f", "-"], Some(input));
    assert!(!out.status.success());
    let stderr = text(&out.stderr);
    assert!(stderr.contains("spec.replicas"), "{stderr}");
    assert!(stderr.contains("spec.security.tls.certificateSecretRef.name"), "{stderr}");
    assert!(out.stdout.is_empty(), "nothing is printed for an invalid CR");

    let out = operator(&["render", "-f", "-"], Some("spec: [unclosed\n"));
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("line"), "{}", text(&out.stderr));
}

#[test]
fn crd_matches_deploy() {
    let out = operator(&["crd"], None);
    assert!(out.status.success());
    let committed = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../deploy/crd/memcached.c5c3.io_memcacheds.yaml"),
    )
    .expect("deploy/crd exists");
    assert_eq!(text(&out.stdout), committed, "deploy/crd is stale: run `make manifests`");
}

#[test]
fn a_precompiled_module_renders_the_same_and_needs_explicit_consent() {
    let dir = std::env::temp_dir().join(format!("precompile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temp dir");
    let compiled = dir.join("memcached.cwasm");
    let compiled = compiled.to_str().expect("utf-8 path");
    let out = operator(&["precompile", "-o", compiled], None);
    assert!(out.status.success(), "{}", text(&out.stderr));

    let cr = fixture("everything").join("memcached.yaml");
    let cr = cr.to_str().expect("utf-8 path");
    let refused = operator(&["--module", compiled, "render", "-f", cr], None);
    assert!(!refused.status.success());
    assert!(text(&refused.stderr).contains("--allow-precompiled"), "{}", text(&refused.stderr));

    let rendered = operator(&["--module", compiled, "--allow-precompiled", "render", "-f", cr, "-o", "json"], None);
    assert!(rendered.status.success(), "{}", text(&rendered.stderr));
    let golden = std::fs::read_to_string(fixture("everything").join("objects.json")).expect("golden");
    assert_eq!(text(&rendered.stdout), golden);

    // Not a module at all: a clear error, not a crash.
    std::fs::write(dir.join("junk.cwasm"), b"\x7fELF not really").expect("writing junk");
    let junk = dir.join("junk.cwasm");
    let junk = operator(&["--module", junk.to_str().expect("utf-8"), "--allow-precompiled", "render", "-f", cr], None);
    assert!(!junk.status.success());
    assert!(text(&junk.stderr).contains("junk.cwasm is not WebAssembly"), "{}", text(&junk.stderr));
    let _ = std::fs::remove_dir_all(&dir);
}
