//! The binary's command line: `--help` prints the usage and succeeds,
//! wherever it is given; a wrong argument fails naming it.

use std::process::{Command, Output};

fn control_plane(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_control-plane")).args(args).output().expect("the binary runs")
}

#[test]
fn help_prints_the_usage_and_succeeds() {
    for args in [&["--help"][..], &["-h"], &["up", "--help"], &["up", "--pods", "-h"]] {
        let out = control_plane(args);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {stderr}");
        assert!(stdout.starts_with("usage: control-plane up"), "{args:?}: {stdout}");
        assert!(!stderr.contains("unknown"), "{args:?}: {stderr}");
    }
}

#[test]
fn an_unknown_argument_fails_naming_it() {
    let out = control_plane(&["up", "--pod"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(r#"unknown argument "--pod""#), "{stderr}");
    assert!(stderr.contains("usage: control-plane up"), "{stderr}");
}
