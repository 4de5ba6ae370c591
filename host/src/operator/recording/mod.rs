//! Recorded reconciles: per module, the inputs and answers of its recent
//! reconciles, in a store bounded by `--record-budget` (`recorder.rs`),
//! Secret values redacted at recording (`redact.rs`), exported as
//! `wasm-operator test` cases (`export.rs`) on the metrics address's
//! `/records` route (`endpoints/http.rs`) for `wasm-operator record`.

pub mod export;
pub mod recorder;
pub mod redact;
