//! One connection as the deadlines and the cap see it: its [`Phase`] (pure), its shared
//! [`Watch`] (when bytes last moved, whose it is, what it could give up at the cap), and the
//! wrappers that keep the watch up to date: the socket ([`Watched`]), request bodies
//! ([`Tracked`]) and waits ([`hang_up_watch`]).

use super::cap::{Give, Grace};
use super::socket::{Socket, peer_closed};
use leasekit_core::service::{HangUpWatch, HungUp};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::Notify;
use tokio::time::Instant;

/// The deadlines and the cap.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub header: Duration,
    pub body: Duration,
    pub idle: Duration,
    pub max_connections: usize,
}

/// What a connection is doing, for its deadline. Pure: no I/O.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Waiting for a request head; since the connection opened or its first byte arrived.
    Head(Instant),
    /// This many requests in flight.
    Busy(usize),
    /// Answered everything; since the last answer.
    Idle(Instant),
}

impl Phase {
    /// When the connection is closed unless something happens; `last_io` is the last time bytes
    /// moved in either direction.
    pub fn deadline(self, limits: &Limits, last_io: Instant) -> Instant {
        match self {
            Self::Head(since) => since + limits.header,
            Self::Busy(_) => last_io + limits.idle,
            Self::Idle(since) => since + limits.idle,
        }
    }

    /// Bytes arrived: an idle connection starts a request head (the header deadline runs).
    pub fn on_bytes(self, now: Instant) -> Self {
        match self {
            Self::Idle(_) => Self::Head(now),
            other => other,
        }
    }

    /// A request head was read: the service runs.
    pub fn on_request(self) -> Self {
        match self {
            Self::Busy(n) => Self::Busy(n + 1),
            _ => Self::Busy(1),
        }
    }

    /// An answer is ready.
    pub fn on_answer(self, now: Instant) -> Self {
        match self {
            Self::Busy(n) if n > 1 => Self::Busy(n - 1),
            _ => Self::Idle(now),
        }
    }
}

/// The shared state of one connection: its phase, when bytes last moved, and a bell that rings
/// when the deadline may have moved earlier or the connection should go; and, for the cap, whose
/// it is and what it could give up.
pub(super) struct Watch {
    pub(super) phase: Mutex<Phase>,
    /// Milliseconds since `epoch` of the last read or write.
    pub(super) last_io: AtomicU64,
    pub(super) epoch: Instant,
    pub(super) bell: Notify,
    pub(super) evicted: AtomicBool,
    /// The account of its last request whose API key checked out; `None`: the keyless caller.
    pub(super) owner: Mutex<Option<Arc<str>>>,
    /// Request bodies not yet read in full.
    pub(super) receiving: AtomicUsize,
    /// Milliseconds since `epoch` at which the last of them started.
    pub(super) body_since: AtomicU64,
    /// Waits in progress of its requests.
    pub(super) waiting: AtomicUsize,
    /// Its last read of the socket found nothing: the server waits for the caller's bytes (and
    /// is woken when they come). Bytes unread then mean the server is late, not the caller.
    pub(super) read_pending: AtomicBool,
    /// Its waits were ended at the cap: they answer now, and the connection closes after.
    pub(super) cut: AtomicBool,
    pub(super) cut_bell: Notify,
}

impl Watch {
    pub(super) fn new(now: Instant) -> Self {
        Self {
            phase: Mutex::new(Phase::Head(now)),
            last_io: AtomicU64::new(0),
            epoch: now,
            bell: Notify::new(),
            evicted: false.into(),
            owner: Mutex::new(None),
            receiving: AtomicUsize::new(0),
            body_since: AtomicU64::new(0),
            waiting: AtomicUsize::new(0),
            read_pending: false.into(),
            cut: false.into(),
            cut_bell: Notify::new(),
        }
    }

