//! Status conditions whose `lastTransitionTime` moves only when their
//! status flips, so an unchanged parent's status is unchanged and the host
//! writes nothing.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

/// The condition `type_`, built on the one in `previous`: its
/// `lastTransitionTime` is kept when the status is the same, else `now`.
pub fn condition(
    previous: &[Condition],
    type_: &str,
    status: bool,
    reason: &str,
    message: impl Into<String>,
    observed_generation: Option<i64>,
    now: &Time,
) -> Condition {
    let status = if status { "True" } else { "False" };
    let last_transition_time = previous
        .iter()
        .find(|c| c.type_ == type_ && c.status == status)
        .map_or_else(|| now.clone(), |c| c.last_transition_time.clone());
    Condition {
        type_: type_.into(),
        status: status.into(),
        reason: reason.into(),
        message: message.into(),
        observed_generation,
        last_transition_time,
    }
}

/// Replaces (or appends) the condition of `type_` in `conditions`, as
/// [`condition`] builds it; the others stay in their order.
pub fn set_condition(
    conditions: &mut Vec<Condition>,
    type_: &str,
    status: bool,
    reason: &str,
    message: impl Into<String>,
    observed_generation: Option<i64>,
    now: &Time,
) {
    let new = condition(conditions, type_, status, reason, message, observed_generation, now);
    match conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(slot) => *slot = new,
        None => conditions.push(new),
    }
}

/// The time a host passes to `status` (RFC 3339); the Unix epoch if it
/// does not parse, so a status never fails on a clock.
pub fn parse_time(now: &str) -> Time {
    Time(now.parse().unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_transition_time_moves_only_when_the_status_flips() {
        let ten = parse_time("2026-11-25T10:00:00Z");
        let eleven = parse_time("2026-11-25T11:00:00Z");
        let mut conditions = Vec::new();
        set_condition(&mut conditions, "Ready", false, "Pending", "waiting", Some(1), &ten);
        set_condition(&mut conditions, "Degraded", false, "AsExpected", "", Some(1), &ten);
        set_condition(&mut conditions, "Ready", false, "Pending", "still waiting", Some(2), &eleven);
        assert_eq!(conditions[0].last_transition_time, ten);
        assert_eq!((conditions[0].message.as_str(), conditions[0].observed_generation), ("still waiting", Some(2)));
        set_condition(&mut conditions, "Ready", true, "Available", "up", Some(2), &eleven);
        assert_eq!(conditions[0].last_transition_time, eleven);
        assert_eq!(conditions.iter().map(|c| c.type_.as_str()).collect::<Vec<_>>(), ["Ready", "Degraded"]);
        assert_eq!(parse_time("not a time"), Time(Default::default()));
    }
}
