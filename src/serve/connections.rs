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
//! waiting (answered at once, as its wait had come to), else one whose call is being carried out
//! (closed once answered). So no account's connections can starve another's (the attack of
//! 2026-12-05: one account's 600 waiting calls held every slot, and another's `get` took 38.8 s;
//! the attack of 2026-12-07: one account calling back to back on every slot shut others out
//! for as long as it kept on).

use super::cap::{Give, Grace, Seen, choose};
use super::socket::{Closing, Socket};
pub use super::watch::Limits;
use super::watch::{Phase, Tracked, Watch, Watched, hang_up_watch};
use crate::embedded_store::Serving;
use axum::Router;
use hyper::body::Incoming;
use hyper::header::HeaderValue;
use hyper_util::rt::TokioIo;
use leasekit_core::http::ConnectionOwner;
use leasekit_core::http::body::Deadline;
use leasekit_core::service::watching_hang_up;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, watch};
use tokio::time::Instant;
use tower::ServiceExt;

/// The most a connection's read buffer grows to: a request's head must fit in it (larger heads
/// are a 431; API Gateway takes 10 KB of headers), and a body passes through it. With hyper's
/// bound, about 400 KB, a connection that received a body quickly grew its buffer past the
/// body's size and kept it while the body was read: a sender stalled one byte short of a
/// 64 KiB body cost 162 KB beyond what a waiting request costs (78 KB with this bound).
const READ_BUFFER_BYTES: usize = 16 * 1024;

/// The open connections, oldest first, for eviction at the cap.
#[derive(Default)]
struct Registry {
    next: AtomicU64,
    open: Mutex<BTreeMap<u64, Open>>,
}

/// One open connection, as the cap sees it.
struct Open {
    watch: Arc<Watch>,
    socket: Arc<Socket>,
}

impl Registry {
    fn add(&self, watch: Arc<Watch>, socket: Arc<Socket>) -> u64 {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.lock().insert(id, Open { watch, socket });
        id
    }

