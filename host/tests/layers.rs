//! The host's structure, held to what `src/lib.rs` says of it: every file
//! imports only from its own layer or the layers below, and no files import
//! each other in a circle. Read from the sources (`use crate::...`,
//! `crate::...` paths and `use super::...`), each path resolved to the file
//! that holds it; a file's unit tests (`#[cfg(test)] mod tests`) are left
//! out, as they are not part of what it builds.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Top-level modules, bottom first: a file may import from its own layer
/// and those below.
const LAYERS: &[&[&str]] = &[
    &["runtime", "memory", "duration"],
    &["planning"],
    &["operator"],
    &["cli"],
    &["authoring"],
    &["host_command"],
    &["lib", "main"],
];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every `.rs` file under `src/`, by its module path (`operator::writing::status`).
fn files() -> BTreeMap<Vec<String>, PathBuf> {
    fn walk(dir: &Path, into: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).expect("src/ reads") {
            let path = entry.expect("an entry").path();
            if path.is_dir() {
                walk(&path, into);
            } else if path.extension().is_some_and(|e| e == "rs") {
                into.push(path);
            }
        }
    }
    let mut paths = Vec::new();
    walk(&src(), &mut paths);
    paths
        .into_iter()
        .map(|path| {
            let relative = path.strip_prefix(src()).expect("under src/").with_extension("");
            let mut module: Vec<String> =
                relative.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
            if module.last().is_some_and(|last| last == "mod") {
                module.pop();
            }
            (module, path)
        })
        .collect()
}

/// The code of a file: without its unit tests and its comments.
fn without_tests(text: &str) -> String {
    let code = text.find("#[cfg(test)]\nmod tests").map_or(text, |at| &text[..at]);
    code.lines().filter(|line| !line.trim_start().starts_with("//")).collect::<Vec<_>>().join("\n")
}

/// The paths a file names: each `crate::a::b` (and `super::a` in a `use`),
/// made absolute, with the names inside a `use`'s braces.
fn named_paths(module: &[String], text: &str) -> Vec<Vec<String>> {
    let mut paths = Vec::new();
    let bytes = text.as_bytes();
    for (root, skip) in [("crate::", 0usize), ("super::", 1)] {
        let mut from = 0;
        while let Some(found) = text[from..].find(root) {
            let at = from + found;
            from = at + root.len();
            let preceded =
                at > 0 && (bytes[at - 1].is_ascii_alphanumeric() || bytes[at - 1] == b'_' || bytes[at - 1] == b':');
            if preceded {
                continue;
            }
            // `super::` counts in `use` statements only (elsewhere it is
            // mostly a unit test's `super::*`, or a path within the file).
            if skip == 1 && !text[..at].trim_end().ends_with("use") {
                continue;
            }
            let mut base: Vec<String> = if skip == 1 {
                let mut parent = module.to_vec();
                // A file's own module is `module`; `super` is its parent.
                parent.pop();
                parent
            } else {
                Vec::new()
            };
            let rest = &text[from..];
            let path_len =
                rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':')).unwrap_or(rest.len());
            let path = rest[..path_len].trim_end_matches(':');
            base.extend(path.split("::").filter(|s| !s.is_empty()).map(str::to_owned));
            if rest[path_len..].starts_with('{') {
                // `crate::a::{b, c::d}`: each name inside, one level deep.
                let inner = &rest[path_len + 1..];
                let close = inner.find('}').unwrap_or(inner.len());
                for item in inner[..close].split(',') {
                    let item = item.split_whitespace().next().unwrap_or_default();
                    let mut full = base.clone();
                    full.extend(item.split("::").filter(|s| !s.is_empty() && *s != "self").map(str::to_owned));
                    paths.push(full);
                }
            } else {
                paths.push(base);
            }
        }
    }
    paths
}

/// The file holding `path`: its longest prefix that is a module of a file.
fn resolve<'a>(files: &'a BTreeMap<Vec<String>, PathBuf>, path: &[String]) -> Option<&'a Vec<String>> {
    (1..=path.len()).rev().find_map(|len| files.get_key_value(&path[..len]).map(|(key, _)| key))
}

