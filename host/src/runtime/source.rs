//! Where a module comes from at run time: a file, watched. A change is
//! noticed by polling the file's size, modification time and inode (an
//! atomic rename changes the inode, a rewrite the others), and reported
//! once the file has stopped changing, so a half-written file is not read.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// What tells one version of a file from another without reading it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileStamp {
    len: u64,
    modified: Option<SystemTime>,
    inode: u64,
}

impl FileStamp {
    pub fn of(path: &Path) -> Option<Self> {
        use std::os::unix::fs::MetadataExt;
        let metadata = std::fs::metadata(path).ok()?;
        Some(Self { len: metadata.len(), modified: metadata.modified().ok(), inode: metadata.ino() })
    }
}

/// A watched module file.
pub struct WatchedFile {
    pub path: PathBuf,
    last: Option<FileStamp>,
    /// How long the file must stay unchanged before it is read.
    settle: Duration,
}

impl WatchedFile {
    /// Starts from the file as it is now (the version already loaded).
    pub fn new(path: PathBuf, settle: Duration) -> Self {
        let last = FileStamp::of(&path);
        Self { path, last, settle }
    }

    /// The file's bytes when it changed since the last call and has settled;
    /// none otherwise (also while it is missing: a module is never unloaded
    /// because its file went away).
    pub async fn changed(&mut self) -> Option<std::io::Result<Vec<u8>>> {
        let now = FileStamp::of(&self.path)?;
        if self.last.as_ref() == Some(&now) {
            return None;
        }
        tokio::time::sleep(self.settle).await;
        if FileStamp::of(&self.path).as_ref() != Some(&now) {
            // Still being written: look again next time.
            return None;
        }
        self.last = Some(now);
        Some(std::fs::read(&self.path))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_replaced_file_is_reported_once_and_a_missing_one_never() {
        let dir = std::env::temp_dir().join(format!("watched-file-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a temp dir");
        let path = dir.join("module.wasm");
        std::fs::write(&path, b"one").expect("writing");
        let mut watched = WatchedFile::new(path.clone(), Duration::from_millis(10));
        assert!(watched.changed().await.is_none(), "unchanged since loaded");

        // An atomic replace: write beside, rename over.
        let beside = dir.join("module.wasm.new");
        std::fs::write(&beside, b"two, longer").expect("writing");
        std::fs::rename(&beside, &path).expect("renaming");
        let bytes = watched.changed().await.expect("a change").expect("readable");
        assert_eq!(bytes, b"two, longer");
        assert!(watched.changed().await.is_none(), "reported once");

        std::fs::remove_file(&path).expect("removing");
        assert!(watched.changed().await.is_none(), "a missing file is no change");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
