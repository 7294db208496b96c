//! The embedded store's write-ahead log as a file to fsync: what makes a group's commits
//! durable (see `embedded_store`).

use crate::embedded_store::Flush;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

/// The database's write-ahead log, `<database>-wal`: where every commit lands first.
pub struct WalFile {
    path: PathBuf,
    dir: PathBuf,
    /// The open log and its inode, so that a log replaced under the same name is noticed.
    open: Option<(File, u64)>,
}

impl WalFile {
    pub fn new(database: &Path) -> Self {
        let mut name = database.as_os_str().to_owned();
        name.push("-wal");
        Self {
            path: PathBuf::from(name),
            dir: database
                .parent()
                .map_or_else(|| PathBuf::from("."), Path::to_path_buf),
            open: None,
        }
    }
}

impl Flush for WalFile {
    fn flush(&mut self) -> io::Result<()> {
        let inode = inode_of(&self.path)?;
        if let Some((file, open_inode)) = &self.open
            && *open_inode == inode
        {
            return file.sync_data();
        }
        // A log this engine has not synced yet: its directory entry must be durable too.
        let file = File::open(&self.path)?;
        file.sync_data()?;
        File::open(&self.dir)?.sync_all()?;
        self.open = Some((file, inode));
        Ok(())
    }
}

/// The inode number of the file at `path`, asking for nothing else.
///
/// Why not `std::fs::metadata`: it asks for every field, the times too, and on Linux 6.13 and
/// later (multigrain timestamps) a file whose times were read gets a fine-grained new time at its
/// next write, so that a change is seen. Every write to the log then dirtied its inode, and every
/// fdatasync (ext4) wrote the inode's block as well as the data: a second device write per
/// flush. Asked for its inode number alone, the kernel leaves the times as they were.
#[cfg(target_os = "linux")]
fn inode_of(path: &Path) -> io::Result<u64> {
    use std::os::unix::ffi::OsStrExt;
    let name = std::ffi::CString::new(path.as_os_str().as_bytes())?;
    // SAFETY: statx(2) with a NUL-terminated path and a buffer of the size it writes.
    let mut buffer: libc::statx = unsafe { std::mem::zeroed() };
    let result = unsafe {
        libc::statx(
            libc::AT_FDCWD,
            name.as_ptr(),
            libc::AT_STATX_SYNC_AS_STAT,
            libc::STATX_INO,
            &raw mut buffer,
        )
    };
    if result != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(buffer.stx_ino)
}

/// The inode number of the file at `path` (elsewhere than Linux, asking for all of it).
#[cfg(not(target_os = "linux"))]
fn inode_of(path: &Path) -> io::Result<u64> {
    use std::os::unix::fs::MetadataExt;
    Ok(std::fs::metadata(path)?.ino())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn the_inode_is_the_files_and_a_missing_file_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"x").unwrap();
        assert_eq!(
            inode_of(&path).unwrap(),
            std::fs::metadata(&path).unwrap().ino()
        );
        let missing = inode_of(&dir.path().join("missing")).unwrap_err();
        assert_eq!(missing.kind(), io::ErrorKind::NotFound);
    }

    #[test]
    fn a_log_replaced_under_its_name_is_opened_again() {
        let dir = tempfile::tempdir().unwrap();
        let database = dir.path().join("db");
        let mut wal = WalFile::new(&database);
        let log = dir.path().join("db-wal");
        std::fs::write(&log, b"first").unwrap();
        wal.flush().unwrap();
        let first = wal.open.as_ref().unwrap().1;
        wal.flush().unwrap();
        assert_eq!(
            wal.open.as_ref().unwrap().1,
            first,
            "the same log is kept open"
        );
        let other = dir.path().join("other");
        std::fs::write(&other, b"second").unwrap();
        std::fs::rename(&other, &log).unwrap();
        wal.flush().unwrap();
        let second = wal.open.as_ref().unwrap().1;
        assert_ne!(second, first);
        assert_eq!(second, std::fs::metadata(&log).unwrap().ino());
    }
}
