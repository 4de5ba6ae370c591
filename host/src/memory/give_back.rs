//! What a long-running operator gives back to the system every 30 s, so
//! that its resident memory follows what it uses now rather than the most
//! it ever touched:
//! - the heap's free pages: glibc returns only the top of its heap by
//!   itself, so after a burst (a Secret rotation rolling hundreds of
//!   Deployments at once, a swap's plan) the freed middle stayed resident
//!   for good, ~6-10 MiB at a thousand parents (in a soak: a step up
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

/// Gives back at once, before it returns (what only the start touched of
/// the binary, argument parsing, TLS setup, the first lists, need not stay
/// resident: called before the operator says it is ready, so what it holds
/// before its first parent is what serving needs), then every period in the
/// future it returns, which runs until dropped.
pub fn give_back_unused_memory() -> impl Future<Output = ()> {
    let mut warned = false;
    give_back(&mut warned);
    async move {
        let mut every = tokio::time::interval_at(tokio::time::Instant::now() + EVERY, EVERY);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            every.tick().await;
            give_back(&mut warned);
        }
    }
}

/// One pass: the heap's free pages, if enough, and the binary's.
fn give_back(warned: &mut bool) {
    if crate::memory::allocator::heap_use().is_some_and(|heap| heap.free >= TRIM_WHEN_FREE_BYTES) {
        crate::memory::allocator::trim();
    }
    match crate::memory::resident_pages::release_binary() {
        Ok(bytes) => tracing::debug!(kib = bytes / 1024, "released the binary's pages"),
        // Once: it would fail the same way every period.
        Err(error) if !*warned => {
            *warned = true;
            tracing::warn!(%error, "could not release the binary's pages");
        }
        Err(_) => {}
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use crate::memory::resident_pages::tests::{BINARY_PAGES, binary_resident_kib};

    /// The operator says it is ready right after this call: what only its
    /// start touched must be gone by then, not whenever the loop first runs.
    #[test]
    fn the_first_pass_is_done_when_the_loop_is_returned() {
        let _alone = BINARY_PAGES.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let before = binary_resident_kib(true);
        assert!(before >= 1024, "every page of the binary's code and read-only data read: {before} KiB");
        let giving_back = super::give_back_unused_memory();
        let after = binary_resident_kib(false);
        drop(giving_back);
        assert!(after < before / 4, "resident KiB of the binary: {before} read, {after} once the loop is returned");
    }
}
