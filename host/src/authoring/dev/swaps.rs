//! The host's swap log lines (target `wasm_operator::operator::swapping::hot_swap`:
//! a new version verifying, swapped in, refused, rolled back, past its
//! watch window) printed to stdout among the objects, as `swap: ...`.

use std::fmt::Write as _;

use tracing::field::{Field, Visit};
use tracing_subscriber::Layer;
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::layer::Context;

use super::printer::emit;

const TARGET: &str = "wasm_operator::operator::swapping::hot_swap";

/// Fields left out of the line: timings, and the module's name (one module).
const LEFT_OUT: &[&str] = &["module", "dry_run_us", "took_us"];

pub fn layer<S>() -> impl Layer<S>
where
    S: tracing::Subscriber + for<'span> tracing_subscriber::registry::LookupSpan<'span>,
{
    SwapLines.with_filter(Targets::new().with_target(TARGET, LevelFilter::INFO))
}

struct SwapLines;

impl<S: tracing::Subscriber> Layer<S> for SwapLines {
    fn on_event(&self, event: &tracing::Event<'_>, _ctx: Context<'_, S>) {
        let mut line = Line::default();
        event.record(&mut line);
        let mut text = format!("swap: {}", line.message);
        if !line.fields.is_empty() {
            let _ = write!(text, " ({})", line.fields.join(", "));
        }
        emit(&text);
    }
}

#[derive(Default)]
struct Line {
    message: String,
    fields: Vec<String>,
}

impl Visit for Line {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.record(field, value.to_owned());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.record(field, format!("{value:?}"));
    }
}

impl Line {
    fn record(&mut self, field: &Field, value: String) {
        match field.name() {
            "message" => self.message = value,
            name if LEFT_OUT.contains(&name) => {}
            _ if value == "[]" => {}
            name => self.fields.push(format!("{name}={}", short_digest(&value))),
        }
    }
}

/// `sha256:` and 12 hex digits, enough to tell versions apart.
fn short_digest(value: &str) -> &str {
    match value.strip_prefix("sha256:") {
        Some(hex) if hex.len() > 12 => &value[..7 + 12],
        _ => value,
    }
}
