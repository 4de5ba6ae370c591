//! What runs to completion: a migration Job, once, and a purge CronJob on
//! the spec's schedule (a purge still running when the next is due is
//! replaced by it).

use wasm_operator_sdk::k8s_openapi::api::batch::v1::{CronJob, CronJobSpec, Job, JobSpec, JobTemplateSpec};
use wasm_operator_sdk::k8s_openapi::api::core::v1::{Container, PodSpec, PodTemplateSpec};
use wasm_operator_sdk::prelude::*;

use crate::{Queue, metadata};

/// A Pod template running the Queue's image with `command`.
fn task(queue: &Queue, command: &str, restart_policy: &str) -> PodTemplateSpec {
    PodTemplateSpec {
        metadata: None,
        spec: Some(PodSpec {
            restart_policy: Some(restart_policy.into()),
            containers: vec![Container {
                name: command.into(),
                image: Some(queue.spec.image.clone()),
                args: Some(vec![command.into()]),
                ..Default::default()
            }],
            ..Default::default()
        }),
    }
}

pub fn migration(queue: &Queue) -> Job {
    Job {
        metadata: metadata(&format!("{}-migrate", queue.name_any()), queue),
        spec: Some(JobSpec { backoff_limit: Some(2), template: task(queue, "migrate", "Never"), ..Default::default() }),
        ..Default::default()
    }
}

pub fn purge(queue: &Queue, schedule: &str) -> CronJob {
    CronJob {
        metadata: metadata(&format!("{}-purge", queue.name_any()), queue),
        spec: CronJobSpec {
            schedule: schedule.to_owned(),
            concurrency_policy: Some("Replace".into()),
            job_template: JobTemplateSpec {
                metadata: None,
                spec: Some(JobSpec { template: task(queue, "purge", "OnFailure"), ..Default::default() }),
            },
            ..Default::default()
        },
        ..Default::default()
    }
}
