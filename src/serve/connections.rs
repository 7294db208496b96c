//! The accept loop of `leasekit serve`: HTTP/1.1 connections with deadlines and a cap, so that
//! slow or half-open clients cannot hold the server's sockets (and file descriptors) forever.
//!
//! Each connection is in one [`Phase`]: reading a request head (`--header-timeout` from the
//! connection's start or from its first byte after an answer), busy with requests (the body must
//! arrive within `--body-timeout`; no bytes moving either way for `--idle-timeout` ends it), or
//! idle between requests (`--idle-timeout`). At `--max-connections`, a new connection waits for a
//! slot, and one open connection gives its own up ([`choose`]): one of the account that has the
//! most connections open (the keyless caller's count as one account's), the cheapest it has to
//! give: one without a request in flight, else its slowest request body, else one whose call is
//! waiting (answered at once, as its wait had come to). So no account's connections can starve
//! another's (the attack of 2026-12-05: one account's 600 waiting calls held every slot, and
//! another's `get` took 38.8 s).

use super::cap::{Give, Grace, Seen, choose};
use super::socket::{Closing, Socket, peer_closed};
use crate::embedded_store::Serving;
use axum::Router;
use hyper::body::Incoming;
use hyper::header::HeaderValue;
use hyper_util::rt::TokioIo;
use leasekit_core::http::ConnectionOwner;
use leasekit_core::http::body::Deadline;
use leasekit_core::service::{HangUpWatch, HungUp, watching_hang_up};
use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, Semaphore, watch};
use tokio::time::Instant;
use tower::ServiceExt;

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
struct Watch {
    phase: Mutex<Phase>,
    /// Milliseconds since `epoch` of the last read or write.
    last_io: AtomicU64,
    epoch: Instant,
    bell: Notify,
    evicted: AtomicBool,
    /// The account of its last request whose API key checked out; `None`: the keyless caller.
    owner: Mutex<Option<Arc<str>>>,
    /// Request bodies not yet read in full.
    receiving: AtomicUsize,
    /// Milliseconds since `epoch` at which the last of them started.
    body_since: AtomicU64,
    /// Waits in progress of its requests.
    waiting: AtomicUsize,
    /// Its waits were ended at the cap: they answer now, and the connection closes after.
    cut: AtomicBool,
    cut_bell: Notify,
}

