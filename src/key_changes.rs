//! How `leasekit keys` tells a running `leasekit serve` that the keys of their shared data dir
//! changed: a file in the data dir holding 8 random bytes, rewritten after every change.
//!
//! The server remembers resolved keys until those bytes change (instead of reading the key
//! store on every request: measured as a store call per request, BENCHMARKS.md), and reads the
//! file on every request that presents a key, before its lookup. So a request that starts after
//! `leasekit keys revoke` has returned sees the new bytes and reads the store: a revoked key is
//! refused at once, as before the cache. Random bytes rather than a counter: two commands
//! running at once cannot write the same value and hide one change behind the other.

use leasekit_core::auth::KeyChanges;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

const FILE: &str = "keys.generation";

/// The data dir's key generation, read from its file.
pub struct KeysFile {
    path: PathBuf,
}

impl KeysFile {
    pub fn new(data_dir: &Path) -> Self {
        Self {
            path: data_dir.join(FILE),
        }
    }
}

impl KeyChanges for KeysFile {
    fn generation(&self) -> io::Result<u64> {
        let mut bytes = [0u8; 8];
        match std::fs::File::open(&self.path) {
            Ok(mut file) => file.read_exact(&mut bytes)?,
            // No change has been recorded yet: every store read so far is as new as it gets.
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        Ok(u64::from_le_bytes(bytes))
    }
}

/// Record a change of the data dir's keys. Call it after the change is committed, before
/// reporting it done.
pub fn changed(data_dir: &Path) -> io::Result<()> {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes).map_err(|e| io::Error::other(e.to_string()))?;
    // Written to a temporary name and renamed over: a reader sees the old bytes or the new ones.
    let path = data_dir.join(FILE);
    let temporary = data_dir.join(format!("{FILE}.{}", hex::encode(bytes)));
    std::fs::write(&temporary, bytes)?;
    std::fs::rename(&temporary, &path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_change_moves_the_generation() {
        let dir = tempfile::tempdir().unwrap();
        let file = KeysFile::new(dir.path());
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
    fn an_unreadable_generation_is_an_error_not_a_value() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(FILE), b"abc").unwrap();
        assert!(KeysFile::new(dir.path()).generation().is_err());
    }
}
