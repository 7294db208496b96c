//! The local server's signing key: generated on first start and kept in the data dir, so answers
//! signed before a restart still verify after it.

use anyhow::{Context, Result};
use leasekit_core::provenance::Issuer;
use std::io::Write;
use std::path::Path;

/// The seed's file in the data dir: 64 hex characters, readable by the owner only.
const KEY_FILE: &str = "signing-key";

pub fn load_or_create(data_dir: &Path) -> Result<Issuer> {
    let path = data_dir.join(KEY_FILE);
    let seed = seed_hex(data_dir)?;
    Issuer::from_hex(&seed).with_context(|| format!("{}", path.display()))
}

/// The seed as kept in the data dir (64 hex characters), created on first use.
pub fn seed_hex(data_dir: &Path) -> Result<String> {
    let path = data_dir.join(KEY_FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) => Ok(text.trim().to_owned()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir_all(data_dir)
                .with_context(|| format!("creating {}", data_dir.display()))?;
            let (issuer, seed) = Issuer::generate()
                .map_err(|e| anyhow::anyhow!("no randomness from the OS: {e}"))?;
            let mut options = std::fs::OpenOptions::new();
            options.write(true).create_new(true);
            #[cfg(unix)]
            std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
            let mut file = options
                .open(&path)
                .with_context(|| format!("creating {}", path.display()))?;
            file.write_all(seed.as_bytes())?;
            file.sync_all()?;
            tracing::info!(
                issuer = issuer.did(),
                "created a signing key in {}",
                path.display()
            );
            Ok(seed)
        }
        Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
    }
}
