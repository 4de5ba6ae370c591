//! Toxiproxy between each operator replica and the API server: the server
//! (`scripts/toxiproxy.sh` builds it from its Go module) as a child process,
//! one proxy per replica, and the toxics `make soak` injects through its HTTP
//! API. TLS passes through untouched: the replicas' kubeconfigs name
//! `https://127.0.0.1:<proxy port>`, an address the API server's certificate
//! covers (an IP SAN for 127.0.0.1).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use memcached_e2e::loopback::free_port;
use serde_json::{Value, json};

use crate::SoakError;

/// A network fault on one proxy, as a toxic (or two: both directions).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum NetworkFault {
    /// Every byte delayed by `latency_ms` (± `jitter_ms`), both directions.
    Latency { latency_ms: u32, jitter_ms: u32 },
    /// Every connection reset (RST) as soon as data flows, new ones too.
    Reset,
    /// Nothing gets through either way (a black hole; connections stay open).
    Partition,
}

impl NetworkFault {
    pub fn label(self) -> &'static str {
        match self {
            NetworkFault::Latency { .. } => "latency",
            NetworkFault::Reset => "connection resets",
            NetworkFault::Partition => "partition",
        }
    }

    /// The toxics that make this fault: (name, type, stream, attributes).
    fn toxics(self) -> Vec<(&'static str, &'static str, &'static str, Value)> {
        match self {
            NetworkFault::Latency { latency_ms, jitter_ms } => vec![
                ("latency-down", "latency", "downstream", json!({ "latency": latency_ms, "jitter": jitter_ms })),
                ("latency-up", "latency", "upstream", json!({ "latency": latency_ms, "jitter": jitter_ms })),
            ],
            NetworkFault::Reset => vec![("reset", "reset_peer", "downstream", json!({ "timeout": 0 }))],
            NetworkFault::Partition => vec![
                ("partition-down", "timeout", "downstream", json!({ "timeout": 0 })),
                ("partition-up", "timeout", "upstream", json!({ "timeout": 0 })),
            ],
        }
    }
}

/// The Toxiproxy server; stopped on drop.
pub struct Toxiproxy {
    child: Child,
    api: String,
}

impl Toxiproxy {
    /// Starts `binary` with its API on a free loopback port, logging to `log`.
    pub fn start(binary: &Path, log: &Path) -> Result<Self, SoakError> {
        let port = free_port().map_err(|e| SoakError::io("finding a free port", e))?;
        let file = std::fs::File::create(log).map_err(|e| SoakError::io(format!("creating {}", log.display()), e))?;
        let child = Command::new(binary)
            .args(["-host", "127.0.0.1", "-port", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .map_err(|e| SoakError::io(format!("starting {}", binary.display()), e))?;
        let proxy = Toxiproxy { child, api: format!("127.0.0.1:{port}") };
        let deadline = Instant::now() + Duration::from_secs(30);
        while request(&proxy.api, "GET", "/version", None).is_err() {
            if Instant::now() > deadline {
                return Err(SoakError::Timeout { what: "Toxiproxy's API".into(), seconds: 30 });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(proxy)
    }

    /// A proxy called `name` from a free loopback port to `upstream`
    /// (`127.0.0.1:port`); returns its listen address.
    pub fn add_proxy(&self, name: &str, upstream: &str) -> Result<String, SoakError> {
        let port = free_port().map_err(|e| SoakError::io("finding a free port", e))?;
        let listen = format!("127.0.0.1:{port}");
        let body = json!({ "name": name, "listen": listen, "upstream": upstream, "enabled": true });
        self.call("POST", "/proxies", Some(&body))?;
        Ok(listen)
    }

    /// Starts `fault` on the proxy `name`.
    pub fn inject(&self, name: &str, fault: NetworkFault) -> Result<(), SoakError> {
        for (toxic, kind, stream, attributes) in fault.toxics() {
            let body =
                json!({ "name": toxic, "type": kind, "stream": stream, "toxicity": 1.0, "attributes": attributes });
            self.call("POST", &format!("/proxies/{name}/toxics"), Some(&body))?;
        }
        Ok(())
    }

    /// Ends `fault` on the proxy `name`.
    pub fn heal(&self, name: &str, fault: NetworkFault) -> Result<(), SoakError> {
        for (toxic, ..) in fault.toxics() {
            self.call("DELETE", &format!("/proxies/{name}/toxics/{toxic}"), None)?;
        }
        Ok(())
    }

    /// Removes every toxic of every proxy (Toxiproxy's `/reset`).
    pub fn heal_all(&self) -> Result<(), SoakError> {
        self.call("POST", "/reset", None).map(|_| ())
    }

    fn call(&self, method: &str, path: &str, body: Option<&Value>) -> Result<String, SoakError> {
        let (status, text) = request(&self.api, method, path, body)
            .map_err(|e| SoakError::io(format!("Toxiproxy {method} {path}"), e))?;
        if (200..300).contains(&status) {
            Ok(text)
        } else {
            Err(SoakError::Toxiproxy(format!("{method} {path}: HTTP {status}: {}", text.trim())))
        }
    }
}

impl Drop for Toxiproxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One HTTP/1.1 request with `Connection: close`: the status and the body.
fn request(address: &str, method: &str, path: &str, body: Option<&Value>) -> std::io::Result<(u16, String)> {
    let socket = address.parse().map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    let mut stream = TcpStream::connect_timeout(&socket, Duration::from_secs(2))?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let body = body.map(Value::to_string).unwrap_or_default();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes())?;
    stream.write_all(body.as_bytes())?;
    let mut text = String::new();
    stream.read_to_string(&mut text)?;
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((text.as_str(), ""));
    let status = head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    Ok((status, body.to_owned()))
}

/// The Toxiproxy binary from `scripts/toxiproxy.sh` (cached after the first
/// build; TOXIPROXY_BINARY skips the build).
pub fn binary(root: &Path) -> Result<PathBuf, SoakError> {
    let script = root.join("scripts/toxiproxy.sh");
    let output = Command::new("bash")
        .arg(&script)
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| SoakError::io(format!("running {}", script.display()), e))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    match stdout.lines().last() {
        Some(path) if output.status.success() => Ok(PathBuf::from(path.trim())),
        _ => Err(SoakError::Toxiproxy(format!("{} failed ({})", script.display(), output.status))),
    }
}

/// `kubeconfig` with its server replaced by `https://<listen>`.
pub fn proxied_kubeconfig(kubeconfig: &Path, listen: &str, out: &Path) -> Result<(), SoakError> {
    let text = std::fs::read_to_string(kubeconfig)
        .map_err(|e| SoakError::io(format!("reading {}", kubeconfig.display()), e))?;
    let mut config: Value =
        serde_norway::from_str(&text).map_err(|e| SoakError::Setup(format!("{}: {e}", kubeconfig.display())))?;
    let clusters = config
        .get_mut("clusters")
        .and_then(Value::as_array_mut)
        .ok_or_else(|| SoakError::Setup(format!("{} has no clusters", kubeconfig.display())))?;
    for cluster in clusters {
        if let Some(server) = cluster.pointer_mut("/cluster/server") {
            *server = Value::String(format!("https://{listen}"));
        }
    }
    let text = serde_norway::to_string(&config).map_err(|e| SoakError::Setup(format!("a kubeconfig: {e}")))?;
    std::fs::write(out, text).map_err(|e| SoakError::io(format!("writing {}", out.display()), e))
}
