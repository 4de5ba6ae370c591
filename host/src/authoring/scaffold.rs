//! `wasm-operator new`: a module project from the templates and the SDK
//! this binary carries (`host/build.rs` embeds them), so it builds outside
//! this repo with nothing but the language's own tools.

use std::path::{Path, PathBuf};

mod embedded {
    include!(concat!(env!("OUT_DIR"), "/embedded.rs"));
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Language {
    Rust,
    Typescript,
    Python,
}

impl Language {
    fn name(self) -> &'static str {
        match self {
            Language::Rust => "rust",
            Language::Typescript => "typescript",
            Language::Python => "python",
        }
    }
}

/// The project to write: its language, and the values that fill the
/// templates' placeholders (`{{name}}`, `{{group}}`, `{{kind}}`, ...).
#[derive(Clone, Debug)]
pub struct Scaffold {
    pub name: String,
    pub language: Language,
    pub group: String,
    pub version: String,
    pub kind: String,
    pub plural: String,
}

#[derive(Debug, thiserror::Error)]
pub enum ScaffoldError {
    #[error("{field} {value:?}: {rule}")]
    Invalid { field: &'static str, value: String, rule: &'static str },
    #[error("{0} exists and is not empty: choose another --dir or remove it")]
    NotEmpty(PathBuf),
    #[error("writing {path}: {error}")]
    Write { path: PathBuf, error: std::io::Error },
}

fn check(field: &'static str, value: &str, ok: bool, rule: &'static str) -> Result<(), ScaffoldError> {
    if ok { Ok(()) } else { Err(ScaffoldError::Invalid { field, value: value.to_owned(), rule }) }
}

fn dns_label(text: &str) -> bool {
    !text.is_empty()
        && text.len() <= 63
        && text.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && text.starts_with(|c: char| c.is_ascii_lowercase())
        && !text.ends_with('-')
}

impl Scaffold {
    /// Checks every field as the API server (and the languages' package
    /// names) would.
    pub fn validate(&self) -> Result<(), ScaffoldError> {
        check(
            "NAME",
            &self.name,
            dns_label(&self.name),
            "must be a lowercase name (a-z, 0-9, -), starting with a letter",
        )?;
        let group_ok = self.group.contains('.') && self.group.split('.').all(dns_label);
        check("--group", &self.group, group_ok, "must be a DNS subdomain with a dot, such as sites.example.com")?;
        let kind_ok = self.kind.starts_with(|c: char| c.is_ascii_uppercase())
            && self.kind.chars().all(|c| c.is_ascii_alphanumeric());
        check("--kind", &self.kind, kind_ok, "must be UpperCamelCase letters and digits, such as StaticSite")?;
        let version_ok = self.version.starts_with('v')
            && self.version[1..].starts_with(|c: char| c.is_ascii_digit())
            && self.version.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
        check("--version", &self.version, version_ok, "must be a Kubernetes API version, such as v1 or v1alpha1")?;
        check("--plural", &self.plural, dns_label(&self.plural), "must be a lowercase name")?;
        Ok(())
    }

    fn fill(&self, text: &str) -> String {
        text.replace("{{name}}", &self.name)
            .replace("{{crate}}", &self.name.replace('-', "_"))
            .replace("{{group}}", &self.group)
            .replace("{{version}}", &self.version)
            .replace("{{kind}}", &self.kind)
            .replace("{{kind_lower}}", &self.kind.to_lowercase())
            .replace("{{plural}}", &self.plural)
    }

    /// Every file of the project: (path in it, contents).
    pub fn files(&self) -> Vec<(String, String)> {
        let language = self.language.name();
        let template = format!("template/{language}");
        let sdk = format!("sdk/{language}");
        let mut files = Vec::new();
        for (set, path, text) in embedded::FILES {
            if *set == template {
                let path = self.fill(path.strip_suffix(".tmpl").unwrap_or(path));
                files.push((path, self.fill(text)));
            } else if *set == sdk {
                files.push((format!("vendor/wasm-operator-sdk/{path}"), (*text).to_owned()));
            } else if *set == "wit" {
                // The contract: the Rust SDK reads it from its own folder,
                // componentize-js and componentize-py from the project's.
                let place = if self.language == Language::Rust { "vendor/wasm-operator-sdk/wit" } else { "wit" };
                files.push((format!("{place}/{path}"), (*text).to_owned()));
            }
        }
        files
    }

