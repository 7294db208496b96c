//! A connection's socket as a request sees it: a request runs in a task of its own and may
//! outlive its connection, so it reaches the descriptor only through a [`Socket`], and learns
//! that its caller hung up by peeking at a copy of it ([`peer_closed`]).

use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::TcpStream;

/// Resolves when the peer of the connection has closed its side or reset it, or the connection
/// has closed. Pending for ever if the descriptor cannot be copied (out of descriptors: the
/// wait then runs its course).
pub(super) async fn peer_closed(socket: Arc<Socket>) {
    let copy = match socket.copy() {
        None => return,
        Some(Err(_)) => return std::future::pending().await,
        Some(Ok(copy)) => copy,
    };
    let Ok(peer) = TcpStream::from_std(std::net::TcpStream::from(copy)) else {
        return std::future::pending().await;
    };
    let mut byte = [0u8; 1];
    loop {
        match peer.peek(&mut byte).await {
            Ok(0) | Err(_) => return,
            // Bytes hyper has not read yet (the next request of a pipelining caller): look
            // again later, not at once (they stay readable until hyper reads them).
            Ok(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

/// A connection's socket descriptor while the connection is open: a request runs in a task of
/// its own and may outlive its connection, so it copies the descriptor only through this.
pub(super) struct Socket(Mutex<Option<RawFd>>);

impl Socket {
    /// `stream`'s descriptor, while its connection is open.
    pub(super) fn of(stream: &impl AsRawFd) -> Self {
        Self(Mutex::new(Some(stream.as_raw_fd())))
    }

    /// Whether bytes have arrived that the server has not read yet: the caller sent them, and
    /// it is the server that is late (too busy to read them). Never blocks.
    pub(super) fn has_unread(&self) -> bool {
        let fd = self.lock();
        let Some(fd) = *fd else {
            return false;
        };
        let mut byte = 0u8;
        // SAFETY: the descriptor is open while it is in here (see `copy`); recv(2) writes at
        // most one byte into `byte`, and MSG_PEEK leaves it to be read.
        let got = unsafe {
            libc::recv(
                fd,
                (&raw mut byte).cast(),
                1,
                libc::MSG_PEEK | libc::MSG_DONTWAIT,
            )
        };
        got > 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<RawFd>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A copy of the descriptor, its own; `None` once the connection has closed.
    fn copy(&self) -> Option<std::io::Result<OwnedFd>> {
        let fd = self.lock();
        // SAFETY: the descriptor is open while it is in here: the connection takes it out, under
        // this lock, before its socket is closed ([`Closing`]).
        fd.map(|fd| unsafe { BorrowedFd::borrow_raw(fd) }.try_clone_to_owned())
    }
}

/// Takes the descriptor out of its [`Socket`] when dropped: declared after the connection's
/// hyper future, so it is dropped first, before the socket inside that future closes.
pub(super) struct Closing(pub(super) Arc<Socket>);

impl Drop for Closing {
    fn drop(&mut self) {
        *self.0.lock() = None;
    }
}
