//! Embeds what `wasm-operator new` writes: the project templates
//! (`host/templates/<lang>/`), each language's SDK and the contract, as
//! `(set, relative path, contents)` in `$OUT_DIR/embedded.rs`. Build output,
//! installed packages and caches are left out. Links `wasm-operator` with
//! the code it serves with laid out first (`link/code_order.rs`).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// (set name, folder under the repo, files or folders in it to take)
const SETS: &[(&str, &str, &[&str])] = &[
    ("template/rust", "host/templates/rust", &["."]),
    ("template/typescript", "host/templates/typescript", &["."]),
    ("template/python", "host/templates/python", &["."]),
    ("sdk/rust", "sdk/rust", &["Cargo.toml", "README.md", "src"]),
    (
        "sdk/typescript",
        "sdk/typescript",
        &[
            "package.json",
            "package-lock.json",
            "tsconfig.json",
            "tsconfig.build.json",
            "wit.d.ts",
            "README.md",
            "eslint.config.js",
            "src",
        ],
    ),
    ("sdk/python", "sdk/python", &["pyproject.toml", "README.md", "src"]),
    ("wit", "wit/controller", &["controller.wit"]),
];

const SKIPPED: &[&str] =
    &[".keep", "node_modules", "dist", "build", "target", "__pycache__", ".mypy_cache", ".ruff_cache"];

fn skipped(path: &Path) -> bool {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    SKIPPED.contains(&name) || name.ends_with(".pyc") || name.ends_with(".egg-info")
}

fn collect(path: &Path, files: &mut Vec<PathBuf>) {
    if skipped(path) || !path.exists() {
        return;
    }
    if path.is_dir() {
        let mut entries: Vec<PathBuf> =
            std::fs::read_dir(path).into_iter().flatten().flatten().map(|e| e.path()).collect();
        entries.sort();
        for entry in entries {
            collect(&entry, files);
        }
    } else {
        files.push(path.to_owned());
    }
}

include!("link/code_order.rs");

fn main() {
    let manifest_dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    lay_out_serving_code_first(&manifest_dir);
    let repo = manifest_dir.parent().expect("host/ is in the repo").to_owned();
    let mut out = String::from("pub const FILES: &[(&str, &str, &str)] = &[\n");
    for (set, folder, entries) in SETS {
        let root = repo.join(folder);
        let mut files = Vec::new();
        for entry in *entries {
            // Only what is taken (not node_modules beside it).
            println!("cargo:rerun-if-changed={}", root.join(entry).display());
            collect(&root.join(entry), &mut files);
        }
        for file in files {
            let relative = file.strip_prefix(&root).expect("under its root").to_string_lossy().replace('\\', "/");
            let _ = writeln!(out, "    ({set:?}, {relative:?}, include_str!({:?})),", file.display().to_string());
        }
    }
    out.push_str("];\n");
    let target = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR")).join("embedded.rs");
    std::fs::write(target, out).expect("writing embedded.rs");
}
