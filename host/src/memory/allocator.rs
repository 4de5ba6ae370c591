//! glibc malloc settings for a long-running operator, applied before any
//! thread starts. By default glibc gives each thread its own arena and keeps
//! freed memory mapped; with the watch streams, the runtime's workers and
//! module calls on different threads, the process then stayed ~15% above
//! its live heap at a thousand parents. One arena and fixed trim and mmap
//! thresholds give memory back as the initial lists and bursts of events
//! are freed. A setting given in the environment (`MALLOC_ARENA_MAX`,
//! `MALLOC_TRIM_THRESHOLD_`, `MALLOC_MMAP_THRESHOLD_`) is left as given.

/// Applies the settings; elsewhere than glibc on Linux it does nothing.
pub fn tune_for_a_long_running_process() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // Large enough that ordinary objects stay on the heap, small enough
        // that a list response's buffers go back to the system at once.
        const THRESHOLD_BYTES: libc::c_int = 128 << 10;
        let already_set = |name: &str| std::env::var_os(name).is_some();
        // SAFETY: mallopt only changes allocator parameters; it is called
        // before this process starts any thread.
        unsafe {
            if !already_set("MALLOC_ARENA_MAX") {
                libc::mallopt(libc::M_ARENA_MAX, 1);
            }
            if !already_set("MALLOC_TRIM_THRESHOLD_") {
                libc::mallopt(libc::M_TRIM_THRESHOLD, THRESHOLD_BYTES);
            }
            if !already_set("MALLOC_MMAP_THRESHOLD_") {
                libc::mallopt(libc::M_MMAP_THRESHOLD, THRESHOLD_BYTES);
            }
        }
    }
}

/// What the allocator holds: bytes handed out and not freed, and bytes
/// free but still held from the system (which count as resident once
/// touched: a large `free` beside a steady `in_use` is fragmentation, not
/// a leak).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeapUse {
    pub in_use: u64,
    pub free: u64,
}

/// The allocator's figures now; `None` elsewhere than glibc on Linux.
pub fn heap_use() -> Option<HeapUse> {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: mallinfo2 takes the allocator's own lock and returns a copy.
        let info = unsafe { libc::mallinfo2() };
        // uordblks: in use from the heap; hblkhd: in use in mmap'd chunks;
        // fordblks: free chunks the heap keeps.
        Some(HeapUse { in_use: (info.uordblks + info.hblkhd) as u64, free: info.fordblks as u64 })
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    None
}

/// Unmaps the whole free pages of the heap; elsewhere than glibc on Linux
/// it does nothing.
pub fn trim() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim takes the allocator's own lock; it only releases
    // pages of chunks that are free.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The two tests measure the whole process: one at a time.
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn heap_use_counts_what_is_allocated() {
        let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        // 64 MiB in small blocks; other tests running beside this one
        // allocate far less than the half of it the checks leave as margin.
        const HALF: u64 = 32 << 20;
        let before = heap_use().expect("glibc");
        let held: Vec<Vec<u8>> = (0..16_384).map(|i| vec![i as u8; 4096]).collect();
        let during = heap_use().expect("glibc");
        assert!(during.in_use >= before.in_use + HALF, "{before:?} -> {during:?}");
        drop(held);
        let after = heap_use().expect("glibc");
        assert!(after.in_use + HALF <= during.in_use, "{during:?} -> {after:?}");
    }

    /// Resident anonymous KiB of this process (a test thread allocates in
    /// an arena of its own, not in `[heap]`).
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    fn anonymous_kib() -> u64 {
        let status = std::fs::read_to_string("/proc/self/status").expect("status");
        let line = status.lines().find_map(|l| l.strip_prefix("RssAnon:")).expect("RssAnon");
        line.trim().trim_end_matches("kB").trim().parse().expect("a size")
    }

    /// Memory freed in the middle of the heap (a later allocation holds its
    /// top) stays resident until a trim, which gives it back.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn a_trim_gives_back_what_was_freed_below_the_heaps_top() {
        let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        // Small blocks (on the heap, not mmap'd), then one kept above them.
        let freed: Vec<Vec<u8>> = (0..8_192).map(|i| vec![i as u8; 4000]).collect();
        let kept = vec![1u8; 4000];
        let before_free = anonymous_kib();
        drop(freed);
        let after_free = anonymous_kib();
        trim();
        let after_trim = anonymous_kib();
        assert_eq!(kept[0], 1);
        // 32 MiB were freed: at least half must go back (other tests share
        // the heap and may hold or free some meanwhile).
        assert!(
            after_trim + 16 * 1024 <= after_free.max(before_free),
            "anonymous KiB: {before_free} with the blocks, {after_free} freed, {after_trim} trimmed"
        );
    }
}
