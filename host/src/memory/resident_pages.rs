//! Releasing pages a process maps from files and no longer needs resident.
//! The kernel maps them again from the page cache on the next access (a
//! minor fault, no disk read while the file stays cached), so releasing
//! changes no byte anyone reads; it only stops counting them as the
//! process's memory.
//!
//! Two kinds of such pages:
//! - the binary's pages that only starting up touched: argument parsing,
//!   the client's TLS setup, the manifest and CRD parsing, the first lists,
//!   and every function within the kernel's fault-around of those (it maps
//!   64 KiB around each page a fault reads). For an operator that then
//!   idles on a few watches, they are most of its resident memory;
//! - the compiled code of a module version held for a quick swap back or
//!   rollback but not serving: mapped from its precompiled file on disk,
//!   its pages stay resident from when it last ran, ~7 MiB for the
//!   Memcached module; a soak that alternates versions held each one's.
//!
//! Only mappings nothing has written are released: a read-only mapping
//! whose pages were relocated at load (RELRO) holds private copies, which
//! `MADV_DONTNEED` would turn back into the file's bytes.

use std::ops::Range;
use std::path::{Path, PathBuf};

/// A mapping of the binary that may be released, and what of it is resident.
#[derive(Debug, PartialEq, Eq)]
struct Mapping {
    start: usize,
    end: usize,
    resident_kib: u64,
}

/// Unmaps the pages of this process's own binary that only its start
/// touched; returns how many bytes were resident in what it released.
/// Elsewhere than Linux it does nothing.
pub fn release_binary() -> std::io::Result<u64> {
    let binary = binary()?;
    release(|mapping| mapping.path.is_some_and(|p| Path::new(p) == binary))
}

/// Unmaps the resident pages of the file mappings within any of `ranges`
/// (compiled modules' images), reading the process's mappings once;
/// anonymous memory there is left as it is. Returns how many bytes were
/// resident in what it released.
pub fn release_within(ranges: &[Range<usize>]) -> std::io::Result<u64> {
    if ranges.is_empty() {
        return Ok(0);
    }
    release(|mapping| within(mapping, ranges))
}

/// Bytes resident now in the file mappings `release_within(ranges)` would
/// release.
pub fn resident_within(ranges: &[Range<usize>]) -> std::io::Result<u64> {
    let smaps = std::fs::read_to_string("/proc/self/smaps")?;
    Ok(releasable(&smaps, |mapping| within(mapping, ranges)).iter().map(|m| m.resident_kib * 1024).sum())
}

/// A file mapping inside one of `ranges`, widened to whole pages.
fn within(mapping: &Header<'_>, ranges: &[Range<usize>]) -> bool {
    mapping.path.is_some()
        && ranges
            .iter()
            .any(|range| mapping.start >= range.start & !(PAGE - 1) && mapping.end <= range.end.div_ceil(PAGE) * PAGE)
}

/// Pages are at least this size; ranges are widened to whole pages.
const PAGE: usize = 4096;

