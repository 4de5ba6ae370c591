//! The quantity parser (guest/src/quantity.rs) on any text: never a panic
//! (overflow checks are on), an error that quotes the text, a sign that only
//! negates, and a binary suffix that multiplies exactly.

#![no_main]

use memcached_logic::quantity::parse_nanos;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    check(text);
});

fn check(text: &str) {
    let parsed = parse_nanos(text);
    let nanos = match parsed {
        Ok(nanos) => nanos,
        Err(message) => {
            assert!(message.contains(&format!("{text:?}")), "{text:?}: the error does not quote it: {message}");
            return;
        }
    };
    if text.starts_with(['+', '-']) {
        return;
    }
    assert_eq!(parse_nanos(&format!("+{text}")), Ok(nanos), "+{text}");
    assert_eq!(parse_nanos(&format!("-{text}")), Ok(-nanos), "-{text}");
    // A plain number with at most nine decimals is exact (nothing rounded),
    // so Ki is 1024 times it, or refused when that passes the range.
    let plain = text.bytes().all(|b| b.is_ascii_digit() || b == b'.');
    let decimals = text.split_once('.').map_or(0, |(_, fraction)| fraction.len());
    if plain && decimals <= 9 {
        let kibi = parse_nanos(&format!("{text}Ki"));
        match nanos.checked_mul(1024) {
            Some(expected) => assert_eq!(kibi, Ok(expected), "{text}Ki"),
            None => assert!(kibi.is_err(), "{text}Ki: {kibi:?}"),
        }
    }
}
