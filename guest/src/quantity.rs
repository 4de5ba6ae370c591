//! Kubernetes resource quantities (`96Mi`, `1G`, `500m`, `1e9`) as numbers:
//! exactly, in nano-units, for comparing two spellings of one amount and for
//! the memory-limit rule.

/// The amount `text` names, in nano-units (10^-9 of the base unit, bytes
/// for memory), exactly: `1000000000` and `1000000001` differ, `1Gi` and
/// `1024Mi` do not. Finer amounts round up to a nano-unit, as the API server
/// rounds them. Amounts beyond about 10^29 base units are refused.
pub fn parse_nanos(text: &str) -> Result<i128, String> {
    let invalid = || format!("must be a quantity such as 128Mi or 1G, got {text:?}");
    let number_len = text.bytes().take_while(|b| b.is_ascii_digit() || matches!(b, b'.' | b'+' | b'-')).count();
    let (number, suffix) = text.split_at(number_len);
    let negative = number.starts_with('-');
    let digits = number.trim_start_matches(['+', '-']);
    if number.len() - digits.len() > 1 || digits.is_empty() || digits == "." || digits.contains(['+', '-']) {
        return Err(invalid());
    }
    let (whole, fraction) = digits.split_once('.').unwrap_or((digits, ""));
    if fraction.contains('.') {
        return Err(invalid());
    }
    // The digits as one integer, and the power of ten that scales it to nanos.
    let mut mantissa: i128 = 0;
    for digit in whole.bytes().chain(fraction.bytes()) {
        mantissa =
            mantissa.checked_mul(10).and_then(|m| m.checked_add(i128::from(digit - b'0'))).ok_or_else(invalid)?;
    }
    let mut exponent = 9 - i32::try_from(fraction.len()).map_err(|_| invalid())?;
    let mut binary_power = 0u32;
    match suffix {
        "" => {}
        "Ki" => binary_power = 10,
        "Mi" => binary_power = 20,
        "Gi" => binary_power = 30,
        "Ti" => binary_power = 40,
        "Pi" => binary_power = 50,
        "Ei" => binary_power = 60,
        "n" => exponent -= 9,
        "u" => exponent -= 6,
        "m" => exponent -= 3,
        "k" => exponent += 3,
        "M" => exponent += 6,
        "G" => exponent += 9,
        "T" => exponent += 12,
        "P" => exponent += 15,
        "E" => exponent += 18,
        power if power.starts_with(['e', 'E']) => {
            let power: i32 = power[1..].parse().map_err(|_| invalid())?;
            if !(-30..=30).contains(&power) {
                return Err(invalid());
            }
            exponent += power;
        }
        _ => return Err(invalid()),
    }
    let mut nanos = mantissa.checked_mul(1i128 << binary_power).ok_or_else(invalid)?;
    if exponent >= 0 {
        nanos =
            nanos.checked_mul(10i128.checked_pow(exponent.unsigned_abs()).ok_or_else(invalid)?).ok_or_else(invalid)?;
    } else {
        // Rounded up (away from zero for the magnitude), as the API server
        // does. The magnitude is below 10^39, so a finer amount than any
        // divisor i128 holds is one nano-unit (or none).
        nanos = match 10i128.checked_pow(exponent.unsigned_abs()) {
            Some(divisor) => nanos / divisor + i128::from(nanos % divisor != 0),
            None => i128::from(nanos != 0),
        };
    }
    Ok(if negative { -nanos } else { nanos })
}

#[cfg(test)]
mod tests {
    use super::parse_nanos;

    #[test]
    fn amounts_are_exact_in_every_spelling() {
        let same = [
            ("1Gi", "1024Mi"),
            ("1.5Gi", "1536Mi"),
            ("0.5", "500m"),
            ("1k", "1000"),
            ("1e3", "1k"),
            ("1E9", "1G"),
            ("+2", "2"),
            ("1u", "1000n"),
            ("0.0000000001", "1n"),
        ];
        for (a, b) in same {
            assert_eq!(parse_nanos(a), parse_nanos(b), "{a} == {b}");
        }
        let different = [("1000000000", "1000000001"), ("1Gi", "1G"), ("1", "1001m"), ("1Ei", "1152921504606846977")];
        for (a, b) in different {
            assert_ne!(parse_nanos(a), parse_nanos(b), "{a} != {b}");
        }
        assert_eq!(parse_nanos("1000000001"), Ok(1_000_000_001_000_000_000));
        assert_eq!(parse_nanos("-1.5"), Ok(-1_500_000_000));
        for text in ["", "Mi", "1.2.3Mi", "12XB", "1e99", "--1", ".", "99999999999999999999999999999999999999999"] {
            let error = parse_nanos(text).expect_err(text);
            assert!(error.contains(&format!("{text:?}")), "{text}: {error}");
        }
    }

    /// Found by fuzzing (fuzz/regressions/quantity/): rounding up added the
    /// divisor first, which overflowed i128 (a panic with overflow checks, a
    /// wrapped -1 nano-unit without), and a divisor past i128 refused an
    /// amount the API server takes.
    #[test]
    fn amounts_finer_than_a_nano_round_up_without_overflow() {
        assert_eq!(parse_nanos("+.00000000080000000000000000000000000000000000005"), Ok(1));
        assert_eq!(parse_nanos("-.00000000080000000000000000000000000000000000005"), Ok(-1));
        assert_eq!(parse_nanos(&format!("0.{}1", "0".repeat(60))), Ok(1));
        assert_eq!(parse_nanos(&format!("0.{}", "0".repeat(60))), Ok(0));
        assert_eq!(parse_nanos("1.0000000001"), Ok(1_000_000_001));
        // i128::MAX nano-nano-units: the largest mantissa, rounded up.
        assert_eq!(parse_nanos("170141183460469231731687303715.884105727n"), Ok(i128::MAX / 1_000_000_000 + 1));
    }
}