fn release(which: impl Fn(&Header<'_>) -> bool) -> std::io::Result<u64> {
    #[cfg(target_os = "linux")]
    {
        let smaps = std::fs::read_to_string("/proc/self/smaps")?;
        let mut released = 0;
        for mapping in releasable(&smaps, which) {
            // SAFETY: the range is one whole file mapping of this process,
            // read-only and never written (no private page in it): dropping
            // its pages changes no byte anyone reads, they are mapped again
            // from the file on the next access.
            let result = unsafe {
                libc::madvise(mapping.start as *mut libc::c_void, mapping.end - mapping.start, libc::MADV_DONTNEED)
            };
            if result != 0 {
                return Err(std::io::Error::last_os_error());
            }
            released += mapping.resident_kib * 1024;
        }
        Ok(released)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = which;
        Ok(0)
    }
}

/// The read-only private mappings in `smaps` that `which` picks and that
/// hold no private (written) page: code and read-only data, never
/// relocated or writable data.
fn releasable(smaps: &str, which: impl Fn(&Header<'_>) -> bool) -> Vec<Mapping> {
    let mut found = Vec::new();
    let mut current: Option<(Mapping, bool)> = None;
    let mut finish = |current: Option<(Mapping, bool)>| {
        if let Some((mapping, true)) = current {
            found.push(mapping);
        }
    };
    for line in smaps.lines() {
        if let Some(header) = mapping_header(line) {
            finish(current.take());
            let picked = header.readonly && which(&header);
            current = Some((Mapping { start: header.start, end: header.end, resident_kib: 0 }, picked));
            continue;
        }
        let Some((mapping, keep)) = current.as_mut() else { continue };
        let field = |name: &str| {
            line.strip_prefix(name)
                .and_then(|rest| rest.trim().strip_suffix("kB"))
                .and_then(|kib| kib.trim().parse::<u64>().ok())
        };
        if let Some(kib) = field("Rss:") {
            mapping.resident_kib = kib;
        }
        // A page written in a private mapping is a private copy, counted as
        // anonymous. (Private_Dirty also counts the file's own dirty pages,
        // a binary just written and not yet on disk: not a copy.)
        if field("Anonymous:").is_some_and(|kib| kib > 0) {
            *keep = false;
        }
    }
    finish(current);
    found
}

/// A mapping as its smaps header line describes it.
struct Header<'a> {
    start: usize,
    end: usize,
    /// Readable, not writable, private.
    readonly: bool,
    path: Option<&'a str>,
}

/// `start-end perms offset dev inode [path]`.
fn mapping_header(line: &str) -> Option<Header<'_>> {
    let mut fields = line.split_whitespace();
    let (start, end) = fields.next()?.split_once('-')?;
    let start = usize::from_str_radix(start, 16).ok()?;
    let end = usize::from_str_radix(end, 16).ok()?;
    let perms = fields.next()?;
    if perms.len() != 4 {
        return None;
    }
    let readonly = perms.starts_with('r') && !perms.contains('w') && perms.ends_with('p');
    let (_offset, _device, _inode) = (fields.next()?, fields.next()?, fields.next()?);
    // A path with spaces is rejoined; "(deleted)" marks a replaced binary.
    let path = line.splitn(6, char::is_whitespace).nth(5).map(str::trim).filter(|p| !p.is_empty());
    Some(Header { start, end, readonly, path })
}

