//! The lines a module writes through the contract's `log` import (1.1):
//! kept per call, bounded, and handed to whoever made the call, which emits
//! them with the parent's name. The last `error` line before a trap is the
//! trap's message: the SDKs' panic hooks write the panic there.

use super::bindings::wasm_operator::controller::log::Level;

/// Lines kept per call; more are counted and dropped.
pub const MAX_LINES: usize = 64;
/// Bytes kept per line; a longer one is cut (at a character boundary).
pub const MAX_LINE_BYTES: usize = 4096;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogLevel {
    Error,
    Warn,
    Info,
    Debug,
}

impl LogLevel {
    pub fn as_str(self) -> &'static str {
        match self {
            LogLevel::Error => "error",
            LogLevel::Warn => "warn",
            LogLevel::Info => "info",
            LogLevel::Debug => "debug",
        }
    }
}

impl From<Level> for LogLevel {
    fn from(level: Level) -> Self {
        match level {
            Level::Error => LogLevel::Error,
            Level::Warn => LogLevel::Warn,
            Level::Info => LogLevel::Info,
            Level::Debug => LogLevel::Debug,
        }
    }
}

/// One line a module wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogLine {
    pub level: LogLevel,
    pub message: String,
}

/// What one call wrote: at most [`MAX_LINES`] lines, and how many more
/// were dropped.
#[derive(Debug, Default)]
pub struct ModuleLog {
    pub lines: Vec<LogLine>,
    pub dropped: usize,
    /// The last `error` line, kept even when the lines overflowed: a
    /// panic's message, if the call then traps.
    last_error: Option<String>,
}

impl ModuleLog {
    pub fn write(&mut self, level: LogLevel, message: String) {
        let message = cut(message, MAX_LINE_BYTES);
        if level == LogLevel::Error {
            self.last_error = Some(message.clone());
        }
        if self.lines.len() < MAX_LINES {
            self.lines.push(LogLine { level, message });
        } else {
            self.dropped += 1;
        }
    }

    pub fn last_error(&self) -> Option<&str> {
        self.last_error.as_deref()
    }

    pub fn is_empty(&self) -> bool {
        self.lines.is_empty() && self.dropped == 0
    }
}

/// `text` cut to at most `max` bytes, at a character boundary, marked
/// (a module's log line; an event's note).
pub fn cut(mut text: String, max: usize) -> String {
    if text.len() <= max {
        return text;
    }
    let mut end = max.saturating_sub(3);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    text.push_str("...");
    text
}

impl ModuleLog {
    /// Emits every line in the operator's log, under the target
    /// `wasm_operator::module`, with the module's name and the parent
    /// (`namespace/name`) it was called for, if any.
    pub fn emit(&self, module: &str, parent: Option<&str>) {
        const TARGET: &str = "wasm_operator::module";
        let parent = parent.unwrap_or("");
        for line in &self.lines {
            let message = line.message.as_str();
            match line.level {
                LogLevel::Error => tracing::error!(target: TARGET, module, parent, "{message}"),
                LogLevel::Warn => tracing::warn!(target: TARGET, module, parent, "{message}"),
                LogLevel::Info => tracing::info!(target: TARGET, module, parent, "{message}"),
                LogLevel::Debug => tracing::debug!(target: TARGET, module, parent, "{message}"),
            }
        }
        if self.dropped > 0 {
            tracing::warn!(target: TARGET, module, parent, dropped = self.dropped, "the module wrote more than {MAX_LINES} lines in one call; the rest were dropped");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_bounded_in_number_and_length() {
        let mut log = ModuleLog::default();
        for i in 0..MAX_LINES + 5 {
            log.write(LogLevel::Info, format!("line {i}"));
        }
        assert_eq!(log.lines.len(), MAX_LINES);
        assert_eq!(log.dropped, 5);
        log.write(LogLevel::Error, "é".repeat(MAX_LINE_BYTES));
        let last = log.last_error().expect("an error line is kept past the bound");
        assert!(last.len() <= MAX_LINE_BYTES && last.ends_with("..."), "{}", last.len());
    }

    #[test]
    fn long_text_is_cut_on_a_character_boundary() {
        let cut_text = cut("é".repeat(600), 1000);
        assert!(cut_text.len() <= 1000);
        assert!(cut_text.ends_with("..."));
        assert_eq!(cut("short".into(), 1000), "short");
    }

    #[test]
    fn the_last_error_line_is_remembered() {
        let mut log = ModuleLog::default();
        assert!(log.is_empty());
        log.write(LogLevel::Error, "first".into());
        log.write(LogLevel::Warn, "a warning".into());
        log.write(LogLevel::Error, "panicked at src/lib.rs:3:5: boom".into());
        assert_eq!(log.last_error(), Some("panicked at src/lib.rs:3:5: boom"));
    }
}
