//! How the host keeps its own memory small, in one place: glibc's malloc
//! settings (`allocator`), pages mapped from files released when no longer
//! needed (`resident_pages`), and what a long-running operator gives back
//! every 30 s (`give_back`). The layout of code in the binary and in the
//! Memcached module (the code-order lists, `host/link/`, `guest/link/`, and
//! `authoring/function_order.rs`) and the module calls' instance pool
//! (`runtime/engine.rs`) are the other half: each says why it is where it is.

pub mod allocator;
pub mod give_back;
pub mod resident_pages;
