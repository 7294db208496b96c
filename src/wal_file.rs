//! The embedded store's write-ahead log as a file to fsync: what makes a group's commits
//! durable (see `embedded_store`).

use crate::embedded_store::Flush;
use std::fs::File;
use std::io;
use std::os::unix::fs::MetadataExt;
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
        let inode = std::fs::metadata(&self.path)?.ino();
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