    pub(super) fn owner(&self) -> Option<Arc<str>> {
        self.owner.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub(super) fn set_owner(&self, account: &str) {
        let mut owner = self.owner.lock().unwrap_or_else(|e| e.into_inner());
        if owner.as_deref() != Some(account) {
            *owner = Some(Arc::from(account));
        }
    }

    /// What it could give up at `now`, and since when it could; `None` if nothing (a
    /// connection already told to go, or one within its `grace`). One already `cut` closes
    /// after its next answer, and may only still be closed while it has no call in flight.
    pub(super) fn could_give(&self, now: Instant, grace: Grace) -> Option<(Give, Instant)> {
        if self.evicted.load(Ordering::Relaxed) {
            return None;
        }
        let past = |since: Instant, grace: Duration| now.duration_since(since) >= grace;
        match self.phase() {
            Phase::Head(since) => return past(since, grace.head).then_some((Give::Quiet, since)),
            Phase::Idle(since) => return past(since, grace.idle).then_some((Give::Quiet, since)),
            Phase::Busy(_) if self.cut.load(Ordering::Relaxed) => return None,
            Phase::Busy(_) => {}
        }
        if self.waiting.load(Ordering::Relaxed) > 0 {
            return Some((Give::Wait, self.last_io()));
        }
        let body_since = self.at(self.body_since.load(Ordering::Relaxed));
        if self.receiving.load(Ordering::Relaxed) > 0 {
            // A body still arriving within its grace gives nothing yet: it is read at once, or
            // becomes a slow body.
            return past(body_since, grace.head).then_some((Give::SlowBody, body_since));
        }
        Some((Give::AfterAnswer, self.last_io()))
    }

    /// End its waits now; it closes once they are answered.
    pub(super) fn cut(&self) {
        self.cut.store(true, Ordering::Relaxed);
        self.cut_bell.notify_waiters();
    }

    /// Resolves once [`Self::cut`] was called.
    pub(super) async fn cut_off(&self) {
        loop {
            let rung = self.cut_bell.notified();
            tokio::pin!(rung);
            rung.as_mut().enable();
            if self.cut.load(Ordering::Relaxed) {
                return;
            }
            rung.await;
        }
    }

    /// Whether it waits for a request head that the server has asked the socket for and not
    /// been given yet: if bytes are there unread, the server is late to read them (a caller
    /// that does not read its answers stops the server's reads instead, and is not this).
    pub(super) fn awaits_head(&self) -> bool {
        matches!(self.phase(), Phase::Head(_)) && self.read_pending.load(Ordering::Relaxed)
    }

    pub(super) fn phase(&self) -> Phase {
        *self.phase.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn update(&self, change: impl FnOnce(Phase) -> Phase) {
        let mut phase = self.phase.lock().unwrap_or_else(|e| e.into_inner());
        let before = *phase;
        *phase = change(before);
        if before != *phase {
            // The deadline may now be earlier: the watchdog recomputes it.
            self.bell.notify_one();
        }
    }

    pub(super) fn touch(&self, now: Instant) {
        self.last_io.store(self.ms(now), Ordering::Relaxed);
    }

    pub(super) fn last_io(&self) -> Instant {
        self.at(self.last_io.load(Ordering::Relaxed))
    }

    /// `at` as milliseconds since `epoch`, as the atomics keep times.
    pub(super) fn ms(&self, at: Instant) -> u64 {
        u64::try_from(at.duration_since(self.epoch).as_millis()).unwrap_or(u64::MAX)
    }

    pub(super) fn at(&self, ms: u64) -> Instant {
        self.epoch + Duration::from_millis(ms)
    }

    pub(super) fn deadline(&self, limits: &Limits) -> Instant {
        self.phase().deadline(limits, self.last_io())
    }

    pub(super) fn evict(&self) {
        self.evicted.store(true, Ordering::Relaxed);
        self.bell.notify_one();
    }
}

/// The socket, noting when bytes move.
pub(super) struct Watched {
    pub(super) io: TcpStream,
    pub(super) watch: Arc<Watch>,
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let poll = Pin::new(&mut self.io).poll_read(cx, buf);
        (self.watch.read_pending).store(poll.is_pending(), Ordering::Relaxed);
        if matches!(poll, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            let now = Instant::now();
            self.watch.touch(now);
            self.watch.update(|p| p.on_bytes(now));
        }
        poll
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let poll = Pin::new(&mut self.io).poll_write(cx, buf);
        if matches!(poll, Poll::Ready(Ok(n)) if n > 0) {
            self.watch.touch(Instant::now());
        }
        poll
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

/// How a waiting request learns that its wait must end: its caller hung up (the end of the
/// caller's side of the connection, or a reset), or the cap needs its connection ([`Give::Wait`]).
/// hyper does not read while it serves a request (half-close, above): a copy of the socket's
/// descriptor, made when a wait starts and closed when it ends, peeks for the end. A
/// half-closing caller's wait ends too, answered at once. The wait is counted on the connection
/// while it lasts.
pub(super) fn hang_up_watch(socket: Arc<Socket>, watch: Arc<Watch>) -> HangUpWatch {
    Arc::new(move || -> HungUp {
        let (socket, watch) = (socket.clone(), watch.clone());
        Box::pin(async move {
            let _counted = Counted::new(&watch.waiting);
            tokio::select! {
                () = peer_closed(socket) => {}
                () = watch.cut_off() => {}
            }
        })
    })
}

/// One in a connection's count while it lives.
pub(super) struct Counted<'a>(&'a AtomicUsize);

impl<'a> Counted<'a> {
    pub(super) fn new(count: &'a AtomicUsize) -> Self {
        count.fetch_add(1, Ordering::Relaxed);
        Self(count)
    }
}

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A request body, counted in its connection's `receiving` until it has arrived in full (or
/// failed, or been dropped unread).
pub(super) struct Tracked<B> {
    body: B,
    watch: Option<Arc<Watch>>,
}

impl<B: hyper::body::Body> Tracked<B> {
    pub(super) fn new(body: B, watch: &Arc<Watch>) -> Self {
        let watch = (!body.is_end_stream()).then(|| {
            let now = watch.ms(Instant::now());
            watch.body_since.store(now, Ordering::Relaxed);
            watch.receiving.fetch_add(1, Ordering::Relaxed);
            watch.clone()
        });
        Self { body, watch }
    }
}

impl<B> Tracked<B> {
    fn arrived(&mut self) {
        if let Some(watch) = self.watch.take() {
            watch.receiving.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

impl<B> Drop for Tracked<B> {
    fn drop(&mut self) {
        self.arrived();
    }
}

impl<B: hyper::body::Body + Unpin> hyper::body::Body for Tracked<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<B::Data>, B::Error>>> {
        let poll = Pin::new(&mut self.body).poll_frame(cx);
        if matches!(poll, Poll::Ready(None | Some(Err(_)))) || self.body.is_end_stream() {
            self.arrived();
        }
        poll
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: Limits = Limits {
        header: Duration::from_secs(5),
        body: Duration::from_secs(10),
        idle: Duration::from_secs(30),
        max_connections: 4,
    };

    #[test]
    fn each_phase_has_its_deadline() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        assert_eq!(Phase::Head(t0).deadline(&LIMITS, t0), t0 + s(5));
        assert_eq!(Phase::Idle(t0).deadline(&LIMITS, t0), t0 + s(30));
        assert_eq!(Phase::Busy(1).deadline(&LIMITS, t0 + s(7)), t0 + s(37));
    }

    #[test]
    fn a_request_cycle_moves_through_the_phases() {
        let t0 = Instant::now();
        let t1 = t0 + Duration::from_secs(1);
        let phase = Phase::Head(t0).on_bytes(t1);
        assert_eq!(
            phase,
            Phase::Head(t0),
            "more head bytes do not restart the clock"
        );
        let phase = phase.on_request().on_request();
        assert_eq!(phase, Phase::Busy(2));
        assert_eq!(
            phase.on_bytes(t1),
            Phase::Busy(2),
            "body bytes are not a new head"
        );
        let phase = phase.on_answer(t1);
        assert_eq!(phase, Phase::Busy(1));
        let phase = phase.on_answer(t1);
        assert_eq!(phase, Phase::Idle(t1));
        assert_eq!(phase.on_bytes(t1), Phase::Head(t1));
    }

    #[test]
    fn an_idle_connection_keeps_its_slot_for_its_grace_and_a_head_does_not() {
        let fresh = Grace::after(LIMITS.header, Duration::ZERO);
        let pressed = Grace::after(LIMITS.header, Duration::from_secs(1));
        // An idle keep-alive connection 0.5 s after its answer keeps its slot; a head 0.5 s old
        // does not.
        let t0 = Instant::now();
        let idle = Watch::new(t0);
        idle.update(Phase::on_request);
        idle.update(|p| p.on_answer(t0));
        let head = Watch::new(t0);
        let now = t0 + Duration::from_millis(500);
        assert_eq!(idle.could_give(now, fresh), None);
        assert_eq!(head.could_give(now, fresh), Some((Give::Quiet, t0)));
        assert_eq!(idle.could_give(now, pressed), Some((Give::Quiet, t0)));
    }
}
