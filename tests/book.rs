//! The book in docs/ (mdBook) and README.md: the book builds with the pinned
//! mdbook (scripts/mdbook.sh), every link and anchor of every built page and
//! every relative link of the README resolves, every page is in the table of
//! contents, no page speaks of the tracker or of work sessions, the
//! reference pages are what the binaries, the CRDs and the sources say now,
//! the benchmark plots are what their result files make, and every flag a
//! hand-written table lists and every metric a page names is in those
//! references.
//!
//! `UPDATE_REFERENCE=1 cargo test --release --workspace --test book` writes
//! the reference pages again.

#[path = "book_links.rs"]
mod book_links;
#[path = "book_reference.rs"]
mod book_reference;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use book_links::{Anchors, broken_links, markdown_links};

fn root() -> PathBuf {
    control_plane::repo_root()
}

/// The book built once per test process into a folder of its own (not
/// target/book, which `make docs` owns).
fn built_book() -> &'static Path {
    static BOOK: OnceLock<PathBuf> = OnceLock::new();
    BOOK.get_or_init(|| {
        let out = std::env::temp_dir().join(format!("memcached-operator-book-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&out);
        let installer =
            Command::new("bash").arg(root().join("scripts/mdbook.sh")).output().expect("run scripts/mdbook.sh");
        assert!(installer.status.success(), "scripts/mdbook.sh: {}", String::from_utf8_lossy(&installer.stderr));
        let stdout = String::from_utf8(installer.stdout).expect("a path");
        let mdbook = stdout.lines().last().expect("scripts/mdbook.sh prints the path").to_owned();
        let build = Command::new(&mdbook)
            .arg("build")
            .arg(root().join("docs"))
            .arg("--dest-dir")
            .arg(&out)
            .output()
            .expect("run mdbook");
        let log = String::from_utf8_lossy(&build.stderr);
        assert!(build.status.success(), "mdbook build failed:\n{log}");
        let warnings: Vec<&str> = log.lines().filter(|line| line.contains("WARN") || line.contains("ERROR")).collect();
        assert!(warnings.is_empty(), "mdbook warned:\n{}", warnings.join("\n"));
        out
    })
}

fn book_sources() -> Vec<PathBuf> {
    let mut pages = Vec::new();
    walk(&root().join("docs/src"), &mut pages);
    pages.retain(|path| path.extension().is_some_and(|ext| ext == "md"));
    pages.sort();
    pages
}

fn walk(dir: &Path, into: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("read {}: {e}", dir.display())) {
        let path = entry.expect("a folder entry").path();
        if path.is_dir() {
            walk(&path, into);
        } else {
            into.push(path);
        }
    }
}

#[test]
fn the_book_builds_and_every_link_and_anchor_in_it_resolves() {
    let book = built_book();
    let broken = broken_links(book);
    assert!(broken.is_empty(), "{} broken links in the built book:\n{}", broken.len(), broken.join("\n"));
}

