//! Validation: the schema's ranges and SPEC's cross-field rules, each problem
//! reported with its field path. The CRD enforces the same rules on the API
//! server (OpenAPI ranges and CEL); this gives the same answers off-cluster.

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::{AntiAffinityPreset, AntiAffinityType, AutoscalingSpec, HighAvailabilitySpec, Memcached, MemcachedSpec};
use crate::error::FieldError;
use crate::quantity;

/// Every problem with `memcached`; empty when it is valid.
pub fn validate(memcached: &Memcached) -> Vec<FieldError> {
    let mut problems = Problems::default();
    validate_metadata(memcached, &mut problems);
    let spec = &memcached.spec;
    validate_ranges(spec, &mut problems);
    validate_memory_limit(spec, &mut problems);
    if let Some(ha) = &spec.high_availability {
        validate_high_availability(spec, ha, &mut problems);
    }
    validate_security(spec, &mut problems);
    if let Some(autoscaling) = spec.autoscaling() {
        validate_autoscaling(spec, autoscaling, &mut problems);
    }
    problems.0
}

#[derive(Default)]
struct Problems(Vec<FieldError>);

impl Problems {
    fn add(&mut self, path: &str, message: impl Into<String>) {
        self.0.push(FieldError::new(path, message));
    }

    fn range<T: PartialOrd + std::fmt::Display + Copy>(&mut self, path: &str, value: Option<T>, min: T, max: T) {
        if let Some(value) = value
            && (value < min || value > max)
        {
            self.add(path, format!("must be between {min} and {max}, got {value}"));
        }
    }

    fn image(&mut self, path: &str, image: Option<&str>) {
        let Some(image) = image else { return };
        if image.is_empty() {
            self.add(path, "must not be empty");
        } else if image.len() > 1024 {
            self.add(path, format!("must be at most 1024 characters, got {}", image.len()));
        } else if image.chars().any(|c| c.is_whitespace() || c.is_control()) {
            self.add(path, "must not contain whitespace");
        }
    }
}

fn validate_metadata(memcached: &Memcached, problems: &mut Problems) {
    match memcached.metadata.name.as_deref() {
        None | Some("") => problems.add("metadata.name", "is required"),
        Some(name) => {
            if let Err(why) = check_dns1035_label(name) {
                problems.add("metadata.name", format!("{why} (it names the Service)"));
            }
        }
    }
    if let Some(namespace) = memcached.metadata.namespace.as_deref()
        && let Err(why) = check_dns1123_label(namespace)
    {
        problems.add("metadata.namespace", why);
    }
}

fn validate_ranges(spec: &MemcachedSpec, problems: &mut Problems) {
    problems.range("spec.replicas", spec.replicas, 0, 64);
    problems.image("spec.image", spec.image.as_deref());
    if let Some(config) = &spec.memcached {
        problems.range("spec.memcached.maxMemoryMB", config.max_memory_mb, 16, 65536);
        problems.range("spec.memcached.maxConnections", config.max_connections, 1, 65536);
        problems.range("spec.memcached.threads", config.threads, 1, 128);
        problems.range("spec.memcached.verbosity", config.verbosity, 0, 2);
        if let Some(size) = config.max_item_size.as_deref()
            && !is_item_size(size)
        {
            problems.add(
                "spec.memcached.maxItemSize",
                format!("must be a number followed by k or m, such as 1m, got {size:?}"),
            );
        }
        if let Some(args) = &config.extra_args {
            if args.len() > 64 {
                problems.add("spec.memcached.extraArgs", "must have at most 64 items");
            }
            for (i, arg) in args.iter().enumerate() {
                if arg.len() > 1024 {
                    problems.add(&format!("spec.memcached.extraArgs[{i}]"), "must be at most 1024 characters");
                }
            }
        }
    }
    if let Some(monitoring) = &spec.monitoring {
        problems.image("spec.monitoring.exporterImage", monitoring.exporter_image.as_deref());
        if let Some(sm) = &monitoring.service_monitor {
            for (path, value) in [
                ("spec.monitoring.serviceMonitor.interval", &sm.interval),
                ("spec.monitoring.serviceMonitor.scrapeTimeout", &sm.scrape_timeout),
            ] {
                if let Some(value) = value.as_deref().filter(|v| !is_duration(v)) {
                    problems.add(path, format!("must be a duration such as 30s or 1m30s, got {value:?}"));
                }
            }
            for (key, value) in sm.additional_labels.iter().flatten() {
                let path = format!("spec.monitoring.serviceMonitor.additionalLabels[{key}]");
                if let Err(why) = check_label_key(key).and_then(|()| check_label_value(value)) {
                    problems.add(&path, why);
                }
            }
        }
    }
    let spread = spec.high_availability.as_ref().and_then(|ha| ha.topology_spread_constraints.as_ref());
    if spread.is_some_and(|c| c.len() > 16) {
        problems.add("spec.highAvailability.topologySpreadConstraints", "must have at most 16 items");
    }
    // The schema's bounds hold whether or not autoscaling is enabled.
    if let Some(autoscaling) = &spec.autoscaling {
        problems.range("spec.autoscaling.minReplicas", autoscaling.min_replicas, 1, 1024);
        problems.range("spec.autoscaling.maxReplicas", autoscaling.max_replicas, 1, 1024);
        if autoscaling.metrics.as_ref().is_some_and(|m| m.len() > 16) {
            problems.add("spec.autoscaling.metrics", "must have at most 16 items");
        }
    }
    if let Some(service) = &spec.service {
        for key in service.annotations.iter().flatten().map(|(k, _)| k) {
            if let Err(why) = check_label_key(key) {
                problems.add(&format!("spec.service.annotations[{key}]"), why);
            }
        }
    }
}

