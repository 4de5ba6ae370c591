//! A resource quantity's amount (`1500m`, `64Mi`, `2e3`), exactly, so that
//! two spellings the API server stores alike compare equal: the write
//! decision counts a quantity the server rewrote (`1.5` stored as `1500m`)
//! as unchanged.

/// A quantity's amount as a fraction (numerator, denominator), exactly:
/// `1500m`, `1.5` and `1500000u`... all read the same.
pub fn amount(text: &str) -> Option<(i128, i128)> {
    let text = text.trim();
    // `E` alone at the end is exa; elsewhere `e`/`E` is an exponent.
    let exa = text.len() > 1 && text.ends_with('E') && text[..text.len() - 1].ends_with(|c: char| c.is_ascii_digit());
    let split = if exa {
        text.len() - 1
    } else {
        text.find(|c: char| c.is_ascii_alphabetic() && c != 'e' && c != 'E').unwrap_or(text.len())
    };
    let (number, suffix) = text.split_at(split);
    let (mut numerator, mut denominator) = decimal(number)?;
    let (base, power): (i128, u32) = match suffix {
        "" => (10, 0),
        "n" => return scale(numerator, denominator * 1_000_000_000),
        "u" => return scale(numerator, denominator * 1_000_000),
        "m" => return scale(numerator, denominator * 1_000),
        "k" => (10, 3),
        "M" => (10, 6),
        "G" => (10, 9),
        "T" => (10, 12),
        "P" => (10, 15),
        "E" => (10, 18),
        "Ki" => (2, 10),
        "Mi" => (2, 20),
        "Gi" => (2, 30),
        "Ti" => (2, 40),
        "Pi" => (2, 50),
        "Ei" => (2, 60),
        _ => return None,
    };
    numerator = numerator.checked_mul(base.checked_pow(power)?)?;
    denominator = denominator.max(1);
    scale(numerator, denominator)
}

/// `1.25`, `-3`, `2e3` as a fraction.
fn decimal(text: &str) -> Option<(i128, i128)> {
    let (mantissa, exponent) = match text.find(['e', 'E']) {
        Some(at) => (&text[..at], text[at + 1..].parse::<i32>().ok()?),
        None => (text, 0),
    };
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    if whole.trim_start_matches(['+', '-']).is_empty() && fraction.is_empty() {
        return None;
    }
    let digits = format!("{whole}{fraction}");
    let mut numerator: i128 = digits.parse().ok()?;
    let mut denominator: i128 = 10i128.checked_pow(fraction.len() as u32)?;
    if exponent >= 0 {
        numerator = numerator.checked_mul(10i128.checked_pow(exponent as u32)?)?;
    } else {
        denominator = denominator.checked_mul(10i128.checked_pow(exponent.unsigned_abs())?)?;
    }
    Some((numerator, denominator))
}

/// The fraction in lowest terms, so equal amounts compare equal.
fn scale(numerator: i128, denominator: i128) -> Option<(i128, i128)> {
    fn gcd(a: i128, b: i128) -> i128 {
        if b == 0 { a.abs() } else { gcd(b, a % b) }
    }
    let divisor = gcd(numerator, denominator).max(1);
    Some((numerator / divisor, denominator / divisor))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_compare_by_amount() {
        assert_eq!(amount("1500m"), amount("1.5"));
        assert_eq!(amount("64Mi"), amount("67108864"));
        assert_eq!(amount("1k"), amount("1e3"));
        assert_eq!(amount("2E"), amount("2e18"));
        assert_eq!(amount("0.5Gi"), amount("512Mi"));
        assert_ne!(amount("1M"), amount("1Mi"));
        assert_eq!(amount("bad"), None);
        assert_eq!(amount(""), None);
        assert_eq!(amount("1Xi"), None);
    }
}
