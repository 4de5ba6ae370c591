//! Kubernetes resource quantities (`96Mi`, `1G`, `500m`, `1e9`) as numbers,
//! for the memory-limit rule.

/// The value of a quantity, in base units (bytes for memory).
pub fn parse(text: &str) -> Result<f64, String> {
    let invalid = || format!("must be a quantity such as 128Mi or 1G, got {text:?}");
    let number_len = text.bytes().take_while(|b| b.is_ascii_digit() || matches!(b, b'.' | b'+' | b'-')).count();
    let (number, suffix) = text.split_at(number_len);
    let digits = number.trim_start_matches(['+', '-']);
    if digits.is_empty() || digits == "." || digits.contains(['+', '-']) || digits.matches('.').count() > 1 {
        return Err(invalid());
    }
    let value: f64 = number.parse().map_err(|_| invalid())?;
    let multiplier = match suffix {
        "" => 1.0,
        "Ki" => 1024f64,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        "n" => 1e-9,
        "u" => 1e-6,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        exponent if exponent.starts_with(['e', 'E']) => {
            let power: i32 = exponent[1..].parse().map_err(|_| invalid())?;
            if !(-30..=30).contains(&power) {
                return Err(invalid());
            }
            10f64.powi(power)
        }
        _ => return Err(invalid()),
    };
    Ok(value * multiplier)
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn parses_every_suffix_family() {
        let cases = [
            ("96Mi", 96.0 * 1048576.0),
            ("1Gi", 1073741824.0),
            ("100M", 1e8),
            ("0.5Gi", 536870912.0),
            ("1e9", 1e9),
            ("500m", 0.5),
            ("128974848", 128974848.0),
            ("+1k", 1000.0),
        ];
        for (text, want) in cases {
            assert_eq!(parse(text), Ok(want), "{text}");
        }
    }

    #[test]
    fn rejects_garbage_with_the_text() {
        for text in ["", "Mi", "1.2.3Mi", "12XB", "1e999", "--1", "."] {
            let err = parse(text).unwrap_err();
            assert!(err.contains(&format!("{text:?}")), "{text}: {err}");
        }
    }
}
