//! `wasm-operator record`: a running operator's recorded reconciles of one
//! module (`operator/recording/`), fetched from its metrics address's
//! `/records` route, written as a case file for `wasm-operator test`.
//!
//! The route is reviewed as /metrics is (`--metrics-secure`): the request
//! carries a bearer token, the token of `--token-file` or the kubeconfig
//! user's, and the API server must allow that user `get` on the
//! non-resource URL `/records`. Reach the address directly (a
//! `kubectl port-forward` to the operator's metrics port): the API
//! server's service proxy does not pass the user's token on.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::Args;

use crate::cli;
use crate::cli::args::ModuleArgs;

#[derive(Args)]
pub struct RecordArgs {
    /// The module: its name (its manifest name, as /metrics labels it), or
    /// its file, whose manifest names it.
    // Same id and type as the global --module (a file everywhere else): clap
    // then lists this one in record's help and hands the value to both.
    #[arg(long = "module", value_name = "NAME|FILE")]
    pub modules: Vec<PathBuf>,
    /// One parent only: NAMESPACE/NAME.
    #[arg(long, value_name = "NS/NAME")]
    pub parent: Option<String>,
    /// The operator's metrics address (a port-forward to its metrics port).
    #[arg(long, default_value = "https://127.0.0.1:8443", value_name = "URL")]
    pub address: String,
    /// A file holding the bearer token to send (default: the kubeconfig
    /// user's token).
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// Accept any certificate the address shows (the operator's self-signed
    /// one, when it has no --metrics-cert-dir).
    #[arg(long, conflicts_with = "ca_file")]
    pub insecure_skip_tls_verify: bool,
    /// The CA bundle (PEM) that signed the metrics certificate.
    #[arg(long, value_name = "FILE")]
    pub ca_file: Option<PathBuf>,
    /// Where to write the cases (default: stdout).
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
}

pub fn record_command(modules: &ModuleArgs, args: RecordArgs) -> Result<ExitCode> {
    // Given after `record`, the value is this command's own; before it (or
    // in the environment), the global's.
    let given = if args.modules.is_empty() { &modules.modules } else { &args.modules };
    let module = match given.as_slice() {
        [one] => module_name(one, modules.allow_precompiled)?,
        _ => bail!(
            "give the module's name (its manifest name, as /metrics labels it) or its file with one --module NAME|FILE"
        ),
    };
    let mut path = format!("/records?module={module}");
    if let Some(parent) = &args.parent {
        let Some((namespace, name)) = parent.split_once('/').filter(|(ns, n)| !ns.is_empty() && !n.is_empty()) else {
            bail!("--parent {parent:?}: give NAMESPACE/NAME");
        };
        path.push_str(&format!("&namespace={namespace}&name={name}"));
    }
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().context("starting tokio")?;
    let text = runtime.block_on(fetch(&args, &path))?;
    if text.trim().is_empty() {
        let which = args.parent.as_deref().map(|p| format!(" of {p}")).unwrap_or_default();
        bail!("the operator holds no recorded reconciles of module {module}{which}");
    }
    let count = text.split("\n---\n").count();
    match &args.output {
        Some(file) => {
            std::fs::write(file, &text).with_context(|| format!("writing {}", file.display()))?;
            eprintln!("{count} recorded reconcile(s) of {module} written to {}", file.display());
            Ok(ExitCode::SUCCESS)
        }
        None => cli::output::print_out(&text),
    }
}

/// `given` itself, or the manifest name of the module file it names: an
/// author holds the file, and the name the operator records under is in it.
fn module_name(given: &Path, allow_precompiled: bool) -> Result<String> {
    if !given.is_file() {
        return Ok(given.to_string_lossy().into_owned());
    }
    let engine = cli::loading::engine()?;
    let module = crate::runtime::logic_module::LogicModule::from_file(&engine, given, allow_precompiled)
        .with_context(|| format!("--module {}: reading the module's name from the file", given.display()))?;
    Ok(module.name().to_owned())
}

async fn fetch(args: &RecordArgs, path: &str) -> Result<String> {
    let url: http::Uri = args.address.parse().with_context(|| format!("--address {:?}", args.address))?;
    let mut config = kube::Config::new(url);
    config.auth_info = match &args.token_file {
        Some(file) => kube::config::AuthInfo {
            token_file: Some(file.to_string_lossy().into_owned()),
            ..kube::config::AuthInfo::default()
        },
        None => match kube::Config::infer().await {
            Ok(config) => config.auth_info,
            // An operator serving plain HTTP (--metrics-secure=false) asks none.
            Err(error) => {
                tracing::warn!(error = %error, "no --token-file and no kubeconfig: sending no token");
                kube::config::AuthInfo::default()
            }
        },
    };
    config.accept_invalid_certs = args.insecure_skip_tls_verify;
    config.root_cert_file = args.ca_file.clone();
    let client = kube::Client::try_from(config).context("a client for the metrics address")?;
    let request = http::Request::get(path).body(Vec::new()).context("the request")?;
    match client.request_text(request).await {
        Ok(text) => Ok(text),
        Err(kube::Error::Api(status)) => {
            bail!("{} answered {} {}", args.address, status.code, status.message.trim())
        }
        Err(error) => Err(error).with_context(|| format!("GET {}{path}", args.address)),
    }
}
