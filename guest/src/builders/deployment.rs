//! The Deployment: memcached, and the exporter sidecar when monitoring is on.
//!
//! Mutate-in-place: fields the API server fills in (probe thresholds,
//! terminationMessagePath, imagePullPolicy, secret defaultMode, the revision
//! annotation, status) are kept, so building from the server's answer again
//! changes nothing.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentStrategy, RollingUpdateDeployment};
use k8s_openapi::api::core::v1::{
    Affinity, Container, ContainerPort, ExecAction, KeyToPath, Lifecycle, LifecycleHandler, PodAffinityTerm,
    PodAntiAffinity, PodSpec, Probe, Secret, SecretVolumeSource, TCPSocketAction, TopologySpreadConstraint, Volume,
    VolumeMount, WeightedPodAffinityTerm,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::labels::{VERSION_KEY, labels_for_memcached, version_label};
use super::metadata::{keep_if_server_default, set_identity};
use super::ports::{self, NamedPort};
use super::resources::container_resources;
use super::secret_hash::secret_hash;
use crate::api::{AntiAffinityPreset, Memcached, MemcachedSpec};

pub const MEMCACHED_CONTAINER: &str = "memcached";
pub const EXPORTER_CONTAINER: &str = "exporter";
pub const SASL_VOLUME: &str = "sasl-credentials";
pub const SASL_MOUNT_PATH: &str = "/etc/memcached/sasl";
pub const SASL_PASSWORD_FILE: &str = "password-file";
pub const TLS_VOLUME: &str = "tls-certificates";
pub const TLS_MOUNT_PATH: &str = "/etc/memcached/tls";
pub const SECRET_HASH_ANNOTATION: &str = "memcached.c5c3.io/secret-hash";
pub const RESTART_TRIGGER_ANNOTATION: &str = "memcached.c5c3.io/restart-trigger";
const HOSTNAME_TOPOLOGY_KEY: &str = "kubernetes.io/hostname";
/// What the API server defaults terminationGracePeriodSeconds to.
const SERVER_DEFAULT_GRACE_PERIOD: i64 = 30;

/// Sets every field of `deployment` the operator owns. `secrets` are the
/// referenced Secrets that exist (for the secret hash).
pub fn construct_deployment(memcached: &Memcached, deployment: &mut Deployment, secrets: &[Secret]) {
    let spec = &memcached.spec;
    let name = memcached.metadata.name.as_deref().unwrap_or_default();
    let labels = deployment_labels(name, spec);

    set_identity(&mut deployment.metadata, memcached);
    deployment.metadata.labels = Some(labels.clone());

    let deployment_spec = &mut deployment.spec;
    // Under autoscaling the HPA owns replicas: keep whatever it set.
    if let Some(replicas) = spec.effective_replicas() {
        deployment_spec.replicas = Some(replicas);
    }
    deployment_spec.selector =
        LabelSelector { match_labels: Some(labels_for_memcached(name)), match_expressions: None };
    deployment_spec.strategy = Some(DeploymentStrategy {
        type_: Some("RollingUpdate".into()),
        rolling_update: Some(RollingUpdateDeployment {
            max_surge: Some(IntOrString::Int(1)),
            max_unavailable: Some(IntOrString::Int(0)),
        }),
    });

    let template = &mut deployment_spec.template;
    let template_meta = template.metadata.get_or_insert_with(ObjectMeta::default);
    template_meta.labels = Some(labels);
    set_template_annotations(template_meta, memcached, secrets);
    build_pod(template.spec.get_or_insert_with(PodSpec::default), name, spec);
}

/// Standard labels plus the image tag as `app.kubernetes.io/version`.
fn deployment_labels(name: &str, spec: &MemcachedSpec) -> BTreeMap<String, String> {
    let mut labels = labels_for_memcached(name);
    if let Some(version) = version_label(spec.effective_image()) {
        labels.insert(VERSION_KEY.into(), version);
    }
    labels
}

/// Owns two annotation keys and leaves every other (such as
/// `kubectl.kubernetes.io/restartedAt`) alone.
fn set_template_annotations(meta: &mut ObjectMeta, memcached: &Memcached, secrets: &[Secret]) {
    let mut annotations = meta.annotations.take().unwrap_or_default();
    let owned = [
        (SECRET_HASH_ANNOTATION, secret_hash(&memcached.spec, secrets)),
        (
            RESTART_TRIGGER_ANNOTATION,
            memcached.metadata.annotations.as_ref().and_then(|a| a.get(RESTART_TRIGGER_ANNOTATION)).cloned(),
        ),
    ];
    for (key, value) in owned {
        match value {
            Some(value) => annotations.insert(key.to_owned(), value),
            None => annotations.remove(key),
        };
    }
    meta.annotations = (!annotations.is_empty()).then_some(annotations);
}

fn build_pod(pod: &mut PodSpec, name: &str, spec: &MemcachedSpec) {
    let mut current = std::mem::take(&mut pod.containers);
    let mut take_current = |container: &str| {
        current.iter().position(|c| c.name == container).map(|i| current.swap_remove(i)).unwrap_or_default()
    };
    let mut containers = vec![memcached_container(take_current(MEMCACHED_CONTAINER), spec)];
    if spec.monitoring_enabled() {
        containers.push(exporter_container(take_current(EXPORTER_CONTAINER), spec));
    }
    pod.containers = containers;
    // Never server-filled, so anything here is drift: the CR has no say in it.
    pod.init_containers = None;
    pod.node_selector = None;
    pod.volumes = volumes(pod.volumes.as_deref().unwrap_or_default(), spec);
    pod.affinity = spec.anti_affinity_preset().map(|preset| anti_affinity(name, preset));
    pod.topology_spread_constraints = topology_spread_constraints(spec);
    pod.security_context = match spec.security.as_ref().and_then(|s| s.pod_security_context.as_ref()) {
        Some(context) => Some(context.clone()),
        None => keep_if_server_default(pod.security_context.take(), |c| *c == Default::default()),
    };
    pod.termination_grace_period_seconds = match spec.graceful_shutdown() {
        Some((_, grace)) => Some(grace),
        None => keep_if_server_default(pod.termination_grace_period_seconds, |&g| g == SERVER_DEFAULT_GRACE_PERIOD),
    };
}

fn memcached_container(mut container: Container, spec: &MemcachedSpec) -> Container {
    container.name = MEMCACHED_CONTAINER.into();
    container.image = Some(spec.effective_image().into());
    container.command = None;
    container.env = None;
    container.env_from = None;
    container.working_dir = None;
    container.args = Some(memcached_args(spec));
    container.ports = Some(container_ports(&ports::memcached_ports(spec)));
    container.liveness_probe = Some(tcp_probe(container.liveness_probe.take(), 10, 10));
    container.readiness_probe = Some(tcp_probe(container.readiness_probe.take(), 5, 5));
    container.resources = container_resources(spec.resources.as_ref(), container.resources.take());
    container.security_context = container_security_context(spec);
    container.volume_mounts = volume_mounts(spec);
    container.lifecycle = spec.graceful_shutdown().map(|(delay, _)| Lifecycle {
        pre_stop: Some(LifecycleHandler {
            exec: Some(ExecAction { command: Some(vec!["sleep".into(), delay.to_string()]) }),
            ..Default::default()
        }),
        ..Default::default()
    });
    container
}

fn exporter_container(mut container: Container, spec: &MemcachedSpec) -> Container {
    let monitoring = spec.monitoring.as_ref();
    container.name = EXPORTER_CONTAINER.into();
    container.image = Some(spec.exporter_image().into());
    container.command = None;
    container.args = None;
    container.env = None;
    container.env_from = None;
    container.ports = Some(container_ports(&[ports::METRICS]));
    container.resources =
        container_resources(monitoring.and_then(|m| m.exporter_resources.as_ref()), container.resources.take());
    container.security_context = container_security_context(spec);
    container
}

/// `-m -c -t -I`, verbosity, SASL, TLS, then the user's extra flags.
pub fn memcached_args(spec: &MemcachedSpec) -> Vec<String> {
    let config = spec.config();
    let mut args: Vec<String> = vec![
        "-m".into(),
        config.max_memory_mb().to_string(),
        "-c".into(),
        config.max_connections().to_string(),
        "-t".into(),
        config.threads().to_string(),
        "-I".into(),
        config.max_item_size().into(),
    ];
    match config.verbosity() {
        1 => args.push("-v".into()),
        2 => args.push("-vv".into()),
        _ => {}
    }
    if spec.sasl_enabled() {
        args.extend(["-Y".into(), format!("{SASL_MOUNT_PATH}/{SASL_PASSWORD_FILE}")]);
    }
    if spec.tls_enabled() {
        args.extend([
            "-Z".into(),
            "-o".into(),
            format!("ssl_chain_cert={TLS_MOUNT_PATH}/tls.crt"),
            "-o".into(),
            format!("ssl_key={TLS_MOUNT_PATH}/tls.key"),
        ]);
        if spec.client_cert_enabled() {
            args.extend(["-o".into(), format!("ssl_ca_cert={TLS_MOUNT_PATH}/ca.crt")]);
        }
    }
    args.extend(config.extra_args().iter().cloned());
    args
}

fn container_ports(ports: &[NamedPort]) -> Vec<ContainerPort> {
    ports
        .iter()
        .map(|p| ContainerPort {
            name: Some(p.name.into()),
            container_port: p.port,
            protocol: Some("TCP".into()),
            ..Default::default()
        })
        .collect()
}

/// A TCP probe on the `memcached` port; thresholds and timeouts the server
/// defaulted are kept.
fn tcp_probe(current: Option<Probe>, initial_delay_seconds: i32, period_seconds: i32) -> Probe {
    Probe {
        tcp_socket: Some(TCPSocketAction { port: IntOrString::String(ports::MEMCACHED.name.into()), host: None }),
        exec: None,
        http_get: None,
        grpc: None,
        initial_delay_seconds: Some(initial_delay_seconds),
        period_seconds: Some(period_seconds),
        ..current.unwrap_or_default()
    }
}

fn container_security_context(spec: &MemcachedSpec) -> Option<k8s_openapi::api::core::v1::SecurityContext> {
    spec.security.as_ref().and_then(|s| s.container_security_context.clone())
}

/// A Secret the memcached container mounts read-only.
struct SecretMount<'a> {
    volume: &'static str,
    secret: &'a str,
    keys: Vec<&'static str>,
    path: &'static str,
}

