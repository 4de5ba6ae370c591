//! A small deterministic YAML emitter for JSON values. It lives in the
//! module so that every host (the CLI, the playground, other controllers)
//! prints the very same bytes for the same objects.
//!
//! Style: two-space indents, list items indented under their key, keys in
//! the JSON's order, strings plain where YAML 1.1 and 1.2 both read them back
//! as the same string, double-quoted with JSON escapes otherwise.

use serde_json::Value;

/// One document per object, each starting with `---` except the first.
pub fn documents(objects: &[Value]) -> String {
    let mut out = String::new();
    for (i, object) in objects.iter().enumerate() {
        if i > 0 {
            out.push_str("---\n");
        }
        out.push_str(&document(object));
    }
    out
}

pub fn document(value: &Value) -> String {
    let mut out = String::new();
    match value {
        Value::Object(map) if !map.is_empty() => write_map(&mut out, map, 0),
        Value::Array(items) if !items.is_empty() => write_list(&mut out, items, 0),
        scalar => {
            write_scalar(&mut out, scalar);
            out.push('\n');
        }
    }
    out
}

fn indent(out: &mut String, level: usize) {
    out.extend(std::iter::repeat_n(' ', level));
}

fn write_map(out: &mut String, map: &serde_json::Map<String, Value>, level: usize) {
    for (key, value) in map {
        indent(out, level);
        write_string(out, key);
        out.push(':');
        write_nested(out, value, level);
    }
}

fn write_list(out: &mut String, items: &[Value], level: usize) {
    for item in items {
        indent(out, level);
        out.push('-');
        match item {
            // The first key shares the dash's line; the rest align under it.
            Value::Object(map) if !map.is_empty() => {
                out.push(' ');
                let mut first = true;
                for (key, value) in map {
                    if !first {
                        indent(out, level + 2);
                    }
                    first = false;
                    write_string(out, key);
                    out.push(':');
                    write_nested(out, value, level + 2);
                }
            }
            Value::Array(inner) if !inner.is_empty() => {
                out.push('\n');
                write_list(out, inner, level + 2);
            }
            scalar => {
                out.push(' ');
                write_scalar(out, scalar);
                out.push('\n');
            }
        }
    }
}

/// What follows `key:` — a scalar on the same line, or a block below.
fn write_nested(out: &mut String, value: &Value, level: usize) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            out.push('\n');
            write_map(out, map, level + 2);
        }
        Value::Array(items) if !items.is_empty() => {
            out.push('\n');
            write_list(out, items, level + 2);
        }
        scalar => {
            out.push(' ');
            write_scalar(out, scalar);
            out.push('\n');
        }
    }
}

fn write_scalar(out: &mut String, value: &Value) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&n.to_string()),
        Value::String(s) => write_string(out, s),
        Value::Array(_) => out.push_str("[]"),
        Value::Object(_) => out.push_str("{}"),
    }
}

fn write_string(out: &mut String, s: &str) {
    if is_plain_safe(s) {
        out.push_str(s);
    } else {
        // A JSON string is a valid YAML double-quoted scalar.
        out.push_str(&Value::String(s.to_owned()).to_string());
    }
}

/// Whether `s` can be written unquoted and read back as the same string by
/// both YAML 1.1 and 1.2 parsers.
fn is_plain_safe(s: &str) -> bool {
    let Some(first) = s.chars().next() else { return false };
    // A leading dash is fine before a letter (`-m`), never alone or as `---`.
    let dash_flag = first == '-' && s[1..].starts_with(|c: char| c.is_ascii_alphabetic());
    if !(first.is_ascii_alphanumeric() || first == '/' || first == '.' || first == '_' || dash_flag) {
        return false;
    }
    if s.ends_with([' ', ':']) || s.contains(": ") || s.contains(" #") {
        return false;
    }
    let ordinary = |c: char| c.is_ascii_alphanumeric() || " ._/:=@+-,()".contains(c);
    if !s.chars().all(ordinary) {
        return false;
    }
    !looks_like_other_type(s)
}

/// Strings a YAML parser would read as null, a boolean or a number.
fn looks_like_other_type(s: &str) -> bool {
    const WORDS: [&str; 13] = ["null", "true", "false", "yes", "no", "on", "off", "y", "n", ".inf", ".nan", "~", "nan"];
    let lower = s.to_ascii_lowercase();
    if WORDS.contains(&lower.as_str()) || lower == "inf" {
        return true;
    }
    let unsigned = s.trim_start_matches(['+', '-']);
    let starts_numeric = unsigned.starts_with(|c: char| c.is_ascii_digit())
        || (unsigned.starts_with('.') && unsigned[1..].starts_with(|c: char| c.is_ascii_digit()));
    if !starts_numeric {
        return false;
    }
    // Digits with separators, exponents, hex/octal/binary or sexagesimal
    // (YAML 1.1 reads `1:30` as 90): quote anything number-like.
    unsigned.chars().all(|c| c.is_ascii_hexdigit() || "._:+-xob".contains(c))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn emits_block_style_with_lists_under_keys() {
        let value = json!({
            "apiVersion": "v1",
            "metadata": {"name": "my-cache", "labels": {"app.kubernetes.io/name": "memcached"}},
            "spec": {"ports": [{"name": "memcached", "port": 11211}], "empty": {}, "none": []},
        });
        let want = "\
apiVersion: v1
metadata:
  labels:
    app.kubernetes.io/name: memcached
  name: my-cache
spec:
  empty: {}
  none: []
  ports:
    - name: memcached
      port: 11211
";
        assert_eq!(document(&value), want);
    }

    #[test]
    fn quotes_what_would_read_back_as_another_type() {
        for (s, quoted) in [
            ("11211", true),
            ("1.6", true),
            ("true", true),
            ("No", true),
            ("0x1F", true),
            ("1e3", true),
            ("1:30", true),
            ("", true),
            ("- x", true),
            ("a: b", true),
            ("with #comment", true),
            ("line\nbreak", true),
            ("*star", true),
            ("30s", false),
            ("memcached:1.6", false),
            ("my-cache.default:11211", false),
            ("/etc/memcached/tls", false),
            ("ssl_key=/etc/memcached/tls/tls.key", false),
            ("1.6.38-alpine", false),
            ("-m", false),
            ("-vv", false),
            ("-", true),
            ("---", true),
            ("-1", true),
        ] {
            assert_eq!(!is_plain_safe(s), quoted, "{s:?}");
        }
    }

    #[test]
    fn separates_documents() {
        let text = documents(&[json!({"a": 1}), json!({"b": "x y"})]);
        assert_eq!(text, "a: 1\n---\nb: x y\n");
    }
}
