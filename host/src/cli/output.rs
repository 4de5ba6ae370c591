//! What a command prints, and how it ends.

use std::process::ExitCode;

use anyhow::{Context, Result};

/// Prints an error the way both binaries do, and maps it to the exit code.
pub fn exit(result: Result<ExitCode>) -> ExitCode {
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

/// Writes to stdout; a reader that went away (`| head`) is not an error.
pub fn print_out(text: &str) -> Result<ExitCode> {
    use std::io::Write;
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Err(error) if error.kind() != std::io::ErrorKind::BrokenPipe => Err(error).context("writing to stdout"),
        _ => Ok(ExitCode::SUCCESS),
    }
}
