//! Lines for the operator's log, through the contract's `log` import: the
//! host emits them with the module's name and the parent being reconciled
//! (64 lines of 4 KiB per call at most). Natively (a module's unit tests)
//! they go to standard error. Without the `log` feature they are dropped
//! and the module imports nothing.

/// How important a line is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    Error,
    Warn,
    Info,
    Debug,
}

pub fn error(message: impl AsRef<str>) {
    write(Level::Error, message.as_ref());
}

pub fn warn(message: impl AsRef<str>) {
    write(Level::Warn, message.as_ref());
}

pub fn info(message: impl AsRef<str>) {
    write(Level::Info, message.as_ref());
}

pub fn debug(message: impl AsRef<str>) {
    write(Level::Debug, message.as_ref());
}

#[cfg(all(target_arch = "wasm32", feature = "log"))]
pub fn write(level: Level, message: &str) {
    use crate::bindings::wasm_operator::controller::log::{Level as Wit, write};
    let level = match level {
        Level::Error => Wit::Error,
        Level::Warn => Wit::Warn,
        Level::Info => Wit::Info,
        Level::Debug => Wit::Debug,
    };
    write(level, message);
}

#[cfg(all(target_arch = "wasm32", not(feature = "log")))]
pub fn write(_level: Level, _message: &str) {}

#[cfg(not(target_arch = "wasm32"))]
pub fn write(level: Level, message: &str) {
    eprintln!("{level:?}: {message}");
}

/// Reports a panic's message through the log before the module traps, so
/// the host shows it instead of "unreachable executed". Installed by
/// `export_reconciler!` on the first call.
pub fn install_panic_hook() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        std::panic::set_hook(Box::new(|info| write(Level::Error, &info.to_string())));
    });
}