#[test]
fn every_relative_link_of_the_readme_and_changelog_resolves() {
    let anchors = Anchors::of_book(built_book(), &root().join("docs/src"));
    let mut broken = Vec::new();
    for file in ["README.md", "CHANGELOG.md"] {
        let path = root().join(file);
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {file}: {e}"));
        for link in markdown_links(&text) {
            if let Some(problem) = anchors.check_source_link(&root(), &link) {
                broken.push(format!("{file}: {link}: {problem}"));
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn every_page_is_in_the_table_of_contents() {
    let src = root().join("docs/src");
    let summary = std::fs::read_to_string(src.join("SUMMARY.md")).expect("SUMMARY.md");
    let listed: Vec<String> = markdown_links(&summary).into_iter().collect();
    let missing: Vec<String> = book_sources()
        .iter()
        .map(|page| page.strip_prefix(&src).expect("under docs/src").to_string_lossy().into_owned())
        .filter(|page| page != "SUMMARY.md" && !listed.contains(page))
        .collect();
    assert!(missing.is_empty(), "pages SUMMARY.md does not list (mdBook would leave them out): {missing:?}");
}

/// "issue 23", "issues 12", "session", "sessions": the guides describe the
/// software, not the work that made it.
fn tracker_words(text: &str) -> Vec<String> {
    let lower = text.to_lowercase();
    let mut found = Vec::new();
    for (index, _) in lower.match_indices("issue") {
        let before = lower[..index].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric()) {
            continue;
        }
        let rest = lower[index + "issue".len()..].trim_start_matches('s');
        if rest.strip_prefix(' ').is_some_and(|number| number.starts_with(|c: char| c.is_ascii_digit())) {
            found.push(context(text, index));
        }
    }
    for (index, _) in lower.match_indices("session") {
        let before = lower[..index].chars().next_back();
        let after = lower[index + "session".len()..].trim_start_matches('s').chars().next();
        if !before.is_some_and(|c| c.is_alphanumeric()) && !after.is_some_and(|c| c.is_alphanumeric()) {
            found.push(context(text, index));
        }
    }
    found
}

fn context(text: &str, index: usize) -> String {
    let line = text[..index].matches('\n').count() + 1;
    let start = text[..index].rfind('\n').map_or(0, |i| i + 1);
    let end = text[index..].find('\n').map_or(text.len(), |i| index + i);
    format!("line {line}: {}", &text[start..end])
}

#[test]
fn no_page_speaks_of_issue_numbers_or_sessions() {
    let mut files = book_sources();
    files.push(root().join("README.md"));
    files.push(root().join("CHANGELOG.md"));
    let mut found = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("read {}: {e}", file.display()));
        for hit in tracker_words(&text) {
            found.push(format!("{}: {hit}", file.strip_prefix(root()).unwrap_or(&file).display()));
        }
    }
    assert!(found.is_empty(), "pages that speak of the tracker or past sessions:\n{}", found.join("\n"));
}

#[test]
fn the_tracker_check_catches_what_it_should() {
    assert_eq!(tracker_words("fixed in issue 23's run").len(), 1);
    assert_eq!(tracker_words("Issues 12 and 13").len(), 1);
    assert_eq!(tracker_words("this session's machine; Sessions").len(), 2);
    assert!(tracker_words("wasmtime issue #1749, an issue tracker, sessionless, possession").is_empty());
}

#[test]
fn the_command_reference_is_what_the_binaries_print() {
    book_reference::check("reference/commands.md", &book_reference::commands(&root()));
}

#[test]
fn the_metrics_reference_is_what_the_host_registers() {
    book_reference::check("reference/metrics.md", &book_reference::metrics(&root()));
}

/// The benchmark pages' plots are what `scripts/plots.py` draws from the
/// result files now, and every figure of those files is on its page
/// (`make plots` draws them again).
#[test]
fn the_benchmark_plots_are_what_the_result_files_make() {
    let check = Command::new("python3")
        .arg(root().join("scripts/plots.py"))
        .arg("--check")
        .output()
        .expect("run python3 scripts/plots.py --check");
    assert!(check.status.success(), "{}", String::from_utf8_lossy(&check.stderr));
}

/// The `--flag`s a flag table's rows start with (`| \`--module PATH\` ...`).
fn table_flags(page: &str) -> Vec<String> {
    page.lines()
        .filter_map(|line| line.strip_prefix("| `--"))
        .map(|rest| {
            let name: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '-').collect();
            format!("--{name}")
        })
        .collect()
}