fn validate_memory_limit(spec: &MemcachedSpec, problems: &mut Problems) {
    let Some(limit) = spec.resources.as_ref().and_then(|r| r.limits.as_ref()).and_then(|l| l.get("memory")) else {
        return;
    };
    let path = "spec.resources.limits.memory";
    let Quantity(text) = limit;
    match quantity::parse_nanos(text) {
        Err(why) => problems.add(path, why),
        Ok(nanobytes) => {
            let needed_mib = i64::from(spec.config().max_memory_mb()) + 32;
            if nanobytes < i128::from(needed_mib) * 1024 * 1024 * 1_000_000_000 {
                problems.add(
                    path,
                    format!(
                        "must be at least {needed_mib}Mi (memcached.maxMemoryMB {} + 32Mi overhead), got {text}",
                        spec.config().max_memory_mb()
                    ),
                );
            }
        }
    }
}

fn validate_high_availability(spec: &MemcachedSpec, ha: &HighAvailabilitySpec, problems: &mut Problems) {
    if let (Some(preset), Some(kind)) = (ha.anti_affinity_preset, ha.anti_affinity.as_ref().and_then(|a| a.type_)) {
        let agree = matches!(
            (preset, kind),
            (AntiAffinityPreset::Soft, AntiAffinityType::Preferred)
                | (AntiAffinityPreset::Hard, AntiAffinityType::Required)
        );
        if !agree {
            problems.add(
                "spec.highAvailability.antiAffinity.type",
                "disagrees with spec.highAvailability.antiAffinityPreset (soft = preferred, hard = required)",
            );
        }
    }
    if let Some(pdb) = ha.pod_disruption_budget.as_ref().filter(|p| p.enabled) {
        let base = "spec.highAvailability.podDisruptionBudget";
        if pdb.min_available.is_some() && pdb.max_unavailable.is_some() {
            problems.add(&format!("{base}.maxUnavailable"), "minAvailable and maxUnavailable are mutually exclusive");
        }
        for (field, value) in [("minAvailable", &pdb.min_available), ("maxUnavailable", &pdb.max_unavailable)] {
            match value {
                Some(IntOrString::Int(n)) if *n < 0 => {
                    problems.add(&format!("{base}.{field}"), "must not be negative");
                }
                Some(IntOrString::String(s)) if !is_percent(s) => {
                    problems.add(
                        &format!("{base}.{field}"),
                        format!("must be an integer or a percentage such as 50%, got {s:?}"),
                    );
                }
                _ => {}
            }
        }
        if let Some(IntOrString::Int(min)) = pdb.min_available {
            let replicas = match spec.autoscaling() {
                Some(a) => a.effective_min_replicas(),
                None => spec.replicas.unwrap_or(super::defaults::REPLICAS),
            };
            if min >= replicas {
                problems.add(
                    &format!("{base}.minAvailable"),
                    format!("must be below replicas ({replicas}), got {min}: no pod could ever be evicted"),
                );
            }
        }
    }
    if let Some(gs) = ha.graceful_shutdown.as_ref() {
        let base = "spec.highAvailability.gracefulShutdown";
        problems.range(&format!("{base}.preStopDelaySeconds"), gs.pre_stop_delay_seconds, 1, 300);
        problems.range(&format!("{base}.terminationGracePeriodSeconds"), gs.termination_grace_period_seconds, 1, 600);
        if let Some((delay, grace)) = spec.graceful_shutdown()
            && grace <= i64::from(delay)
        {
            problems.add(
                &format!("{base}.terminationGracePeriodSeconds"),
                format!("must be greater than preStopDelaySeconds ({delay}), got {grace}"),
            );
        }
    }
}

fn validate_security(spec: &MemcachedSpec, problems: &mut Problems) {
    let Some(security) = &spec.security else { return };
    if security.sasl.as_ref().is_some_and(|s| s.enabled) && spec.sasl_secret_name().is_none() {
        problems.add("spec.security.sasl.credentialsSecretRef.name", "is required when SASL is enabled");
    }
    if security.tls.as_ref().is_some_and(|t| t.enabled) && spec.tls_secret_name().is_none() {
        problems.add("spec.security.tls.certificateSecretRef.name", "is required when TLS is enabled");
    }
    for (path, name) in [
        ("spec.security.sasl.credentialsSecretRef.name", spec.sasl_secret_name()),
        ("spec.security.tls.certificateSecretRef.name", spec.tls_secret_name()),
    ] {
        if let Some(Err(why)) = name.map(check_dns1123_subdomain) {
            problems.add(path, why);
        }
    }
    if let Some(np) = &security.network_policy
        && np.allowed_sources.as_ref().is_some_and(|s| s.len() > 64)
    {
        problems.add("spec.security.networkPolicy.allowedSources", "must have at most 64 items");
    }
}

