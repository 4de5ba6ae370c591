//! The pages of the binary that only starting up touched stay mapped in a
//! process until it exits: argument parsing, the client's TLS setup, the
//! manifest and CRD parsing, the first lists, and every function within
//! the kernel's fault-around of those (it maps 64 KiB around each page a
//! fault reads). For an operator that then idles on a few watches, they
//! are most of its resident memory. Once it has started, it unmaps them
//! (`MADV_DONTNEED` on the binary's read-only mappings); code it runs
//! afterwards is mapped again from the page cache on first use, a minor
//! fault, no disk read while the file stays cached.
//!
//! Only mappings nothing has written are released: a read-only mapping
//! whose pages were relocated at load (RELRO) holds private copies, which
//! `MADV_DONTNEED` would turn back into the file's bytes.

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
pub fn release() -> std::io::Result<u64> {
    #[cfg(target_os = "linux")]
    {
        let binary = binary()?;
        let smaps = std::fs::read_to_string("/proc/self/smaps")?;
        let mut released = 0;
        for mapping in releasable(&smaps, &binary) {
            // SAFETY: the range is one whole mapping of this process's own
            // binary, read-only and never written (no private page in it):
            // dropping its pages changes no byte anyone reads, they are
            // mapped again from the file on the next access.
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
    Ok(0)
}

/// The binary's read-only mappings in `smaps` with no private (written)
/// page: its code and read-only data, never its relocated or writable data.
fn releasable(smaps: &str, binary: &Path) -> Vec<Mapping> {
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
            let (start, end, readonly, path) = header;
            let ours = path.is_some_and(|p| Path::new(p) == binary);
            current = Some((Mapping { start, end, resident_kib: 0 }, ours && readonly));
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

/// `start-end perms offset dev inode [path]`: the range, whether it is
/// read-only, and the path.
fn mapping_header(line: &str) -> Option<(usize, usize, bool, Option<&str>)> {
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
    Some((start, end, readonly, path))
}

/// This process's binary.
fn binary() -> std::io::Result<PathBuf> {
    std::fs::read_link("/proc/self/exe")
}

#[cfg(test)]
mod tests {
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
        let found = releasable(SMAPS, Path::new("/opt/op"));
        assert_eq!(
            found,
            [
                Mapping { start: 0x55f4333dd000, end: 0x55f433ffb000, resident_kib: 2956 },
                Mapping { start: 0x55f433ffb000, end: 0x55f4358cc000, resident_kib: 13124 },
            ],
            "not the relocated read-only data, the writable data, libc or anonymous memory"
        );
        assert!(releasable(SMAPS, Path::new("/opt/other")).is_empty());
    }

    /// This test binary's own pages: released, then mapped again as it runs on.
    #[cfg(target_os = "linux")]
    #[test]
    fn releasing_drops_the_binarys_resident_pages_and_the_process_runs_on() {
        let binary = binary().expect("/proc/self/exe");
        let resident = || {
            let smaps = std::fs::read_to_string("/proc/self/smaps").expect("smaps");
            releasable(&smaps, &binary).iter().map(|m| m.resident_kib).sum::<u64>()
        };
        let before = resident();
        assert!(before > 0, "a running binary has resident code");
        let released = release().expect("madvise");
        assert!(released >= before * 1024 / 2, "released {released} of {before} KiB");
        let after = resident();
        assert!(after < before / 2, "resident KiB of the binary: {before} before, {after} after");
        // Code and data read after the release still work (mapped again).
        let text = serde_json::to_string(&serde_json::json!({"still": ["running", 1]})).expect("serializes");
        assert_eq!(text, r#"{"still":["running",1]}"#);
    }
}
