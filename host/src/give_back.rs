//! What a long-running operator gives back to the system every 30 s, so
//! that its resident memory follows what it uses now rather than the most
//! it ever touched:
//! - the heap's free pages: glibc returns only the top of its heap by
//!   itself, so after a burst (a Secret rotation rolling hundreds of
//!   Deployments at once, a swap's plan) the freed middle stayed resident
//!   for good, ~6-10 MiB at a thousand parents (issue 22's soak: a step up
//!   after each burst, then a plateau);
//! - the binary's pages that rare work mapped: a hot swap, a re-list after
//!   a reconnect or a rollback runs code the steady reconcile does not, and
//!   its pages (with the kernel's 64 KiB of fault-around each) stayed
//!   mapped; in a soak a leader's file-backed memory rose 2.7 MiB with its
//!   first swap and stayed there. The code the operator runs is mapped
//!   again from the page cache on its next use (minor faults, a few
//!   hundred a period).

use std::time::Duration;

/// How often; and how much of the heap must be free before a trim is worth
/// its walk of the free lists.
const EVERY: Duration = Duration::from_secs(30);
const TRIM_WHEN_FREE_BYTES: u64 = 1 << 20;

/// Runs until dropped: at once (what only the start touched of the binary,
/// argument parsing, TLS setup, the first lists, need not stay resident),
/// then every period.
pub async fn give_back_unused_memory() {
    let mut every = tokio::time::interval(EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut warned = false;
    loop {
        every.tick().await;
        if crate::allocator::heap_use().is_some_and(|heap| heap.free >= TRIM_WHEN_FREE_BYTES) {
            crate::allocator::trim();
        }
        match crate::resident_pages::release_binary() {
            Ok(bytes) => tracing::debug!(kib = bytes / 1024, "released the binary's pages"),
            // Once: it would fail the same way every period.
            Err(error) if !warned => {
                warned = true;
                tracing::warn!(%error, "could not release the binary's pages");
            }
            Err(_) => {}
        }
    }
}
