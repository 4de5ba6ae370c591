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