/// This process's binary.
fn binary() -> std::io::Result<PathBuf> {
    std::fs::read_link("/proc/self/exe")
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    const SMAPS: &str = "\
55f4333dd000-55f433ffb000 r--p 00000000 08:01 1234 /opt/op
Size:              12408 kB
Rss:                2956 kB
Private_Dirty:         0 kB
Anonymous:             0 kB
55f433ffb000-55f4358cc000 r-xp 00c1e000 08:01 1234 /opt/op
Rss:               13124 kB
Private_Dirty:         0 kB
Anonymous:             0 kB
55f4358cc000-55f4359c6000 r--p 024ef000 08:01 1234 /opt/op
Rss:                1000 kB
Private_Dirty:      1000 kB
Anonymous:          1000 kB
55f4359c6000-55f4359cc000 rw-p 025e9000 08:01 1234 /opt/op
Rss:                  24 kB
Anonymous:            24 kB
7f0000000000-7f0000100000 r-xp 00000000 08:01 99 /usr/lib/libc.so.6
Rss:                1552 kB
Anonymous:             0 kB
7f0000200000-7f0000300000 rw-p 00000000 00:00 0
Rss:                 100 kB
Anonymous:           100 kB
";

    #[test]
    fn only_the_binarys_unwritten_read_only_mappings_are_released() {
        let binary = |path: &'static str| move |h: &Header<'_>| h.path == Some(path);
        let found = releasable(SMAPS, binary("/opt/op"));
        assert_eq!(
            found,
            [
                Mapping { start: 0x55f4333dd000, end: 0x55f433ffb000, resident_kib: 2956 },
                Mapping { start: 0x55f433ffb000, end: 0x55f4358cc000, resident_kib: 13124 },
            ],
            "not the relocated read-only data, the writable data, libc or anonymous memory"
        );
        assert!(releasable(SMAPS, binary("/opt/other")).is_empty());
    }

    /// Held by a test that releases this binary's pages or counts them, so
    /// that another's release does not land between its two counts.
    pub(crate) static BINARY_PAGES: std::sync::Mutex<()> = std::sync::Mutex::new(());

    /// The resident KiB of this test binary's releasable mappings; with
    /// `touch_all`, after reading a byte of each of their pages.
    pub(crate) fn binary_resident_kib(touch_all: bool) -> u64 {
        let binary = binary().expect("/proc/self/exe");
        let smaps = std::fs::read_to_string("/proc/self/smaps").expect("smaps");
        let mappings = releasable(&smaps, |h| h.path.is_some_and(|p| Path::new(p) == binary));
        if !touch_all {
            return mappings.iter().map(|m| m.resident_kib).sum();
        }
        for mapping in &mappings {
            for page in (mapping.start..mapping.end).step_by(PAGE) {
                // SAFETY: a readable mapping of this process, read in place.
                unsafe { std::ptr::read_volatile(page as *const u8) };
            }
        }
        binary_resident_kib(false)
    }

    /// This test binary's own pages: released, then mapped again as it runs on.
    #[cfg(target_os = "linux")]
    #[test]
    fn releasing_drops_the_binarys_resident_pages_and_the_process_runs_on() {
        let _alone = BINARY_PAGES.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let resident = || binary_resident_kib(false);
        // The other tests of this binary run on other threads meanwhile and
        // fault some pages back in before the second count, the more so on
        // a busy machine: a release that works halves the count at least
        // once in a few tries, one that does not never does.
        let mut counts = Vec::new();
        for _ in 0..5 {
            let before = resident();
            assert!(before > 0, "a running binary has resident code");
            let released = release_binary().expect("madvise");
            assert!(released >= before * 1024 / 2, "released {released} of {before} KiB");
            let after = resident();
            counts.push((before, after));
            if after < before / 2 {
                break;
            }
        }
        assert!(
            counts.iter().any(|(before, after)| after < &(before / 2)),
            "resident KiB of the binary (before, after), each try: {counts:?}"
        );
        // Code and data read after the release still work (mapped again).
        let text = serde_json::to_string(&serde_json::json!({"still": ["running", 1]})).expect("serializes");
        assert_eq!(text, r#"{"still":["running",1]}"#);
    }

    /// A file mapped as wasmtime maps a precompiled module: its pages
    /// released, its bytes still read; anonymous memory in the range kept.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_file_mapping_within_a_range_is_released_and_still_reads() {
        use std::io::Write;

        const LEN: usize = 64 * PAGE;
        let path = std::env::temp_dir().join(format!("resident-pages-{}", std::process::id()));
        let mut file = std::fs::File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .expect("a temporary file");
        std::fs::remove_file(&path).expect("unlinked; the open file stays");
        let bytes: Vec<u8> = (0..LEN).map(|i| (i % 251) as u8).collect();
        file.write_all(&bytes).expect("written");
        let map = |flags: libc::c_int, fd: libc::c_int| {
            // SAFETY: a new mapping; nothing else refers to its address.
            let at = unsafe { libc::mmap(std::ptr::null_mut(), LEN, libc::PROT_READ, flags, fd, 0) };
            assert_ne!(at, libc::MAP_FAILED, "mmap");
            at as usize
        };
        let mapped = map(libc::MAP_PRIVATE, std::os::fd::AsRawFd::as_raw_fd(&file));
        // SAFETY: the mapping is LEN bytes long and lives until the test ends.
        let view = unsafe { std::slice::from_raw_parts(mapped as *const u8, LEN) };
        let resident = || {
            let smaps = std::fs::read_to_string("/proc/self/smaps").expect("smaps");
            releasable(&smaps, |h| h.start == mapped).iter().map(|m| m.resident_kib).sum::<u64>()
        };
        assert_eq!(view.iter().map(|b| u64::from(*b)).sum::<u64>(), bytes.iter().map(|b| u64::from(*b)).sum::<u64>());
        let before = resident();
        assert!(before >= 128, "the file's pages are resident once read: {before} KiB");

        let released = release_within(std::slice::from_ref(&(mapped + 10..mapped + LEN - 10))).expect("madvise");
        assert_eq!(released, before * 1024);
        assert_eq!(resident(), 0, "nothing of the file stays resident");
        assert_eq!(view, &bytes[..], "and every byte still reads");

        // An anonymous, written mapping in a range is never released.
        let anonymous = map(libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1);
        // SAFETY: make it writable, then write it: it is ours, LEN long.
        unsafe {
            assert_eq!(libc::mprotect(anonymous as *mut libc::c_void, LEN, libc::PROT_READ | libc::PROT_WRITE), 0);
            std::ptr::write_bytes(anonymous as *mut u8, 7, LEN);
            assert_eq!(libc::mprotect(anonymous as *mut libc::c_void, LEN, libc::PROT_READ), 0);
        }
        assert_eq!(release_within(std::slice::from_ref(&(anonymous..anonymous + LEN))).expect("madvise"), 0);
        // SAFETY: as above.
        let written = unsafe { std::slice::from_raw_parts(anonymous as *const u8, LEN) };
        assert!(written.iter().all(|b| *b == 7), "written memory is kept");
    }
}