/// Which file imports which (file modules, tests left out).
fn imports() -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
    let files = files();
    let mut graph = BTreeMap::new();
    for (module, path) in &files {
        let text = std::fs::read_to_string(path).expect("a source file");
        let targets: BTreeSet<Vec<String>> = named_paths(module, &without_tests(&text))
            .iter()
            .filter_map(|path| resolve(&files, path))
            .filter(|target| *target != module)
            .cloned()
            .collect();
        graph.insert(module.clone(), targets);
    }
    graph
}

fn layer_of(module: &[String]) -> usize {
    let top = module.first().map_or("lib", String::as_str);
    LAYERS
        .iter()
        .position(|layer| layer.contains(&top))
        .unwrap_or_else(|| panic!("src/{top} is in no layer: add it to LAYERS here and to the list in src/lib.rs"))
}

#[test]
fn every_file_imports_only_from_its_layer_or_below() {
    let mut upward = Vec::new();
    for (module, targets) in imports() {
        for target in targets {
            if layer_of(&target) > layer_of(&module) {
                upward.push(format!("{} imports {}", module.join("::"), target.join("::")));
            }
        }
    }
    assert!(upward.is_empty(), "imports from a higher layer:\n{}", upward.join("\n"));
}

#[test]
fn no_files_import_each_other_in_a_circle() {
    let graph = imports();
    // Tarjan's strongly connected components.
    struct Walk<'g> {
        graph: &'g BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
        index: BTreeMap<&'g Vec<String>, usize>,
        low: BTreeMap<&'g Vec<String>, usize>,
        stack: Vec<&'g Vec<String>>,
        on_stack: BTreeSet<&'g Vec<String>>,
        circles: Vec<Vec<String>>,
    }
    impl<'g> Walk<'g> {
        fn visit(&mut self, node: &'g Vec<String>) {
            let next = self.index.len();
            self.index.insert(node, next);
            self.low.insert(node, next);
            self.stack.push(node);
            self.on_stack.insert(node);
            for target in self.graph.get(node).into_iter().flatten() {
                let Some((target, _)) = self.graph.get_key_value(target) else { continue };
                if !self.index.contains_key(target) {
                    self.visit(target);
                    let low = self.low[node].min(self.low[target]);
                    self.low.insert(node, low);
                } else if self.on_stack.contains(target) {
                    let low = self.low[node].min(self.index[target]);
                    self.low.insert(node, low);
                }
            }
            if self.low[node] == self.index[node] {
                let mut circle = Vec::new();
                while let Some(member) = self.stack.pop() {
                    self.on_stack.remove(member);
                    circle.push(member.join("::"));
                    if member == node {
                        break;
                    }
                }
                if circle.len() > 1 {
                    circle.sort();
                    self.circles.push(circle);
                }
            }
        }
    }
    let mut walk = Walk {
        graph: &graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        circles: Vec::new(),
    };
    for node in graph.keys() {
        if !walk.index.contains_key(node) {
            walk.visit(node);
        }
    }
    let described: Vec<String> = walk.circles.iter().map(|circle| circle.join(" <-> ")).collect();
    assert!(described.is_empty(), "files that import each other in a circle:\n{}", described.join("\n"));
}

#[test]
fn the_reader_resolves_paths_to_files_and_skips_unit_tests() {
    let files = files();
    let module = |path: &str| path.split("::").map(str::to_owned).collect::<Vec<_>>();
    let text = "/// See [`crate::authoring::render`].\nuse crate::planning::step::{self, Inputs};\nuse super::inputs::Children;\nfn f() { crate::runtime::answer::check_status(\"{}\"); }\n#[cfg(test)]\nmod tests {\n    use crate::cli::args::Flavor;\n}\n";
    let named = named_paths(&module("operator::reconciling::reconcile"), &without_tests(text));
    let resolved: BTreeSet<String> = named.iter().filter_map(|p| resolve(&files, p)).map(|m| m.join("::")).collect();
    let expected: BTreeSet<String> =
        ["planning::step", "operator::reconciling::inputs", "runtime::answer"].map(str::to_owned).into();
    assert_eq!(resolved, expected);
    assert_eq!(layer_of(&module("cli::args")), 3);
}