    fn remove(&self, id: u64) {
        self.lock().remove(&id);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, Open>> {
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Make room at the cap: the connection [`choose`] picks gives up what it can (closed, or
    /// its waits ended and then closed). True if one was told to.
    fn evict_one(&self, now: Instant, grace: Grace) -> bool {
        let open = self.lock();
        let opened: Vec<&Open> = open.values().collect();
        let mut seen: Vec<Seen> = opened
            .iter()
            .map(|o| Seen {
                owner: o.watch.owner(),
                gives: o.watch.could_give(now, grace),
            })
            .collect();
        loop {
            let Some(chosen) = choose(&seen) else {
                return false;
            };
            let Open { watch, socket } = opened[chosen];
            match seen[chosen].gives {
                Some((Give::Wait | Give::AfterAnswer, _)) => watch.cut(),
                // A connection waiting for a head that has arrived, unread, is no slow caller:
                // the server is late, too busy to read it, and closing it would drop a request
                // the caller sent in full, unanswered (the attack of 2026-12-07 saw two). Asked
                // only of the one chosen: one recv(2), not one per connection. (An idle one
                // with bytes unread may be a caller that does not read its answers, which stops
                // the server's reads: it gives way as ever.)
                Some((Give::Quiet, _)) if watch.awaits_head() && socket.has_unread() => {
                    seen[chosen].gives = None;
                    continue;
                }
                _ => watch.evict(),
            }
            return true;
        }
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
        let socket = Arc::new(Socket::of(&stream));
        let id = registry.add(watch.clone(), socket.clone());
        let (app, registry, stop) = (app.clone(), registry.clone(), stop_rx.clone());
        tokio::spawn(async move {
            connection(stream, socket, watch, app, limits, stop).await;
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
/// its connection busy with refusals), or answers on a connection `cut` for another account's
/// call (a wait ended at once, or a call carried out as ever). A cut wait's answer is what the
/// wait had come to, a grant included, so it carries no `Retry-After` of its own (the attack's
/// round 2 found grants told to come back).
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
    socket: Arc<Socket>,
    watch: Arc<Watch>,
    app: Router,
    limits: Limits,
    mut stop: watch::Receiver<bool>,
) {
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
        .max_buf_size(READ_BUFFER_BYTES)
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
    use super::super::watch::Counted;
    use super::*;
    use std::sync::atomic::Ordering;

    /// A second's grace for everything.
    const SECOND: Grace = Grace {
        head: Duration::from_secs(1),
        idle: Duration::from_secs(1),
    };

    /// A loopback connection as the server holds it (`socket`, `ours`) and its caller's end.
    struct Pair {
        socket: Arc<Socket>,
        _ours: std::net::TcpStream,
        caller: std::net::TcpStream,
    }

    fn pair() -> Pair {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let caller = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (ours, _) = listener.accept().unwrap();
        Pair {
            socket: Arc::new(Socket::of(&ours)),
            _ours: ours,
            caller,
        }
    }

    /// `watches` in the registry, each on a fresh loopback connection of its own.
    fn registered(watches: &[&Arc<Watch>]) -> (Registry, Vec<Pair>) {
        let registry = Registry::default();
        let pairs: Vec<Pair> = watches.iter().map(|_| pair()).collect();
        for (watch, pair) in watches.iter().zip(&pairs) {
            registry.add((*watch).clone(), pair.socket.clone());
        }
        (registry, pairs)
    }

    #[test]
    fn eviction_takes_the_longest_waiting_connection_past_the_grace() {
        let t0 = Instant::now();
        let busy = Arc::new(Watch::new(t0));
        busy.update(Phase::on_request);
        let old = Arc::new(Watch::new(t0));
        let young = Arc::new(Watch::new(t0 + Duration::from_secs(2)));
        let (registry, _pairs) = registered(&[&busy, &old, &young]);
        let now = t0 + Duration::from_millis(2_500);
        assert!(registry.evict_one(now, SECOND));
        assert!(old.evicted.load(Ordering::Relaxed));
        // The young one has not waited a second yet; the busy one is never closed under its
        // call, but told to close once it has answered it.
        assert!(registry.evict_one(now, SECOND));
        assert!(!busy.evicted.load(Ordering::Relaxed));
        assert!(busy.cut.load(Ordering::Relaxed));
        // Nothing is left to give.
        assert!(!registry.evict_one(now, SECOND));
    }

    #[test]
    fn a_waiting_call_is_cut_not_closed_and_a_slow_body_is_closed() {
        let t0 = Instant::now();
        let waiting = Arc::new(Watch::new(t0));
        waiting.update(Phase::on_request);
        let counted = Counted::new(&waiting.waiting);
        let slow = Arc::new(Watch::new(t0));
        slow.update(Phase::on_request);
        // Its body started at t0 and trickles: bytes moved just now.
        slow.receiving.fetch_add(1, Ordering::Relaxed);
        slow.touch(t0 + Duration::from_millis(1_900));
        let (registry, _pairs) = registered(&[&waiting, &slow]);
        let now = t0 + Duration::from_secs(2);
        // The slow body goes first (cheaper), closed.
        assert!(registry.evict_one(now, SECOND));
        assert!(slow.evicted.load(Ordering::Relaxed));
        // Then the wait: told to end, its connection left to answer it.
        assert!(registry.evict_one(now, SECOND));
        assert!(waiting.cut.load(Ordering::Relaxed));
        assert!(!waiting.evicted.load(Ordering::Relaxed));
        // Neither is picked again while its call is in flight.
        assert!(!registry.evict_one(now, SECOND));
        drop(counted);
        // Once answered, the cut one may still be closed if it lingers before closing.
        waiting.update(|p| p.on_answer(now));
        let later = now + Duration::from_secs(1);
        assert!(registry.evict_one(later, SECOND));
        assert!(waiting.evicted.load(Ordering::Relaxed));
    }

    #[test]
    fn a_connection_whose_request_arrived_unread_is_not_closed() {
        use std::io::Write;
        let t0 = Instant::now();
        // Two opened at t0 and, as the cap sees them, still waiting for a request head: the
        // server has asked each socket for it and found nothing yet.
        let sent = Arc::new(Watch::new(t0));
        let silent = Arc::new(Watch::new(t0 + Duration::from_millis(1)));
        for watch in [&sent, &silent] {
            watch.read_pending.store(true, Ordering::Relaxed);
        }
        // A third is idle after an answer, its next request unread: its caller may not be
        // reading its answers (the server stops reading until it has written them).
        let idle = Arc::new(Watch::new(t0));
        idle.update(Phase::on_request);
        idle.update(|p| p.on_answer(t0 + Duration::from_millis(2)));
        let (registry, mut pairs) = registered(&[&sent, &silent, &idle]);
        // The first and the third one's callers sent a request whole; the server has not read
        // them yet.
        for at in [0, 2] {
            let request = b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n";
            pairs[at].caller.write_all(request).unwrap();
        }
        let arrived = std::time::Instant::now() + Duration::from_secs(5);
        while !(pairs[0].socket.has_unread() && pairs[2].socket.has_unread()) {
            assert!(std::time::Instant::now() < arrived, "never arrived");
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(!pairs[1].socket.has_unread());
        // Past the grace, the oldest quiet one would go first: it is passed over.
        let now = t0 + Duration::from_secs(2);
        assert!(registry.evict_one(now, SECOND));
        assert!(!sent.evicted.load(Ordering::Relaxed));
        assert!(silent.evicted.load(Ordering::Relaxed));
        // The idle one with its bytes unread gives way as ever.
        assert!(registry.evict_one(now, SECOND));
        assert!(idle.evicted.load(Ordering::Relaxed));
        // And nothing else is given up.
        assert!(!registry.evict_one(now, SECOND));
        assert!(!sent.evicted.load(Ordering::Relaxed));
    }
}
