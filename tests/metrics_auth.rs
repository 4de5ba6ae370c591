//! `--metrics-secure` (the binary's default) against a real kube-apiserver:
//! /metrics over HTTPS only, every request's bearer token reviewed by the API
//! server (401 without a token or with one it rejects, 403 for a
//! ServiceAccount not bound to deploy/'s metrics-reader ClusterRole, 200 with
//! the metrics once bound), the reviews cached (one TokenReview and one
//! SubjectAccessReview for several scrapes, from the audit log), probes
//! still plain HTTP, a certificate from `--metrics-cert-dir` replaced on disk
//! (a Secret volume's symlink swap, and a rewrite in place) served without a
//! restart, and `--metrics-secure=false` serving plain HTTP as before.

#[path = "operator_support.rs"]
mod operator_support;

#[path = "metrics_support.rs"]
mod metrics_support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use control_plane::AuditEvent;
use metrics_support::*;
use operator_support::*;
use serde_json::json;

const OPERATOR_USER: &str = "memcached-operator";

/// The operator's metrics in the OpenMetrics text format (whatever it has
/// counted so far).
fn assert_metrics_text(body: &str) {
    assert!(body.contains("# TYPE wasm_operator_leader gauge\n"), "{body}");
    assert!(body.trim_end().ends_with("# EOF"), "{body}");
}