    /// Writes the project into `dir`, which must not exist or be empty.
    pub fn write(&self, dir: &Path) -> Result<Vec<PathBuf>, ScaffoldError> {
        self.validate()?;
        if std::fs::read_dir(dir).is_ok_and(|mut entries| entries.next().is_some()) {
            return Err(ScaffoldError::NotEmpty(dir.to_owned()));
        }
        let mut written = Vec::new();
        for (path, text) in self.files() {
            let target = dir.join(&path);
            let write = |error| ScaffoldError::Write { path: target.clone(), error };
            if let Some(parent) = target.parent() {
                std::fs::create_dir_all(parent).map_err(write)?;
            }
            std::fs::write(&target, text).map_err(write)?;
            written.push(PathBuf::from(path));
        }
        Ok(written)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every placeholder in the project's own files (not the vendored SDK,
    /// which has none to fill) was replaced, in paths and contents.
    fn assert_filled(files: &[(String, String)]) {
        let left: Vec<&str> = files
            .iter()
            .filter(|(path, text)| !path.starts_with("vendor/") && (path.contains("{{") || text.contains("{{")))
            .map(|(path, _)| path.as_str())
            .collect();
        assert!(left.is_empty(), "placeholders left in {left:?}");
    }

    fn scaffold(language: Language) -> Scaffold {
        Scaffold {
            name: "static-site".into(),
            language,
            group: "sites.example.com".into(),
            version: "v1".into(),
            kind: "StaticSite".into(),
            plural: "staticsites".into(),
        }
    }

    #[test]
    fn bad_fields_are_named() {
        let cases = [
            (Scaffold { name: "Static".into(), ..scaffold(Language::Rust) }, "NAME"),
            (Scaffold { group: "example".into(), ..scaffold(Language::Rust) }, "--group"),
            (Scaffold { kind: "static-site".into(), ..scaffold(Language::Rust) }, "--kind"),
            (Scaffold { version: "1".into(), ..scaffold(Language::Rust) }, "--version"),
        ];
        for (bad, field) in cases {
            let error = bad.validate().expect_err(field).to_string();
            assert!(error.starts_with(field), "{error}");
        }
        assert!(scaffold(Language::Python).validate().is_ok());
    }

    #[test]
    fn a_rust_project_vendors_the_sdk_and_the_contract_and_fills_placeholders() {
        let files = scaffold(Language::Rust).files();
        let paths: Vec<&str> = files.iter().map(|(p, _)| p.as_str()).collect();
        for wanted in [
            "Cargo.toml",
            "src/lib.rs",
            "vendor/wasm-operator-sdk/src/lib.rs",
            "vendor/wasm-operator-sdk/wit/controller.wit",
        ] {
            assert!(paths.contains(&wanted), "{wanted} in {paths:?}");
        }
        assert_filled(&files);
        let lib = &files.iter().find(|(p, _)| p == "src/lib.rs").expect("src/lib.rs").1;
        assert!(lib.contains("StaticSite") && lib.contains("sites.example.com"), "{lib}");
    }

    #[test]
    fn a_typescript_project_vendors_the_sdk_and_the_contract_and_fills_placeholders() {
        let files = scaffold(Language::Typescript).files();
        let text = |path: &str| &files.iter().find(|(p, _)| p == path).unwrap_or_else(|| panic!("{path}")).1;
        for wanted in [
            "Makefile",
            "package.json",
            "package-lock.json",
            "samples/staticsite.yaml",
            "cases/invalid.yaml",
            "vendor/wasm-operator-sdk/src/index.ts",
            "vendor/wasm-operator-sdk/package.json",
            "wit/controller.wit",
        ] {
            text(wanted);
        }
        assert_filled(&files);
        assert!(!files.iter().any(|(p, _)| p.ends_with(".tmpl") || p.contains("node_modules")));
        // npm ci needs the lockfile's name to be the package's.
        for file in ["package.json", "package-lock.json"] {
            assert!(text(file).contains(r#""name": "static-site""#), "{file}");
        }
        assert!(text("src/logic.ts").contains("interface StaticSite"));
        // The world with `writes`, made of the definition by the SDK's writesOf.
        assert!(text("Makefile").contains("--world-name logic-module-reach") && text("Makefile").contains("writesOf"));
        assert!(text("vendor/wasm-operator-sdk/src/module.ts").contains("export function writesOf"));
        assert!(text("crd.yaml").contains("name: staticsites.sites.example.com"));
    }

    #[test]
    fn a_python_project_vendors_the_sdk_without_its_tests_and_fills_placeholders() {
        let files = scaffold(Language::Python).files();
        let paths: Vec<&str> = files.iter().map(|(p, _)| p.as_str()).collect();
        for wanted in [
            "Makefile",
            "pyproject.toml",
            ".gitignore",
            "requirements.txt",
            "src/app.py",
            "src/crd.yaml",
            "samples/staticsite.yaml",
            "cases/invalid.yaml",
            "tests/test_app.py",
            "vendor/wasm-operator-sdk/pyproject.toml",
            "vendor/wasm-operator-sdk/src/wasm_operator_sdk/__init__.py",
            "vendor/wasm-operator-sdk/src/wasm_operator_sdk/py.typed",
            "wit/controller.wit",
        ] {
            assert!(paths.contains(&wanted), "{wanted} in {paths:?}");
        }
        assert!(
            !paths.iter().any(|p| p.ends_with(".tmpl") || p.starts_with("vendor/wasm-operator-sdk/tests")),
            "{paths:?}"
        );
        assert_filled(&files);
        let app = &files.iter().find(|(p, _)| p == "src/app.py").expect("src/app.py").1;
        assert!(app.contains(r#"Kind("sites.example.com", "v1", "StaticSite", "staticsites")"#), "{app}");
        let makefile = &files.iter().find(|(p, _)| p == "Makefile").expect("Makefile").1;
        assert!(makefile.contains("WASM_OPERATOR ?= wasm-operator") && makefile.contains("target/static-site.wasm"));
        // The world with `writes`, from the SDK's entry (which the SDK vendors).
        assert!(
            makefile.contains("-w logic-module-reach") && makefile.contains("componentize wasm_operator_sdk.entry")
        );
        assert!(paths.contains(&"vendor/wasm-operator-sdk/src/wasm_operator_sdk/entry.py"), "{paths:?}");
    }
}