fn validate_autoscaling(spec: &MemcachedSpec, autoscaling: &AutoscalingSpec, problems: &mut Problems) {
    if spec.replicas.is_some() {
        problems.add("spec.replicas", "must be absent when autoscaling is enabled");
    }
    match autoscaling.max_replicas {
        None => problems.add("spec.autoscaling.maxReplicas", "is required when autoscaling is enabled"),
        Some(max) if autoscaling.effective_min_replicas() > max => problems.add(
            "spec.autoscaling.minReplicas",
            format!("must not exceed maxReplicas ({max}), got {}", autoscaling.effective_min_replicas()),
        ),
        Some(_) => {}
    }
    let cpu_utilization = autoscaling.effective_metrics().iter().any(|m| {
        m.type_ == "Resource" && m.resource.as_ref().is_some_and(|r| r.name == "cpu" && r.target.type_ == "Utilization")
    });
    let cpu_requested =
        spec.resources.as_ref().and_then(|r| r.requests.as_ref()).is_some_and(|r| r.contains_key("cpu"));
    if cpu_utilization && !cpu_requested {
        problems.add(
            "spec.resources.requests.cpu",
            "is required: autoscaling on CPU utilization measures usage against the request",
        );
    }
}

fn is_item_size(size: &str) -> bool {
    size.len() >= 2
        && size.len() <= 16
        && size.ends_with(['k', 'm'])
        && size[..size.len() - 1].bytes().all(|b| b.is_ascii_digit())
}

fn is_percent(s: &str) -> bool {
    s.len() >= 2 && s.ends_with('%') && s[..s.len() - 1].bytes().all(|b| b.is_ascii_digit())
}

/// A Prometheus duration: `0`, or units y w d h m s ms in that order, each at most once.
pub fn is_duration(s: &str) -> bool {
    if s == "0" {
        return true;
    }
    if s.is_empty() || s.len() > 32 {
        return false;
    }
    const UNITS: [&str; 7] = ["y", "w", "d", "h", "m", "s", "ms"];
    let mut rest = s;
    let mut next_unit = 0;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return false;
        }
        rest = &rest[digits..];
        // "ms" must be tried before "m"; a unit may not repeat or go backwards.
        let Some(found) =
            (next_unit..UNITS.len()).filter(|&i| rest.starts_with(UNITS[i])).max_by_key(|&i| UNITS[i].len())
        else {
            return false;
        };
        rest = &rest[UNITS[found].len()..];
        next_unit = found + 1;
    }
    true
}

fn check_dns1123_label(s: &str) -> Result<(), String> {
    let ok = !s.is_empty()
        && s.len() <= 63
        && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-');
    ok.then_some(()).ok_or_else(|| {
        format!("must be a DNS-1123 label (lowercase letters, digits and '-', at most 63 characters), got {s:?}")
    })
}

fn check_dns1035_label(s: &str) -> Result<(), String> {
    let ok = check_dns1123_label(s).is_ok() && s.starts_with(|c: char| c.is_ascii_lowercase());
    ok.then_some(()).ok_or_else(|| {
        format!("must be a DNS-1035 label (a lowercase letter, then lowercase letters, digits and '-', at most 63 characters), got {s:?}")
    })
}

fn check_dns1123_subdomain(s: &str) -> Result<(), String> {
    let ok = s.len() <= 253 && s.split('.').all(|part| check_dns1123_label(part).is_ok());
    ok.then_some(()).ok_or_else(|| format!("must be a DNS-1123 subdomain, got {s:?}"))
}

/// A qualified name: optional DNS subdomain prefix and '/', then a name of at
/// most 63 alphanumerics, '-', '_' and '.', starting and ending alphanumeric.
fn check_label_key(key: &str) -> Result<(), String> {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    if let Some(Err(_)) = prefix.map(check_dns1123_subdomain) {
        return Err(format!("key prefix must be a DNS-1123 subdomain, got {key:?}"));
    }
    if name.is_empty() || name.len() > 63 || !is_label_name(name) {
        return Err(format!(
            "key must be a qualified name (at most 63 of A-Z a-z 0-9 - _ ., alphanumeric at both ends), got {key:?}"
        ));
    }
    Ok(())
}

fn check_label_value(value: &str) -> Result<(), String> {
    if value.is_empty() || (value.len() <= 63 && is_label_name(value)) {
        Ok(())
    } else {
        Err(format!("value must be at most 63 of A-Z a-z 0-9 - _ ., alphanumeric at both ends, got {value:?}"))
    }
}

fn is_label_name(s: &str) -> bool {
    s.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && s.starts_with(|c: char| c.is_ascii_alphanumeric())
        && s.ends_with(|c: char| c.is_ascii_alphanumeric())
}

/// Whether `value` is usable as a label value (the version label uses this).
pub fn is_label_value(value: &str) -> bool {
    check_label_value(value).is_ok()
}
