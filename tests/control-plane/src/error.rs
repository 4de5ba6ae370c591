use std::path::PathBuf;
use std::process::ExitStatus;

/// Everything that can go wrong starting, using or stopping the control plane.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("finding the control plane binaries: {0}")]
    Assets(String),

    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },

    #[error("starting {binary}: {source}")]
    Spawn {
        binary: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error("{process} exited during start-up ({status}); last log lines:\n{log_tail}")]
    Exited { process: &'static str, status: ExitStatus, log_tail: String },

    #[error("timed out after {seconds}s waiting for {what}")]
    Timeout { what: String, seconds: u64 },

    #[error("generating the service-account key")]
    Key,

    #[error("kubeconfig: {0}")]
    Kubeconfig(#[from] kube::config::KubeconfigError),

    #[error("API request: {0}")]
    Kube(#[from] kube::Error),

    #[error("applying {object}: {source}")]
    Apply {
        object: String,
        #[source]
        source: Box<kube::Error>,
    },

    #[error("waiting for {what}: {source}")]
    Wait {
        what: String,
        #[source]
        source: kube::runtime::wait::Error,
    },

    #[error("YAML document {index}: {message}")]
    Manifest { index: usize, message: String },

    #[error("audit log line {line}: {source}")]
    Audit {
        line: usize,
        #[source]
        source: serde_json::Error,
    },

    #[error("the audit log is off (Options::audit_log = false)")]
    NoAuditLog,

    #[error("options: {0}")]
    Options(String),

    #[error("the control plane was stopped")]
    Stopped,
}

impl Error {
    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io { context: context.into(), source }
    }
}
