//! The `Countdown` module: `example.c5c3.io/v1` `Countdown` counts down to
//! `spec.deadline` (RFC 3339). Its status says how many seconds are left
//! (`remainingSeconds`, `phase: Counting`), then `phase: Done`. Nothing
//! else changes while it counts: the module asks the host to reconcile the
//! parent again every `spec.everySeconds` (1 by default) until the
//! deadline, with [`Context::reconcile_after`], and asks nothing once it
//! has passed. It owns one ConfigMap holding the deadline, which no tick
//! changes.

use std::time::Duration;

use kube_derive::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use wasm_operator_sdk::k8s_openapi::api::core::v1::ConfigMap;
use wasm_operator_sdk::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use wasm_operator_sdk::prelude::*;
use wasm_operator_sdk::serde_json;

#[derive(CustomResource, Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "example.c5c3.io",
    version = "v1",
    kind = "Countdown",
    plural = "countdowns",
    namespaced,
    status = "CountdownStatus",
    crates(
        kube_core = "::wasm_operator_sdk::kube_core",
        k8s_openapi = "::wasm_operator_sdk::k8s_openapi",
        serde_json = "::wasm_operator_sdk::serde_json"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct CountdownSpec {
    /// When the countdown ends (RFC 3339).
    pub deadline: String,
    /// How often the status is brought up to date while counting.
    #[serde(default)]
    pub every_seconds: Option<u32>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CountdownStatus {
    pub observed_generation: Option<i64>,
    /// `Counting` or `Done`; `Invalid` with `message` for a bad spec.
    pub phase: String,
    pub remaining_seconds: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// The module: `Countdown` parents, each owning one ConfigMap.
pub struct Countdowns;

impl CountdownSpec {
    /// The deadline as seconds since the epoch.
    fn deadline(&self) -> Result<i64, Error> {
        let time: Time = serde_json::from_value(serde_json::Value::String(self.deadline.clone()))
            .map_err(|_| Error::invalid("spec.deadline", format!("{:?} is not an RFC 3339 time", self.deadline)))?;
        Ok(time.0.as_second())
    }

    fn every(&self) -> Result<Duration, Error> {
        match self.every_seconds {
            None => Ok(Duration::from_secs(1)),
            Some(0) => Err(Error::invalid("spec.everySeconds", "must be at least 1")),
            Some(seconds) => Ok(Duration::from_secs(u64::from(seconds))),
        }
    }
}

/// Seconds from `now` to the deadline, never below 0.
fn remaining(spec: &CountdownSpec, now: &Time) -> Result<i64, Error> {
    Ok((spec.deadline()? - now.0.as_second()).max(0))
}

impl Reconciler for Countdowns {
    type Parent = Countdown;
    type Status = CountdownStatus;
    const WRITES: WriteModel = WriteModel::Apply;

    fn manifest() -> Manifest {
        Manifest::new::<Countdown>("countdown", env!("CARGO_PKG_VERSION")).owns::<ConfigMap>()
    }

    fn desired(countdown: &Countdown, ctx: &Context) -> Result<Vec<Object>, Error> {
        let left = remaining(&countdown.spec, &ctx.now())?;
        let every = countdown.spec.every()?;
        if left > 0 {
            // The next tick, or the deadline itself if it comes first.
            let until_deadline = Duration::from_secs(u64::try_from(left).unwrap_or(u64::MAX));
            ctx.reconcile_after(every.min(until_deadline));
        }
        let config = ConfigMap {
            metadata: ObjectMeta { name: Some(countdown.name_any()), ..ObjectMeta::default() },
            data: Some([("deadline".to_owned(), countdown.spec.deadline.clone())].into()),
            ..ConfigMap::default()
        };
        Ok(vec![Object::new(&config)])
    }

    fn status(countdown: &Countdown, ctx: &Context) -> Result<CountdownStatus, Error> {
        let observed_generation = observed_generation(countdown);
        if let Some(problem) = ctx.problem() {
            return Ok(CountdownStatus {
                observed_generation,
                phase: "Invalid".into(),
                remaining_seconds: 0,
                message: Some(problem.to_owned()),
            });
        }
        let left = remaining(&countdown.spec, &ctx.now())?;
        let phase = if left > 0 { "Counting" } else { "Done" };
        Ok(CountdownStatus { observed_generation, phase: phase.into(), remaining_seconds: left, message: None })
    }
}

export_reconciler!(Countdowns);

#[cfg(test)]
mod tests {
    use wasm_operator_sdk::run;

    use super::*;

    fn parent(deadline: &str) -> String {
        serde_json::json!({
            "apiVersion": "example.c5c3.io/v1", "kind": "Countdown",
            "metadata": {"name": "launch", "namespace": "ns", "uid": "u-1", "generation": 1},
            "spec": {"deadline": deadline, "everySeconds": 2}
        })
        .to_string()
    }

    #[test]
    fn it_asks_for_the_next_tick_until_the_deadline_and_nothing_after() {
        let answer = run::answer::<Countdowns>(&parent("2026-12-02T10:00:10Z"), &[], &[], "2026-12-02T10:00:00Z")
            .expect("an answer");
        assert_eq!(answer.again_after, Some(Duration::from_secs(2)));
        assert_eq!(answer.objects.len(), 1);
        let last = run::answer::<Countdowns>(&parent("2026-12-02T10:00:10Z"), &[], &[], "2026-12-02T10:00:09Z")
            .expect("an answer");
        assert_eq!(last.again_after, Some(Duration::from_secs(1)), "the deadline comes before the tick");
        let done = run::answer::<Countdowns>(&parent("2026-12-02T10:00:10Z"), &[], &[], "2026-12-02T10:00:10Z")
            .expect("an answer");
        assert_eq!(done.again_after, None);
    }

    #[test]
    fn the_status_counts_down_then_says_done() {
        let status = |now: &str| -> serde_json::Value {
            let text = run::status::<Countdowns>(&parent("2026-12-02T10:00:10Z"), &[], &[], now, None).expect("status");
            serde_json::from_str(&text).expect("JSON")
        };
        assert_eq!(status("2026-12-02T10:00:03Z")["remainingSeconds"], 7);
        assert_eq!(status("2026-12-02T10:00:03Z")["phase"], "Counting");
        assert_eq!(status("2026-12-02T10:00:11Z")["phase"], "Done");
        assert_eq!(status("2026-12-02T10:00:11Z")["remainingSeconds"], 0);
    }

    #[test]
    fn a_deadline_that_is_no_time_is_invalid_at_its_field() {
        let error = run::answer::<Countdowns>(&parent("soon"), &[], &[], "2026-12-02T10:00:00Z").expect_err("invalid");
        assert!(error.to_string().contains("spec.deadline"), "{error}");
    }
}
