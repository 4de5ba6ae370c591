//! Links and anchors: in the HTML mdBook built (what a reader follows) and in
//! the Markdown files read on the forge (README.md, CHANGELOG.md). mdBook
//! checks neither.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};

/// Every relative `href` and `src` of every built page whose file or anchor
/// is missing, as "page: link: why".
pub fn broken_links(book: &Path) -> Vec<String> {
    let pages = html_pages(book);
    let mut ids: BTreeMap<PathBuf, BTreeSet<String>> = BTreeMap::new();
    for page in &pages {
        ids.insert(page.clone(), attribute_values(&read(page), "id").into_iter().collect());
    }
    let mut broken = Vec::new();
    for page in &pages {
        // The 404 page's links are absolute to the site's root, wherever it is served.
        if page.file_name().is_some_and(|name| name == "404.html") {
            continue;
        }
        let html = read(page);
        for link in attribute_values(&html, "href").into_iter().chain(attribute_values(&html, "src")) {
            if external(&link) {
                continue;
            }
            let (path, fragment) = split_fragment(&link);
            let target = if path.is_empty() {
                page.clone()
            } else {
                let joined = normalize(&page.parent().expect("a folder").join(path));
                if joined.is_dir() { joined.join("index.html") } else { joined }
            };
            let shown = page.strip_prefix(book).unwrap_or(page).display();
            if !target.is_file() {
                broken.push(format!("{shown}: {link}: no such file"));
            } else if let Some(fragment) = fragment.filter(|f| !f.is_empty()) {
                let known = ids.get(&target).is_some_and(|ids| ids.contains(fragment));
                if !known && target.extension().is_some_and(|ext| ext == "html") {
                    broken.push(format!("{shown}: {link}: no anchor #{fragment}"));
                }
            }
        }
    }
    broken
}

/// The ids of each built page, by the Markdown page it came from
/// (`operator/install.md`).
pub struct Anchors {
    src: PathBuf,
    by_page: BTreeMap<PathBuf, BTreeSet<String>>,
}

impl Anchors {
    pub fn of_book(book: &Path, src: &Path) -> Self {
        let mut by_page = BTreeMap::new();
        for page in html_pages(book) {
            let relative = page.strip_prefix(book).expect("under the book").with_extension("md");
            by_page.insert(relative, attribute_values(&read(&page), "id").into_iter().collect());
        }
        Self { src: src.to_path_buf(), by_page }
    }

    /// Why a link of a Markdown file at `base` (the repository's root) does
    /// not resolve, if it does not.
    pub fn check_source_link(&self, base: &Path, link: &str) -> Option<String> {
        if external(link) {
            return None;
        }
        let (path, fragment) = split_fragment(link);
        if path.is_empty() {
            return Some("an anchor in the same file: link a book page instead".into());
        }
        let target = normalize(&base.join(path));
        if !target.exists() {
            return Some("no such file".into());
        }
        let fragment = fragment.filter(|f| !f.is_empty())?;
        let page = target.strip_prefix(&self.src).ok()?;
        match self.by_page.get(page) {
            Some(ids) if ids.contains(fragment) => None,
            Some(_) => Some(format!("no anchor #{fragment} in the built page")),
            None => Some("a page the book does not build (missing from SUMMARY.md?)".into()),
        }
    }
}

/// The targets of the Markdown links `[text](target)` outside code blocks.
pub fn markdown_links(text: &str) -> Vec<String> {
    let mut links = Vec::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        let mut rest = line;
        while let Some(start) = rest.find("](") {
            let after = &rest[start + 2..];
            let end = after.find([')', ' ']).unwrap_or(after.len());
            links.push(after[..end].to_owned());
            rest = &after[end..];
        }
    }
    links
}

fn external(link: &str) -> bool {
    ["http://", "https://", "mailto:", "data:", "javascript:"].iter().any(|scheme| link.starts_with(scheme))
}

fn split_fragment(link: &str) -> (&str, Option<&str>) {
    let link = link.split('?').next().unwrap_or(link);
    match link.split_once('#') {
        Some((path, fragment)) => (path, Some(fragment)),
        None => (link, None),
    }
}

/// `a/b/../c` as `a/c`, without touching the file system.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

fn html_pages(book: &Path) -> Vec<PathBuf> {
    let mut pages = Vec::new();
    let mut folders = vec![book.to_path_buf()];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).unwrap_or_else(|e| panic!("read {}: {e}", folder.display())) {
            let path = entry.expect("a folder entry").path();
            if path.is_dir() {
                folders.push(path);
            } else if path.extension().is_some_and(|ext| ext == "html") {
                pages.push(path);
            }
        }
    }
    pages.sort();
    pages
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

/// The values of `name="..."` attributes, `&amp;` decoded.
fn attribute_values(html: &str, name: &str) -> Vec<String> {
    let needle = format!(" {name}=\"");
    let mut values = Vec::new();
    let mut rest = html;
    while let Some(start) = rest.find(&needle) {
        let after = &rest[start + needle.len()..];
        let end = after.find('"').unwrap_or(after.len());
        values.push(after[..end].replace("&amp;", "&"));
        rest = &after[end..];
    }
    values
}

#[test]
fn links_resolve_against_files_and_anchors() {
    let dir = std::env::temp_dir().join(format!("book-links-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("part")).expect("a folder");
    std::fs::write(
        dir.join("index.html"),
        r##"<h1 id="top">x</h1><a href="part/page.html#here">ok</a><a href="#top">ok</a>"##,
    )
    .expect("write");
    std::fs::write(
        dir.join("part/page.html"),
        r##"<h2 id="here">y</h2><a href="../index.html#gone">bad anchor</a><a href="missing.html">bad file</a><img src="https://example.com/x.png">"##,
    )
    .expect("write");
    let broken = broken_links(&dir);
    std::fs::remove_dir_all(&dir).ok();
    assert_eq!(
        broken,
        vec![
            format!("{}: ../index.html#gone: no anchor #gone", Path::new("part/page.html").display()),
            format!("{}: missing.html: no such file", Path::new("part/page.html").display()),
        ]
    );
}

#[test]
fn markdown_links_skip_code_blocks() {
    let text = "see [a](x.md#y) and [b](https://e.com)\n```\n[c](no.md)\n```\n![i](img.png)";
    assert_eq!(markdown_links(text), vec!["x.md#y", "https://e.com", "img.png"]);
}