/// Every metric name a page writes in backticks (a histogram's series
/// named by its family; not a prefix such as `wasm_operator_*`, nor the
/// Python SDK's package `wasm_operator_sdk`).
fn named_metrics(page: &str) -> Vec<String> {
    let mut names = Vec::new();
    for piece in page.split('`').skip(1).step_by(2) {
        for prefix in ["wasm_operator_", "memcached_operator_"] {
            if let Some(at) = piece.find(prefix) {
                let name: String = piece[at..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
                let family = ["_bucket", "_sum", "_count"]
                    .iter()
                    .find_map(|suffix| name.strip_suffix(suffix))
                    .unwrap_or(&name)
                    .to_owned();
                if !family.ends_with('_') && family != "wasm_operator_sdk" {
                    names.push(family);
                }
            }
        }
    }
    names
}

#[test]
fn every_flag_and_metric_a_page_names_is_one_the_binaries_have() {
    let commands = std::fs::read_to_string(root().join("docs/src/reference/commands.md")).expect("the commands page");
    let metrics = std::fs::read_to_string(root().join("docs/src/reference/metrics.md")).expect("the metrics page");
    let mut unknown = Vec::new();
    for path in book_sources().iter().filter(|path| !path.starts_with(root().join("docs/src/reference"))) {
        let page = std::fs::read_to_string(path).expect("a page");
        let shown = path.strip_prefix(root()).unwrap_or(path).display().to_string();
        for flag in table_flags(&page) {
            if !commands.contains(&format!("{flag} ")) && !commands.contains(&format!("{flag}=")) {
                unknown.push(format!("{shown}: flag {flag}"));
            }
        }
        for metric in named_metrics(&page) {
            if !metrics.contains(&format!("`{metric}`")) {
                unknown.push(format!("{shown}: metric {metric}"));
            }
        }
    }
    assert!(unknown.is_empty(), "named in the book, unknown to the binaries:\n{}", unknown.join("\n"));
}

#[test]
fn flags_and_metrics_are_read_as_pages_write_them() {
    assert_eq!(
        table_flags("| `--module PATH` (env X) | a |\n| `--metrics-secure` (bare) |\ntext `--not-a-row`"),
        ["--module", "--metrics-secure"]
    );
    assert_eq!(
        named_metrics(
            "`wasm_operator_reconcile_duration_seconds_bucket{le=\"1\"}`, `rate(memcached_operator_x_total[5m])`, \
             `wasm_operator_module_*` and `import wasm_operator_sdk`"
        ),
        ["wasm_operator_reconcile_duration_seconds", "memcached_operator_x_total"]
    );
}

#[test]
fn the_crd_reference_is_what_deploy_installs() {
    book_reference::check("reference/crds.md", &book_reference::crds(&root()));
}

#[test]
fn the_conditions_and_events_reference_names_every_reason_the_code_sets() {
    let page = std::fs::read_to_string(root().join("docs/src/reference/conditions-events.md")).expect("the page");
    let problems = book_reference::reasons_disagreeing(&root(), &page);
    assert!(
        problems.is_empty(),
        "docs/src/reference/conditions-events.md and the code disagree:\n{}",
        problems.join("\n")
    );
}

/// A shell block a page marks `<!-- tested: in the repository -->` (run from
/// the repository's root) or `<!-- tested: in a new folder -->` (run in an
/// empty temporary folder), with the release binaries first on PATH, as a
/// reader who built them has them.
struct TestedBlock {
    page: String,
    in_repository: bool,
    script: String,
}

fn tested_blocks(page: &str, text: &str) -> Vec<TestedBlock> {
    let mut blocks = Vec::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let marker = line.trim();
        let in_repository = match marker {
            "<!-- tested: in the repository -->" => true,
            "<!-- tested: in a new folder -->" => false,
            _ if marker.starts_with("<!-- tested") => panic!("{page}: unknown marker {marker}"),
            _ => continue,
        };
        let fence = lines.next().unwrap_or_default();
        assert!(fence.starts_with("```sh"), "{page}: {marker} must stand right before a ```sh block, not {fence:?}");
        let script: Vec<&str> = lines.by_ref().take_while(|line| !line.starts_with("```")).collect();
        blocks.push(TestedBlock { page: page.to_owned(), in_repository, script: script.join("\n") });
    }
    blocks
}

#[test]
fn the_blocks_marked_tested_run_as_the_pages_write_them() {
    let mut pages: Vec<PathBuf> = book_sources();
    pages.push(root().join("README.md"));
    let blocks: Vec<TestedBlock> = pages
        .iter()
        .flat_map(|page| {
            let text = std::fs::read_to_string(page).unwrap_or_else(|e| panic!("read {}: {e}", page.display()));
            tested_blocks(&page.strip_prefix(root()).unwrap_or(page).display().to_string(), &text)
        })
        .collect();
    assert!(!blocks.is_empty(), "no page marks a block as tested");
    let path = format!("{}:{}", root().join("target/release").display(), std::env::var("PATH").unwrap_or_default());
    for (index, block) in blocks.iter().enumerate() {
        let folder = std::env::temp_dir().join(format!("book-block-{}-{index}", std::process::id()));
        let _ = std::fs::remove_dir_all(&folder);
        std::fs::create_dir_all(&folder).expect("a folder");
        let cwd = if block.in_repository { root() } else { folder.clone() };
        let output = Command::new("bash")
            .arg("-euo")
            .arg("pipefail")
            .arg("-c")
            .arg(&block.script)
            .current_dir(&cwd)
            .env("PATH", &path)
            .output()
            .expect("run bash");
        let _ = std::fs::remove_dir_all(&folder);
        assert!(
            output.status.success(),
            "{}: the block marked tested failed ({}):\n{}\n--- stdout\n{}\n--- stderr\n{}",
            block.page,
            output.status,
            block.script,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr),
        );
    }
}

#[test]
fn tested_blocks_are_found_after_their_marker_only() {
    let text = "a\n<!-- tested: in a new folder -->\n```sh\necho one\necho two\n```\n```sh\nnot tested\n```\n";
    let blocks = tested_blocks("p.md", text);
    assert_eq!(blocks.len(), 1);
    assert_eq!(blocks[0].script, "echo one\necho two");
    assert!(!blocks[0].in_repository);
}
