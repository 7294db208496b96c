//! How `leasekit keys` tells a running `leasekit serve` that the keys of their shared data dir
//! changed: a file in the data dir holding 8 random bytes, rewritten after every change.
//!
//! The server remembers resolved keys until those bytes change (instead of reading the key
//! store on every request: measured as a store call per request, BENCHMARKS.md), and reads the
//! file on every request that presents a key, before its lookup. So a request that starts after
//! `leasekit keys revoke` has returned sees the new bytes and reads the store: a revoked key is
//! refused at once, as before the cache. Random bytes rather than a counter: two commands
//! running at once cannot write the same value and hide one change behind the other.
//!
//! The file is opened once and read with `pread` (its name checked with one `lstat` per request,
//! so that a file replaced under the name is opened anew): the open, fstat, two reads and close of
//! each request were 5 system calls where 2 do (issue #28).
//!
//! Failures fall back to the store, never to memory: a file that is missing, not 8 bytes, not a
//! plain file (a symlink, a FIFO: opened without following or waiting) makes the server read the
//! store. Should recording a change fail (the command says so and exits non-zero), the server
//! still forgets every key within `LOCAL_KEY_CACHE` (60 s). Whoever can write the data dir can
//! also rewrite the key table itself, so a generation file put back to an old value is not
//! defended against beyond that.

use leasekit_core::auth::KeyChanges;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

const FILE: &str = "keys.generation";
const LEN: usize = 8;

/// The data dir's key generation, read from its file.
pub struct KeysFile {
    path: PathBuf,
    /// The file as last opened, and its inode: read again while the name still leads to it.
    open: Mutex<Option<Arc<Opened>>>,
}

struct Opened {
    file: File,
    inode: (u64, u64),
}

impl KeysFile {
    pub fn new(data_dir: &Path) -> Self {
        Self {
            path: data_dir.join(FILE),
            open: Mutex::new(None),
        }
    }

    /// The open file the name leads to now: the one kept, or (replaced, or never opened) the
    /// one found now, kept from then on.
    fn current(&self) -> io::Result<Arc<Opened>> {
        // Not followed: a symlink in its place is not a plain file, and an error.
        let named = std::fs::symlink_metadata(&self.path)?;
        if !named.is_file() {
            return Err(io::Error::other("keys.generation is not a plain file"));
        }
        let inode = (named.dev(), named.ino());
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(kept) = open.as_ref().filter(|kept| kept.inode == inode) {
            return Ok(kept.clone());
        }
        let (file, found) = self::open(&self.path, false)?;
        let opened = Arc::new(Opened {
            file,
            inode: (found.dev(), found.ino()),
        });
        *open = Some(opened.clone());
        Ok(opened)
    }
}

/// Open the generation file as a plain file only: never through a symlink, and never waiting
/// (a FIFO in its place would otherwise block the thread that opens it).
/// Its metadata comes with it, so that nobody asks the file for it again.
fn open(path: &Path, write: bool) -> io::Result<(File, std::fs::Metadata)> {
    let file = OpenOptions::new()
        .read(!write)
        .write(write)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)?;
    let metadata = file.metadata()?;
    if !metadata.is_file() {
        return Err(io::Error::other("keys.generation is not a plain file"));
    }
    Ok((file, metadata))
}

impl KeyChanges for KeysFile {
    /// The file's 8 bytes. Anything else (no file, another size, not a plain file) is an
    /// error, so the server reads the store instead of trusting its memory.
    ///
    /// A change that `leasekit keys` has finished is seen: it either rewrites the bytes in place
    /// (read here through the kept descriptor) or puts a new file under the name (another
    /// inode, so opened here).
    fn generation(&self) -> io::Result<u64> {
        let opened = self.current()?;
        // One byte past the 8, to tell a longer file from a whole one.
        let mut bytes = [0u8; LEN + 1];
        let mut read = 0;
        while read < bytes.len() {
            match opened.file.read_at(&mut bytes[read..], read as u64)? {
                0 => break,
                n => read += n,
            }
        }
        match bytes[..read].try_into() {
            Ok(value) => Ok(u64::from_le_bytes(value)),
            Err(_) => Err(io::Error::other("keys.generation is not 8 bytes")),
        }
    }
}