impl Watch {
    fn new(now: Instant) -> Self {
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
            cut: false.into(),
            cut_bell: Notify::new(),
        }
    }

    fn owner(&self) -> Option<Arc<str>> {
        self.owner.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn set_owner(&self, account: &str) {
        let mut owner = self.owner.lock().unwrap_or_else(|e| e.into_inner());
        if owner.as_deref() != Some(account) {
            *owner = Some(Arc::from(account));
        }
    }

    /// What it could give up at `now`, and since when it could; `None` if nothing (a request
    /// being carried out, a connection already told to go, or one within its `grace`).
    fn could_give(&self, now: Instant, grace: Grace) -> Option<(Give, Instant)> {
        if self.evicted.load(Ordering::Relaxed) || self.cut.load(Ordering::Relaxed) {
            return None;
        }
        let past = |since: Instant, grace: Duration| now.duration_since(since) >= grace;
        match self.phase() {
            Phase::Head(since) => return past(since, grace.head).then_some((Give::Quiet, since)),
            Phase::Idle(since) => return past(since, grace.idle).then_some((Give::Quiet, since)),
            Phase::Busy(_) => {}
        }
        if self.waiting.load(Ordering::Relaxed) > 0 {
            return Some((Give::Wait, self.last_io()));
        }
        let body_since = self.at(self.body_since.load(Ordering::Relaxed));
        (self.receiving.load(Ordering::Relaxed) > 0 && past(body_since, grace.head))
            .then_some((Give::SlowBody, body_since))
    }

    /// End its waits now; it closes once they are answered.
    fn cut(&self) {
        self.cut.store(true, Ordering::Relaxed);
        self.cut_bell.notify_waiters();
    }

    /// Resolves once [`Self::cut`] was called.
    async fn cut_off(&self) {
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

    fn phase(&self) -> Phase {
        *self.phase.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn update(&self, change: impl FnOnce(Phase) -> Phase) {
        let mut phase = self.phase.lock().unwrap_or_else(|e| e.into_inner());
        let before = *phase;
        *phase = change(before);
        if before != *phase {
            // The deadline may now be earlier: the watchdog recomputes it.
            self.bell.notify_one();
        }
    }

    fn touch(&self, now: Instant) {
        self.last_io.store(self.ms(now), Ordering::Relaxed);
    }

    fn last_io(&self) -> Instant {
        self.at(self.last_io.load(Ordering::Relaxed))
    }

    /// `at` as milliseconds since `epoch`, as the atomics keep times.
    fn ms(&self, at: Instant) -> u64 {
        u64::try_from(at.duration_since(self.epoch).as_millis()).unwrap_or(u64::MAX)
    }

    fn at(&self, ms: u64) -> Instant {
        self.epoch + Duration::from_millis(ms)
    }

    fn deadline(&self, limits: &Limits) -> Instant {
        self.phase().deadline(limits, self.last_io())
    }

    fn evict(&self) {
        self.evicted.store(true, Ordering::Relaxed);
        self.bell.notify_one();
    }
}

/// The socket, noting when bytes move.
struct Watched {
    io: TcpStream,
    watch: Arc<Watch>,
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let poll = Pin::new(&mut self.io).poll_read(cx, buf);
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
fn hang_up_watch(socket: Arc<Socket>, watch: Arc<Watch>) -> HangUpWatch {
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
struct Counted<'a>(&'a AtomicUsize);

impl<'a> Counted<'a> {
    fn new(count: &'a AtomicUsize) -> Self {
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
struct Tracked<B> {
    body: B,
    watch: Option<Arc<Watch>>,
}

impl<B: hyper::body::Body> Tracked<B> {
    fn new(body: B, watch: &Arc<Watch>) -> Self {
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

/// The open connections, oldest first, for eviction at the cap.
#[derive(Default)]
struct Registry {
    next: AtomicU64,
    open: Mutex<BTreeMap<u64, Arc<Watch>>>,
}

impl Registry {
    fn add(&self, watch: Arc<Watch>) -> u64 {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.lock().insert(id, watch);
        id
    }

    fn remove(&self, id: u64) {
        self.lock().remove(&id);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, Arc<Watch>>> {
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Make room at the cap: the connection [`choose`] picks gives up what it can (closed, or
    /// its waits ended and then closed). True if one was told to.
    fn evict_one(&self, now: Instant, grace: Grace) -> bool {
        let open = self.lock();
        let seen: Vec<Seen> = open
            .values()
            .map(|w| Seen {
                owner: w.owner(),
                gives: w.could_give(now, grace),
            })
            .collect();
        let Some(chosen) = choose(&seen) else {
            return false;
        };
        let Some(watch) = open.values().nth(chosen) else {
            return false;
        };
        match seen[chosen].gives {
            Some((Give::Wait, _)) => watch.cut(),
            _ => watch.evict(),
        }
        true
    }
}

/// Serve `app` on `listener` until `shutdown` resolves; then stop accepting, let requests in
/// flight finish, and return when every connection has closed.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: Limits,
    shutdown: impl std::future::Future<Output = ()>,
) {
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let registry = Arc::new(Registry::default());
    let (stop_tx, stop_rx) = watch::channel(false);
    tokio::pin!(shutdown);
    loop {
        // A connection first, then its slot: room is made at the cap only for a connection that
        // is there (making it first closed one of a full house for a caller that might never
        // come: the attack of 2026-12-05, round 2). One accepted connection waits for its slot
        // at a time, one descriptor past the cap.
        let (stream, _) = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(err) => {
                    // Out of descriptors or the like: back off rather than spin.
                    tracing::warn!(error = %err, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let permit = tokio::select! {
            () = &mut shutdown => break,
            permit = slot(&slots, &registry, &limits) => permit,
        };
        let _ = stream.set_nodelay(true);
        let watch = Arc::new(Watch::new(Instant::now()));
        let id = registry.add(watch.clone());
        let (app, registry, stop) = (app.clone(), registry.clone(), stop_rx.clone());
        tokio::spawn(async move {
            connection(stream, watch, app, limits, stop).await;
            registry.remove(id);
            drop(permit);
        });
    }
    drop(listener);
    let _ = stop_tx.send(true);
    // Every connection holds a slot until it closes: all slots back means all closed.
    let all = u32::try_from(limits.max_connections).unwrap_or(u32::MAX);
    let _ = slots.acquire_many(all).await;
}

/// A free connection slot, for a connection accepted: at once if there is one, else by making one
/// give way ([`choose`]), else when one closes.
async fn slot(
    slots: &Arc<Semaphore>,
    registry: &Registry,
    limits: &Limits,
) -> tokio::sync::OwnedSemaphorePermit {
    let started = Instant::now();
    loop {
        if let Ok(permit) = slots.clone().try_acquire_owned() {
            return permit;
        }
        let now = Instant::now();
        registry.evict_one(
            now,
            Grace::after(limits.header, now.duration_since(started)),
        );
        let wait = tokio::time::timeout(Duration::from_millis(100), slots.clone().acquire_owned());
        if let Ok(Ok(permit)) = wait.await {
            return permit;
        }
    }
}

/// A connection closes once its answer is sent, and gives its slot back, when that answer is a
/// 429 (its caller is over a bound of its own: one that calls again at once, as the attack's did
/// every 50 ms, then queues for a slot behind the callers that came before it, instead of keeping
/// its connection busy with refusals), or answers a wait that was `cut` for another account's
/// call. A cut wait's answer is what the wait had come to, a grant included, so it carries no
/// `Retry-After` of its own (the attack's round 2 found grants told to come back).
fn closing_when_refused<B>(response: &mut hyper::Response<B>, cut: bool) {
    if cut || response.status() == hyper::StatusCode::TOO_MANY_REQUESTS {
        response
            .headers_mut()
            .insert(hyper::header::CONNECTION, HeaderValue::from_static("close"));
    }
}

/// One connection, until it closes, misses a deadline, is evicted, or the server stops.
async fn connection(
    stream: TcpStream,
    watch: Arc<Watch>,
    app: Router,
    limits: Limits,
    mut stop: watch::Receiver<bool>,
) {
    let socket = Arc::new(Socket::of(&stream));
    let hang_up = hang_up_watch(socket.clone(), watch.clone());
    let io = TokioIo::new(Watched {
        io: stream,
        watch: watch.clone(),
    });
    let owner_watch = watch.clone();
    let owner = ConnectionOwner(Arc::new(move |account: &str| {
        owner_watch.set_owner(account)
    }));
    let service_watch = watch.clone();
    let service = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
        let (app, watch, hang_up) = (app.clone(), service_watch.clone(), hang_up.clone());
        watch.update(Phase::on_request);
        let serving = Serving::start();
        let mut request = request.map(|body| {
            axum::body::Body::new(Deadline::new(Tracked::new(body, &watch), limits.body))
        });
        request.extensions_mut().insert(owner.clone());
        async move {
            let _serving = serving;
            let mut response = watching_hang_up(hang_up, app.oneshot(request)).await;
            if let Ok(response) = &mut response {
                closing_when_refused(response, watch.cut.load(Ordering::Relaxed));
            }
            watch.update(|p| p.on_answer(Instant::now()));
            response
        }
    });
    // The watchdog below enforces the header deadline: hyper's own would also cut keep-alive
    // connections between requests at the header timeout.
    // Half-close: a caller that sends its request and closes its side at once (or hangs up)
    // still has that request read and carried out. Without it hyper ends the connection at the
    // EOF, and a body it had not yet handed to the handler is lost (the handler sees an
    // incomplete body and nothing is done, although the whole request arrived). The deadlines
    // above still close what stays half-open.
    let conn = hyper::server::conn::http1::Builder::new()
        .header_read_timeout(None)
        .half_close(true)
        .serve_connection(io, service);
    tokio::pin!(conn);
    let _closing = Closing(socket);
    let mut stopping = *stop.borrow();
    if stopping {
        conn.as_mut().graceful_shutdown();
    }
    loop {
        let deadline = watch.deadline(&limits);
        tokio::select! {
            result = conn.as_mut() => {
                if let Err(err) = result {
                    tracing::debug!(error = %err, "connection ended");
                }
                return;
            }
            changed = stop.changed(), if !stopping => {
                stopping = true;
                if changed.is_err() || *stop.borrow() {
                    // Finish the requests in flight, then close.
                    conn.as_mut().graceful_shutdown();
                }
            }
            () = watch.bell.notified() => {
                if watch.evicted.load(Ordering::Relaxed) {
                    tracing::debug!("connection evicted at the connection cap");
                    return;
                }
            }
            () = tokio::time::sleep_until(deadline) => {
                if watch.deadline(&limits) <= Instant::now() {
                    tracing::debug!(phase = ?watch.phase(), "connection deadline passed");
                    return;
                }
            }
        }
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

    /// A second's grace for everything.
    const SECOND: Grace = Grace {
        head: Duration::from_secs(1),
        idle: Duration::from_secs(1),
    };

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

    #[test]
    fn eviction_takes_the_longest_waiting_connection_past_the_grace() {
        let t0 = Instant::now();
        let registry = Registry::default();
        let busy = Arc::new(Watch::new(t0));
        busy.update(Phase::on_request);
        let old = Arc::new(Watch::new(t0));
        let young = Arc::new(Watch::new(t0 + Duration::from_secs(2)));
        for w in [&busy, &old, &young] {
            registry.add(w.clone());
        }
        let now = t0 + Duration::from_millis(2_500);
        assert!(registry.evict_one(now, SECOND));
        assert!(old.evicted.load(Ordering::Relaxed));
        // The young one has not waited a second yet, the busy one is never evicted.
        assert!(!registry.evict_one(now, SECOND));
        assert!(!busy.evicted.load(Ordering::Relaxed));
    }

    #[test]
    fn a_waiting_call_is_cut_not_closed_and_a_slow_body_is_closed() {
        let t0 = Instant::now();
        let registry = Registry::default();
        let waiting = Arc::new(Watch::new(t0));
        waiting.update(Phase::on_request);
        let counted = Counted::new(&waiting.waiting);
        let slow = Arc::new(Watch::new(t0));
        slow.update(Phase::on_request);
        // Its body started at t0 and trickles: bytes moved just now.
        slow.receiving.fetch_add(1, Ordering::Relaxed);
        slow.touch(t0 + Duration::from_millis(1_900));
        for w in [&waiting, &slow] {
            registry.add(w.clone());
        }
        let now = t0 + Duration::from_secs(2);
        // The slow body goes first (cheaper), closed.
        assert!(registry.evict_one(now, SECOND));
        assert!(slow.evicted.load(Ordering::Relaxed));
        // Then the wait: told to end, its connection left to answer it.
        assert!(registry.evict_one(now, SECOND));
        assert!(waiting.cut.load(Ordering::Relaxed));
        assert!(!waiting.evicted.load(Ordering::Relaxed));
        // Neither is picked again.
        assert!(!registry.evict_one(now, SECOND));
        drop(counted);
    }
}