/// The one list both the volumes and the mounts come from.
fn secret_mounts(spec: &MemcachedSpec) -> Vec<SecretMount<'_>> {
    let mut mounts = Vec::new();
    if let Some(secret) = spec.sasl_secret_name() {
        mounts.push(SecretMount { volume: SASL_VOLUME, secret, keys: vec![SASL_PASSWORD_FILE], path: SASL_MOUNT_PATH });
    }
    if let Some(secret) = spec.tls_secret_name() {
        let mut keys = vec!["tls.crt", "tls.key"];
        if spec.client_cert_enabled() {
            keys.push("ca.crt");
        }
        mounts.push(SecretMount { volume: TLS_VOLUME, secret, keys, path: TLS_MOUNT_PATH });
    }
    mounts
}

/// The Secret volumes; a current volume of the same name keeps the
/// defaultMode the server gave it.
fn volumes(current: &[Volume], spec: &MemcachedSpec) -> Option<Vec<Volume>> {
    let volumes: Vec<Volume> = secret_mounts(spec)
        .into_iter()
        .map(|mount| {
            let default_mode = current
                .iter()
                .find(|v| v.name == mount.volume)
                .and_then(|v| v.secret.as_ref())
                .and_then(|s| s.default_mode);
            Volume {
                name: mount.volume.into(),
                secret: Some(SecretVolumeSource {
                    secret_name: Some(mount.secret.into()),
                    items: Some(
                        mount
                            .keys
                            .into_iter()
                            .map(|key| KeyToPath { key: key.into(), path: key.into(), ..Default::default() })
                            .collect(),
                    ),
                    default_mode,
                    ..Default::default()
                }),
                ..Default::default()
            }
        })
        .collect();
    (!volumes.is_empty()).then_some(volumes)
}