/// The operator's TokenReviews and SubjectAccessReviews in `events`.
fn reviews(events: &[AuditEvent]) -> (usize, usize) {
    let count = |resource: &str| {
        events
            .iter()
            .filter(|e| e.user == OPERATOR_USER && e.verb == "create" && e.resource.as_deref() == Some(resource))
            .count()
    };
    (count("tokenreviews"), count("subjectaccessreviews"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_metrics_need_a_token_the_api_server_accepts_and_allows() {
    let ns = TestNamespace::new("metrics-auth").await;
    let operator = Operator::start(&ns, &[]);
    let (metrics, scheme, health) = operator.serving().await;
    assert_eq!(scheme, "https", "--metrics-secure is the default");

    // No token, a token the API server does not know: 401, saying nothing more.
    let reply = https_get(&metrics, "/metrics", None).await.expect("an HTTPS answer");
    assert_eq!((reply.status, reply.body.trim()), (401, "Unauthorized"));
    assert!(reply.certificate.is_some(), "a certificate (self-signed) was shown");
    let reply = https_get(&metrics, "/metrics", Some("not-a-token")).await.expect("an HTTPS answer");
    assert_eq!((reply.status, reply.body.trim()), (401, "Unauthorized"));

    // A ServiceAccount's token, not bound to metrics-reader: 403.
    let outsider = service_account_token(&ns.client, &ns.namespace, "outsider").await;
    let reply = https_get(&metrics, "/metrics", Some(&outsider)).await.expect("an HTTPS answer");
    assert_eq!((reply.status, reply.body.trim()), (403, "Forbidden"));

    // Bound to deploy/'s metrics-reader ClusterRole: 200, the metrics.
    let binding = format!("test-{}-scraper", ns.namespace);
    bind_metrics_reader(ns.plane, &binding, &ns.namespace, "scraper").await;
    let scraper = service_account_token(&ns.client, &ns.namespace, "scraper").await;
    eventually("the binding to reach the authorizer", || async {
        may_read_metrics(&ns.client, &ns.namespace, "scraper").await.then_some(())
    })
    .await;
    let reply = https_get(&metrics, "/metrics", Some(&scraper)).await.expect("an HTTPS answer");
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_metrics_text(&reply.body);
    // The review is of the path asked for: metrics-reader grants /metrics only.
    let reply = https_get(&metrics, "/other", Some(&scraper)).await.expect("an HTTPS answer");
    assert_eq!(reply.status, 403, "{}", reply.body);

    // Plain HTTP on the HTTPS port gets no HTTP answer.
    if let Ok(reply) = http_get(&metrics, "/metrics", Some(&scraper)).await {
        assert_eq!(reply.status, 0, "plain HTTP answered on the HTTPS port: {}", reply.body);
    }
    // The probes stay plain HTTP, unauthenticated, on their own port.
    let probe = http_get(&health, "/readyz", None).await.expect("an HTTP answer");
    let alive = http_get(&health, "/healthz", None).await.expect("an HTTP answer");
    assert_eq!((alive.status, alive.body.as_str()), (200, "ok"));
    assert!(matches!(probe.status, 200 | 503), "{probe:?}");
    assert_eq!(http_get(&health, "/metrics", None).await.expect("an HTTP answer").status, 404);

    // Cached: three scrapes with a new ServiceAccount's token cost one
    // TokenReview and one SubjectAccessReview.
    let binding = format!("test-{}-cached", ns.namespace);
    bind_metrics_reader(ns.plane, &binding, &ns.namespace, "cached").await;
    let cached = service_account_token(&ns.client, &ns.namespace, "cached").await;
    eventually("the binding to reach the authorizer", || async {
        may_read_metrics(&ns.client, &ns.namespace, "cached").await.then_some(())
    })
    .await;
    let mark = ns.plane.audit_mark().expect("the audit log");
    for _ in 0..3 {
        let reply = https_get(&metrics, "/metrics", Some(&cached)).await.expect("an HTTPS answer");
        assert_eq!(reply.status, 200, "{}", reply.body);
    }
    ns.plane.audit_sync().await.expect("the audit log");
    let events = ns.plane.audit_events_since(mark).expect("the audit log");
    assert_eq!(reviews(&events), (1, 1), "(TokenReviews, SubjectAccessReviews) for three scrapes");
    // A rejected token is cached too.
    let mark = ns.plane.audit_mark().expect("the audit log");
    for _ in 0..3 {
        assert_eq!(https_get(&metrics, "/metrics", Some("still-not-a-token")).await.expect("HTTPS").status, 401);
    }
    ns.plane.audit_sync().await.expect("the audit log");
    let events = ns.plane.audit_events_since(mark).expect("the audit log");
    assert_eq!(reviews(&events), (1, 0), "(TokenReviews, SubjectAccessReviews) for three refused scrapes");
}

/// A certificate and key, as PEM, and the certificate's fingerprint.
fn new_pair() -> (String, String, String) {
    let generated = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).expect("a certificate");
    (generated.cert.pem(), generated.signing_key.serialize_pem(), fingerprint(generated.cert.der()))
}

/// A Secret volume's layout: `tls.crt -> ..data/tls.crt`, `..data -> ..<version>/`.
fn write_version(dir: &Path, version: &str, cert: &str, key: &str) {
    let folder = dir.join(format!("..{version}"));
    std::fs::create_dir_all(&folder).expect("a version folder");
    std::fs::write(folder.join("tls.crt"), cert).expect("writing tls.crt");
    std::fs::write(folder.join("tls.key"), key).expect("writing tls.key");
    // Swapped atomically, as kubelet does: a new link renamed over ..data.
    let link = dir.join("..data_tmp");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(format!("..{version}"), &link).expect("a symlink");
    std::fs::rename(&link, dir.join("..data")).expect("swapping ..data");
    for file in ["tls.crt", "tls.key"] {
        if std::fs::symlink_metadata(dir.join(file)).is_err() {
            std::os::unix::fs::symlink(format!("..data/{file}"), dir.join(file)).expect("a symlink");
        }
    }
}

async fn served_fingerprint(metrics: &str) -> String {
    let reply = https_get(metrics, "/metrics", None).await.expect("an HTTPS answer");
    assert_eq!(reply.status, 401);
    fingerprint(&reply.certificate.expect("a certificate"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_replaced_on_disk_is_served_without_a_restart() {
    let ns = TestNamespace::new("metrics-cert").await;
    let dir: PathBuf = ns.plane.dir().join(format!("metrics-cert-{}", ns.namespace));
    std::fs::create_dir_all(&dir).expect("a cert dir");
    let (cert, key, first) = new_pair();
    write_version(&dir, "v1", &cert, &key);
    let dir_arg = dir.to_string_lossy().into_owned();
    // A bare --metrics-secure (as the Go operator's flag is written) is true.
    let operator = Operator::start(&ns, &["--metrics-secure", "--metrics-cert-dir", &dir_arg]);
    let (metrics, scheme, _) = operator.serving().await;
    assert_eq!(scheme, "https");
    assert_eq!(served_fingerprint(&metrics).await, first, "the certificate from --metrics-cert-dir");

    // kubelet updating the Secret volume: a new folder, ..data swapped.
    let (cert, key, second) = new_pair();
    write_version(&dir, "v2", &cert, &key);
    assert_ne!(first, second);
    eventually("the swapped certificate to be served", || async {
        (served_fingerprint(&metrics).await == second).then_some(())
    })
    .await;

    // Rewritten in place; a key that does not match first keeps the last good pair.
    let (cert, key, third) = new_pair();
    let (_, other_key, _) = new_pair();
    std::fs::write(dir.join("..v2/tls.key"), &other_key).expect("writing tls.key");
    std::fs::write(dir.join("..v2/tls.crt"), &cert).expect("writing tls.crt");
    assert_eq!(served_fingerprint(&metrics).await, second, "a mismatched pair is not served");
    std::fs::write(dir.join("..v2/tls.key"), &key).expect("writing tls.key");
    eventually("the rewritten certificate to be served", || async {
        (served_fingerprint(&metrics).await == third).then_some(())
    })
    .await;
    // The pair is stored before its log line is written: wait for the line.
    let reloads = || operator.log().iter().filter(|l| l["message"] == json!("metrics certificate reloaded")).count();
    eventually("the second reload to be logged", || async { (reloads() >= 2).then_some(()) }).await;
    assert_eq!(reloads(), 2, "one reload per good change");
    assert!(
        operator
            .log()
            .iter()
            .any(|l| l["message"] == json!("metrics certificate not reloaded; serving the previous one")),
        "the mismatched pair is logged"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_secure_false_serves_plain_http_and_a_bad_cert_dir_stops_the_start() {
    let ns = TestNamespace::new("metrics-plain").await;
    let operator = Operator::start(&ns, &["--metrics-secure=false"]);
    let (metrics, scheme, _) = operator.serving().await;
    assert_eq!(scheme, "http");
    let reply = http_get(&metrics, "/metrics", None).await.expect("an HTTP answer");
    assert_eq!(reply.status, 200, "no token needed: {}", reply.body);
    assert_metrics_text(&reply.body);
    assert!(https_get(&metrics, "/metrics", None).await.is_err(), "no TLS on a plain port");
    drop(operator);

    // --metrics-cert-dir without its files: the operator does not start;
    // nor with plain HTTP, which would not use it.
    let empty = ns.plane.dir().join(format!("metrics-empty-{}", ns.namespace));
    std::fs::create_dir_all(&empty).expect("a folder");
    let empty = empty.to_string_lossy().into_owned();
    for (flags, error) in [
        (&["--metrics-cert-dir", &empty][..], "tls.crt"),
        (
            &["--metrics-secure=false", "--metrics-cert-dir", &empty][..],
            "--metrics-cert-dir needs --metrics-secure=true",
        ),
    ] {
        let mut operator = Operator::start(&ns, flags);
        let status = exit_status(&mut operator).await;
        assert!(!status.success(), "{flags:?}");
        let log = operator.lines.lock().expect("the log").join("\n");
        assert!(log.contains(error), "{flags:?}: the error says {error:?}: {log}");
    }
}

async fn exit_status(operator: &mut Operator) -> std::process::ExitStatus {
    for _ in 0..600 {
        if let Some(status) = operator.child.try_wait().expect("waiting") {
            return status;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the operator did not exit within 60 s");
}
