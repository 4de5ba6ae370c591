//! Durations as users write them in flags and resources (`90s`, `2m`,
//! `1h30m`, ISO 8601 `PT2M`), with a message naming the text when one
//! does not parse.

use std::time::Duration;

pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let duration: jiff::SignedDuration = text.parse().map_err(|e| format!("{text:?} is not a duration: {e}"))?;
    Duration::try_from(duration).map_err(|e| format!("{text:?}: {e}"))
}

/// `duration` as [`parse_duration`] reads it back (`1s`, `1m 30s`, `500ms`).
pub fn format_duration(duration: Duration) -> String {
    match jiff::SignedDuration::try_from(duration) {
        Ok(signed) => format!("{signed:#}"),
        Err(_) => format!("{}s", duration.as_secs()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn friendly_and_iso_durations_parse_and_others_are_named() {
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("PT2M"), Ok(Duration::from_secs(120)));
        let error = parse_duration("soon").expect_err("not a duration");
        assert!(error.starts_with("\"soon\" is not a duration"), "{error}");
        assert!(parse_duration("-5s").is_err(), "negative");
        for duration in [Duration::from_secs(1), Duration::from_millis(1500), Duration::from_secs(5400)] {
            assert_eq!(parse_duration(&format_duration(duration)), Ok(duration), "{}", format_duration(duration));
        }
        assert_eq!(format_duration(Duration::from_secs(90)), "1m 30s");
    }
}