fn volume_mounts(spec: &MemcachedSpec) -> Option<Vec<VolumeMount>> {
    let mounts: Vec<VolumeMount> = secret_mounts(spec)
        .into_iter()
        .map(|mount| VolumeMount {
            name: mount.volume.into(),
            mount_path: mount.path.into(),
            read_only: Some(true),
            ..Default::default()
        })
        .collect();
    (!mounts.is_empty()).then_some(mounts)
}

/// Spread this CR's pods across nodes: preferred (weight 100) or required.
fn anti_affinity(name: &str, preset: AntiAffinityPreset) -> Affinity {
    let selector = LabelSelector {
        match_labels: Some(BTreeMap::from([
            (super::labels::NAME_KEY.to_owned(), super::labels::APP_NAME.to_owned()),
            (super::labels::INSTANCE_KEY.to_owned(), name.to_owned()),
        ])),
        match_expressions: None,
    };
    let term = PodAffinityTerm {
        label_selector: Some(selector),
        topology_key: HOSTNAME_TOPOLOGY_KEY.into(),
        ..Default::default()
    };
    let pod_anti_affinity = match preset {
        AntiAffinityPreset::Soft => PodAntiAffinity {
            preferred_during_scheduling_ignored_during_execution: Some(vec![WeightedPodAffinityTerm {
                weight: 100,
                pod_affinity_term: term,
            }]),
            ..Default::default()
        },
        AntiAffinityPreset::Hard => PodAntiAffinity {
            required_during_scheduling_ignored_during_execution: Some(vec![term]),
            ..Default::default()
        },
    };
    Affinity { pod_anti_affinity: Some(pod_anti_affinity), ..Default::default() }
}

/// The CR's constraints as written, as the Go operator passes them: adding
/// a labelSelector to one without would change the pod template, and
/// switching between the operators would then roll every pod.
fn topology_spread_constraints(spec: &MemcachedSpec) -> Option<Vec<TopologySpreadConstraint>> {
    let constraints = spec.high_availability.as_ref()?.topology_spread_constraints.as_ref()?;
    (!constraints.is_empty()).then(|| constraints.clone())
}