/// Record a change of the data dir's keys (and create the file if there is none). Call it after
/// the change is committed, before reporting it done.
pub fn changed(data_dir: &Path) -> io::Result<()> {
    let mut bytes = [0u8; LEN];
    getrandom::fill(&mut bytes).map_err(|e| io::Error::other(e.to_string()))?;
    let path = data_dir.join(FILE);
    match open(&path, true) {
        // In place: no new block to allocate, so a full disk cannot stop it.
        Ok((file, found)) if found.len() == LEN as u64 => file.write_all_at(&bytes, 0),
        // None yet (or a wrong one): a new file under a temporary name, renamed over, so a
        // reader sees no file or a whole one.
        _ => {
            let temporary = data_dir.join(format!("{FILE}.{}", hex::encode(bytes)));
            std::fs::write(&temporary, bytes)?;
            std::fs::rename(&temporary, &path).inspect_err(|_| {
                // Nothing left behind (a directory in its place cannot be renamed over).
                let _ = std::fs::remove_file(&temporary);
            })
        }
    }
}

/// Make sure the data dir has a generation file (a server starting on it calls this, so that
/// from then on a missing file means something went wrong).
pub fn ensure(data_dir: &Path) -> io::Result<()> {
    if KeysFile::new(data_dir).generation().is_ok() {
        return Ok(());
    }
    changed(data_dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_change_moves_the_generation() {
        let dir = tempfile::tempdir().unwrap();
        let file = KeysFile::new(dir.path());
        changed(dir.path()).unwrap();
        let mut seen = vec![file.generation().unwrap()];
        for _ in 0..20 {
            changed(dir.path()).unwrap();
            let now = file.generation().unwrap();
            assert!(!seen.contains(&now), "{now} seen before");
            seen.push(now);
        }
        // Nothing left behind but the one file.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn anything_but_8_bytes_in_a_plain_file_is_an_error_not_a_value() {
        let dir = tempfile::tempdir().unwrap();
        let file = KeysFile::new(dir.path());
        let path = dir.path().join(FILE);
        assert!(file.generation().is_err(), "no file");
        for bytes in [&b"abc"[..], b"", b"123456789"] {
            std::fs::write(&path, bytes).unwrap();
            assert!(file.generation().is_err(), "{bytes:?}");
        }
        std::fs::remove_file(&path).unwrap();
        std::fs::write(dir.path().join("elsewhere"), [1u8; 8]).unwrap();
        std::os::unix::fs::symlink(dir.path().join("elsewhere"), &path).unwrap();
        assert!(file.generation().is_err(), "a symlink");
    }

    #[test]
    fn a_fifo_in_its_place_is_an_error_at_once_not_a_hang() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE);
        let c_path = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
        let (done, finished) = std::sync::mpsc::channel();
        let data_dir = dir.path().to_owned();
        std::thread::spawn(move || {
            let _ = done.send(KeysFile::new(&data_dir).generation().is_err());
        });
        let answer = finished.recv_timeout(std::time::Duration::from_secs(5));
        assert_eq!(
            answer,
            Ok(true),
            "blocked on the FIFO, or read it as a value"
        );
        // And recording a change replaces it with a plain file.
        changed(dir.path()).unwrap();
        assert!(KeysFile::new(dir.path()).generation().is_ok());
    }

    /// The descriptor kept between reads sees both kinds of change: bytes rewritten in place,
    /// and a new file renamed over the name (the old one, still open here, keeps its bytes).
    #[test]
    fn a_kept_file_sees_changes_in_place_and_files_put_in_its_place() {
        let dir = tempfile::tempdir().unwrap();
        let file = KeysFile::new(dir.path());
        let path = dir.path().join(FILE);
        std::fs::write(&path, 1u64.to_le_bytes()).unwrap();
        assert_eq!(file.generation().unwrap(), 1);
        changed(dir.path()).unwrap();
        let in_place = file.generation().unwrap();
        assert_ne!(in_place, 1);
        let other = dir.path().join("next");
        std::fs::write(&other, 2u64.to_le_bytes()).unwrap();
        std::fs::rename(&other, &path).unwrap();
        assert_eq!(file.generation().unwrap(), 2);
        std::fs::remove_file(&path).unwrap();
        assert!(file.generation().is_err(), "gone, though a copy is open");
        std::fs::write(&path, [0u8; 9]).unwrap();
        assert!(file.generation().is_err(), "9 bytes");
    }

    #[test]
    fn ensure_creates_once_and_keeps_what_is_there() {
        let dir = tempfile::tempdir().unwrap();
        let file = KeysFile::new(dir.path());
        ensure(dir.path()).unwrap();
        let first = file.generation().unwrap();
        ensure(dir.path()).unwrap();
        assert_eq!(file.generation().unwrap(), first);
    }
}
