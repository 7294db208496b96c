//! The embedded store's engine: dynoxide's database, run by one leader at a time (a thread of its
//! own under load, a lone caller when the store is quiet), committing in groups.
//!
//! dynoxide runs each operation to completion on the thread that calls it and serializes them
//! all on one lock, so one thread loses no parallelism; it saves the hand-offs. (With a blocking
//! pool thread per call, each call woke a pool thread that queued on dynoxide's lock, and each
//! release of the lock woke the next waiter.) A lone caller on a quiet store saves the last two
//! hand-offs too, to the thread and back: it runs its own call, flush included (see
//! [`Engine::call`]). Should that flush hang (a dead disk), that caller's request hangs with it,
//! where the thread would have let its call time out as a 502; every call after it queues for
//! the thread and times out as before.
//!
//! Group commit. With SQLite's default `synchronous=FULL` every commit is fsynced alone, so the
//! store did one fsync per write, one write at a time, and that alone capped the local server
//! below etcd on this machine (BENCHMARKS.md). Instead the database runs with
//! `synchronous=NORMAL` (in WAL mode: commits are written to the WAL but not fsynced; SQLite still
//! syncs around checkpoints, so the file stays consistent), and this thread takes every call
//! waiting in its queue and runs them one after another; the WAL is then fsynced once for the
//! group, and only then are they answered. Every answer, a read's included, is sent after an
//! fsync that began after its call ran, so after the one that made what it saw durable: what an
//! answer says survives a power cut exactly as with `synchronous=FULL`.
//!
//! The fsync is pipelined: the thread hands a group it ran to a second thread, the flusher, and
//! goes on to the next group while the flusher fsyncs and answers; groups handed over during one
//! fsync share the next. The next group may see the writes of one not yet flushed, but its own
//! answers wait for a flush that covers them (the log is written in order, and an fsync covers
//! everything written before it began). Before, the leader waited out every fsync itself: at 16
//! clients that was a fifth of its time (BENCHMARKS.md, issue #47). A lone caller that leads
//! flushes for itself (see [`Engine::call`]), after any flush the flusher has in hand.
//!
//! A group that writes is also one SQLite transaction, each call a savepoint in it (dynoxide's
//! group transaction, vendor/README.md): it commits once, its pages written to the WAL once,
//! rather than a commit per call.
//!
//! If the fsync fails, nothing the engine answered since the last good one can be trusted to be
//! on disk: every call of that group, and every later one, is answered with an internal error, and
//! the server must be restarted (PostgreSQL's lesson: after a failed fsync the page cache no
//! longer says what the disk holds). The same when a group's writes are lost before it is
//! answered: its transaction ended by SQLite part way (a full disk, an I/O error), or its
//! commit failed.

use crate::client_tokens::ClientTokens;
use crate::dynamodb_ops::{is_read, serve};
use crate::engine_stats::Stats;
use crate::wal_file::WalFile;
use dynoxide::{Database, DynoxideError};
use std::collections::VecDeque;
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The most calls one group takes: a bound on how long the first of them waits for its answer.
const MAX_GROUP: usize = 256;

/// Calls further apart than this on average may run on their caller's thread (see
/// [`Engine::call`]): one client calling back to back is about 0.7 ms apart on this machine, 16
/// clients 0.2 ms, though they arrive in bursts (after each group is answered) with gaps between.
const SPARSE: Duration = Duration::from_micros(400);

/// How many requests this process is serving (see [`Serving`]).
static SERVING: AtomicUsize = AtomicUsize::new(0);

/// Counts a request as being served while it lives: a call runs on its caller's thread only
/// when its request is the only one (see [`Engine::call`]). The local server holds one per
/// request; a process that holds none (the `keys` commands, the local AWS endpoint) counts as
/// idle.
pub struct Serving(());

impl Serving {
    pub fn start() -> Self {
        SERVING.fetch_add(1, Ordering::Relaxed);
        Self(())
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        SERVING.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A handle on the engine; clones share it. Its thread ends with the last clone.
#[derive(Clone)]
pub struct Engine {
    handle: Arc<Handle>,
}

/// Stops the engine's thread when the last [`Engine`] goes.
struct Handle {
    shared: Arc<Shared>,
    /// Whether a call may run on its caller's thread when the store is quiet.
    inline: bool,
}

impl Drop for Handle {
    fn drop(&mut self) {
        self.shared.lock().stopped = true;
        self.shared.work.notify_one();
    }
}

/// What the callers and the engine's thread share.
struct Shared {
    database: Database,
    state: Mutex<State>,
    /// Rung when the thread is handed the lead, or the engine stops.
    work: Condvar,
    /// The flush and how far it has made commits durable. Taken by the flusher, and by a lone
    /// caller that leads.
    durable: Mutex<Durable>,
    /// How many groups that wrote have committed: a group's answers may go once
    /// [`Durable::flushed`] has reached the count as it stood when the group was done.
    committed: AtomicU64,
    /// Rung when the flusher has groups to make durable, or the thread has ended.
    to_flush: Condvar,
    /// The transactions' client tokens, kept here rather than in dynoxide (see
    /// [`ClientTokens`]). Used only by the leader, so never contended.
    tokens: Mutex<ClientTokens>,
    /// What the leaders did (group sizes, waits, busy share). Used only by the leader.
    stats: Mutex<Stats>,
    /// Tests: after this many more calls, a fault.
    #[cfg(test)]
    fault_after: Mutex<Option<(usize, Fault)>>,
}

/// The flush, and the count of committed groups that it has made durable.
struct Durable {
    flush: Option<Box<dyn Flush>>,
    flushed: u64,
}

/// A group the thread ran, waiting for the flusher to make it durable and answer it.
struct Ran {
    answers: Vec<(tokio::sync::oneshot::Sender<Answer>, Answer)>,
    /// [`Shared::committed`] when the group was done.
    commits: u64,
}

/// Who runs the next group: nobody (the store is idle), a caller on its own thread, or the
/// engine's thread. Only the leader runs operations and flushes, one group at a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lead {
    Idle,
    Caller,
    Thread,
}

struct State {
    queue: VecDeque<Job>,
    lead: Lead,
    /// When the last call arrived, and the mean time between calls (a moving average).
    last_call: Option<Instant>,
    mean_gap: Duration,
    /// Set once a flush failed: every later call is refused with it.
    failed: Option<String>,
    stopped: bool,
    /// Groups the thread ran, for the flusher.
    ran: VecDeque<Ran>,
    /// Set when the thread has ended: the flusher ends once it has answered every group.
    thread_ended: bool,
}

/// One call: the operation, its JSON body, and where its status and answer go.
struct Job {
    operation: String,
    body: String,
    /// When it was queued: its wait for its group is the time until that group starts.
    queued: Instant,
    answer: tokio::sync::oneshot::Sender<Answer>,
}

/// The HTTP status and JSON body DynamoDB would answer with.
pub use crate::client_tokens::Answer;

/// Makes every commit so far durable.
pub trait Flush: Send + 'static {
    fn flush(&mut self) -> io::Result<()>;
}

impl Engine {
    /// The engine for the database file at `path` (created if missing).
    pub fn open(path: &Path) -> anyhow::Result<Self> {
        let text = path
            .to_str()
            .ok_or_else(|| anyhow::anyhow!("the data dir path is not UTF-8"))?;
        let database = Database::new(text)?;
        // dynoxide's name for this is "after bulk loading", and what it sets is
        // synchronous=NORMAL (plus SQLite's default cache, temp store and mmap): no fsync per
        // commit. The engine's flush after each group is what makes commits durable.
        database.disable_bulk_loading()?;
        let wal = WalFile::new(path);
        Ok(Self::start(database, Some(Box::new(wal)), true))
    }

    /// An engine on an in-memory database: nothing to make durable.
    #[cfg(test)]
    pub fn memory() -> Self {
        Self::start(
            Database::memory().expect("an in-memory database"),
            None,
            true,
        )
    }

    fn start(database: Database, flush: Option<Box<dyn Flush>>, inline: bool) -> Self {
        let shared = Arc::new(Shared {
            database,
            state: Mutex::new(State {
                queue: VecDeque::new(),
                lead: Lead::Idle,
                last_call: None,
                mean_gap: SPARSE,
                failed: None,
                stopped: false,
                ran: VecDeque::new(),
                thread_ended: false,
            }),
            work: Condvar::new(),
            durable: Mutex::new(Durable { flush, flushed: 0 }),
            committed: AtomicU64::new(0),
            to_flush: Condvar::new(),
            tokens: Mutex::new(ClientTokens::default()),
            stats: Mutex::new(Stats::new()),
            #[cfg(test)]
            fault_after: Mutex::new(None),
        });
        let thread = shared.clone();
        std::thread::Builder::new()
            .name("embedded-store".into())
            .spawn(move || thread.run())
            .expect("spawning the embedded store's thread");
        let flusher = shared.clone();
        std::thread::Builder::new()
            .name("embedded-flush".into())
            .spawn(move || flusher.answer_when_durable())
            .expect("spawning the embedded store's flusher");
        Self {
            handle: Arc::new(Handle { shared, inline }),
        }
    }

    /// Run `operation` with its JSON `body`; answered once what it did is durable.
    ///
    /// Under load the calls queue for the engine's thread, which runs them in groups. When the
    /// store is idle, this call's request is the only one the process is serving ([`Serving`]),
    /// and calls have come [`SPARSE`]ly of late, the call is its own group and runs here, on
    /// the caller's thread, flush included: a lone caller then pays no hand-off to the thread
    /// and back (two thread wake-ups; about 9% more cycles/s for one client, BENCHMARKS.md).
    /// Calls that arrive meanwhile queue, and the thread takes them after it. Not when calls
    /// are dense, even if this one finds itself alone: many clients arrive in bursts (after each
    /// group is answered), and a worker busy flushing holds up the requests it would be parsing
    /// and signing (on "alone" only, 3% of the calls at 16 clients ran here, and cost 8% of the
    /// cycles/s). Either way one leader at a time runs a group, and its calls are answered once a
    /// flush that began after it ran is done: a lone caller's by itself, the thread's by the
    /// flusher.
    pub async fn call(&self, operation: String, body: String) -> Answer {
        let shared = &self.handle.shared;
        let (answer, answered) = tokio::sync::oneshot::channel();
        {
            let mut state = shared.lock();
            if let Some(why) = &state.failed {
                return internal_error(why);
            }
            let now = Instant::now();
            if let Some(last) = state.last_call {
                // A moving average over about the last eight calls.
                let gap = now.duration_since(last).min(SPARSE * 4);
                state.mean_gap = (state.mean_gap * 7 + gap) / 8;
            }
            state.last_call = Some(now);
            let alone = SERVING.load(Ordering::Relaxed) <= 1 && state.mean_gap >= SPARSE;
            if self.handle.inline && alone && state.lead == Lead::Idle && state.queue.is_empty() {
                state.lead = Lead::Caller;
                drop(state);
                return shared.lead_inline(&operation, &body);
            }
            state.queue.push_back(Job {
                operation,
                body,
                queued: now,
                answer,
            });
            if state.lead == Lead::Idle {
                state.lead = Lead::Thread;
                shared.work.notify_one();
            }
        }
        answered
            .await
            .unwrap_or_else(|_| internal_error("the embedded store has stopped"))
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// One call as its own group, on the caller's thread; then the lead goes to the thread if
    /// calls queued meanwhile, else back to idle.
    fn lead_inline(&self, operation: &str, body: &str) -> Answer {
        /// Gives the lead up even if the group panics, so the store is not left without one.
        struct HandOn<'a>(&'a Shared);
        impl Drop for HandOn<'_> {
            fn drop(&mut self) {
                let mut state = self.0.lock();
                if state.queue.is_empty() {
                    state.lead = Lead::Idle;
                } else {
                    state.lead = Lead::Thread;
                    self.0.work.notify_one();
                }
            }
        }
        let _hand_on = HandOn(self);
        let started = Instant::now();
        // One answer per call, always.
        let answer = self.run_group([(operation, body)]).remove(0);
        self.record(started, std::iter::once(started));
        answer
    }

    /// Counts a group that started at `started` and ends now, of calls queued at `queued`.
    fn record(&self, started: Instant, queued: impl Iterator<Item = Instant>) {
        let busy = started.elapsed();
        let mut stats = self.stats.lock().unwrap_or_else(|e| e.into_inner());
        stats.group(started, busy, queued);
    }

    /// Run a group of calls as the leader and make them durable: see [`Self::execute`] and
    /// [`Self::make_durable`]. Every answer is an error if that fails.
    fn run_group<'a>(&self, calls: impl IntoIterator<Item = (&'a str, &'a str)>) -> Vec<Answer> {
        let (answers, commits) = self.execute(calls);
        match self.make_durable(commits) {
            Ok(()) => answers,
            Err(why) => answers.iter().map(|_| internal_error(&why)).collect(),
        }
    }

    /// Run a group of calls as the leader: refuse them all if the store has failed, else run
    /// each and commit. Gives their answers and the count of committed groups ([`Self::committed`])
    /// that must be durable before they may be sent: this group's own if it wrote, else the
    /// last one it could have seen.
    ///
    /// A group of several calls that writes runs in one SQLite transaction, each call a
    /// savepoint in it (dynoxide's group transaction, vendor/README.md): a call that fails
    /// undoes only itself, and the group commits once, its pages written to the WAL once,
    /// instead of a commit, its WAL frames and its file locks per call (a third of the
    /// leader's time at 64 clients; BENCHMARKS.md, issue #47). If the group's transaction cannot
    /// be opened (another process holds the write lock past the busy timeout), the calls run as
    /// before, a transaction each.
    ///
    /// A call that panics (a bug in dynoxide or here) fails its group and the store, as a lost
    /// group does: the panic may have left a transaction open or a write half done. Left to
    /// unwind, it would end the engine's thread with the lead, and every later call would wait
    /// for an answer that never comes. (The release build aborts on a panic instead
    /// (`panic = "abort"`): the server ends, which is loud rather than hung. This is for the
    /// builds that unwind: the tests', and any embedder's.)
    fn execute<'a>(
        &self,
        calls: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> (Vec<Answer>, u64) {
        let calls: Vec<(&str, &str)> = calls.into_iter().collect();
        if let Some(why) = self.lock().failed.clone() {
            return (calls.iter().map(|_| internal_error(&why)).collect(), 0);
        }
        let wrote = calls.iter().any(|(operation, _)| !is_read(operation));
        let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.run_calls(&calls, wrote)
        }));
        match ran {
            Ok(Some(answers)) => {
                let commits = if wrote {
                    self.committed.fetch_add(1, Ordering::SeqCst) + 1
                } else {
                    self.committed.load(Ordering::SeqCst)
                };
                (answers, commits)
            }
            Ok(None) => (
                self.fail_group(&calls, "the embedded store lost a group of writes"),
                0,
            ),
            Err(_) => (
                self.fail_group(&calls, "the embedded store failed inside a call"),
                0,
            ),
        }
    }

    /// [`Self::execute`]'s work, on a store that has not failed (`wrote`: a call of the group
    /// writes): the answers, or `None` if the group's writes were lost (its transaction ended by
    /// SQLite part way, or its commit failed).
    fn run_calls(&self, calls: &[(&str, &str)], wrote: bool) -> Option<Vec<Answer>> {
        let grouped = wrote && calls.len() > 1 && self.database.begin_group().is_ok();
        let mut answers = Vec::with_capacity(calls.len());
        for &(operation, body) in calls {
            answers.push(if operation == "TransactWriteItems" {
                let mut tokens = self.tokens.lock().unwrap_or_else(|e| e.into_inner());
                tokens.run(body, Instant::now(), |body| {
                    serve(&self.database, operation, body)
                })
            } else {
                serve(&self.database, operation, body)
            });
            #[cfg(test)]
            self.fault_for_test();
            if grouped && !self.database.group_open() {
                // SQLite ended the group's transaction by itself (a full disk, an I/O error),
                // and the writes of the calls before this one with it, though they succeeded.
                return None;
            }
        }
        if grouped && let Err(e) = self.database.end_group(true) {
            tracing::error!(error = %e, "the embedded store could not commit a group");
            return None;
        }
        Some(answers)
    }

    #[cfg(test)]
    fn fault_for_test(&self) {
        let mut after = self.fault_after.lock().unwrap();
        if let Some((n, fault)) = after.as_mut() {
            *n = n.saturating_sub(1);
            if *n == 0 {
                let fault = *fault;
                *after = None;
                drop(after);
                match fault {
                    Fault::EndGroup => {
                        let _ = self.database.end_group(false);
                    }
                    Fault::Panic => panic!("a fault injected by a test"),
                }
            }
        }
    }

    /// A group whose writes did not all land though its calls ran: every one is answered with
    /// an error, and so is every later call, as after a failed flush. Carrying on would answer
    /// from state that may not match the database (the client tokens of the group's
    /// transactions, kept here, say they were applied); a restart reads the database afresh.
    fn fail_group(&self, calls: &[(&str, &str)], why: &str) -> Vec<Answer> {
        tracing::error!(why, "the embedded store stopped; restart the server");
        let mut state = self.lock();
        let why = state.failed.get_or_insert_with(|| why.to_owned()).clone();
        calls.iter().map(|_| internal_error(&why)).collect()
    }

    /// Make durable every commit up to `commits` (a count of [`Self::committed`]), unless done
    /// already; on failure, the reason every call from now on is refused with. One flush covers
    /// every commit made before it began, so it is counted up to the commits as they stood then.
    fn make_durable(&self, commits: u64) -> Result<(), String> {
        let mut durable = self.durable.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(why) = self.lock().failed.clone() {
            return Err(why);
        }
        if durable.flushed >= commits {
            return Ok(());
        }
        let upto = self.committed.load(Ordering::SeqCst);
        let flushed = match durable.flush.as_mut() {
            Some(flush) => flush.flush(),
            None => Ok(()),
        };
        match flushed {
            Ok(()) => {
                durable.flushed = upto;
                Ok(())
            }
            Err(e) => {
                let why = format!("the embedded store could not make its writes durable: {e}");
                tracing::error!(error = %e, "fsync of the embedded store failed; restart the server");
                Err(self.lock().failed.get_or_insert(why).clone())
            }
        }
    }

    /// The flusher: take every group the thread has run, make them durable with one flush, and
    /// answer them (each with the failure if the flush failed).
    fn answer_when_durable(&self) {
        loop {
            let groups: Vec<Ran> = {
                let mut state = self.lock();
                loop {
                    if !state.ran.is_empty() {
                        break state.ran.drain(..).collect();
                    }
                    if state.thread_ended {
                        return;
                    }
                    state = self.to_flush.wait(state).unwrap_or_else(|e| e.into_inner());
                }
            };
            let upto = groups.iter().map(|g| g.commits).max().unwrap_or(0);
            let durable = self.make_durable(upto);
            // A caller that went away (its request cancelled) no longer wants the answer; what
            // the operation did stands either way, as on the wire.
            for (to, answer) in groups.into_iter().flat_map(|g| g.answers) {
                let _ = to.send(match &durable {
                    Ok(()) => answer,
                    Err(why) => internal_error(why),
                });
            }
        }
    }

    /// The engine's thread: wait for the lead, take every waiting call, run them, hand them to
    /// the flusher.
    fn run(&self) {
        /// Tells the flusher the thread has ended, however it ends.
        struct Ended<'a>(&'a Shared);
        impl Drop for Ended<'_> {
            fn drop(&mut self) {
                self.0.lock().thread_ended = true;
                self.0.to_flush.notify_one();
            }
        }
        let _ended = Ended(self);
        loop {
            let group: Vec<Job> = {
                let mut state = self.lock();
                loop {
                    if state.lead == Lead::Thread {
                        if !state.queue.is_empty() {
                            let n = state.queue.len().min(MAX_GROUP);
                            break state.queue.drain(..n).collect();
                        }
                        state.lead = Lead::Idle;
                    }
                    if state.stopped && state.lead == Lead::Idle {
                        return;
                    }
                    state = self.work.wait(state).unwrap_or_else(|e| e.into_inner());
                }
            };
            let started = Instant::now();
            let (answers, commits) = self.execute(
                group
                    .iter()
                    .map(|j| (j.operation.as_str(), j.body.as_str())),
            );
            self.record(started, group.iter().map(|j| j.queued));
            let answers = group.into_iter().map(|j| j.answer).zip(answers).collect();
            self.lock().ran.push_back(Ran { answers, commits });
            self.to_flush.notify_one();
        }
    }
}

/// Tests: what goes wrong in a group.
#[cfg(test)]
#[derive(Debug, Clone, Copy)]
enum Fault {
    /// The group's transaction ends, as SQLite ends it on a full disk.
    EndGroup,
    /// A call panics.
    Panic,
}

fn internal_error(why: &str) -> Answer {
    let error = DynoxideError::InternalServerError(why.into());
    (error.status_code(), error.to_json())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant};

    /// Taken by the tests that count on how many requests the process serves ([`SERVING`] is
    /// global, and tests run at once).
    static SERVING_TESTS: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

    /// A pause long enough for the calls so far to count as sparse.
    fn pause() {
        std::thread::sleep(SPARSE * 5);
    }

    const CREATE: &str = r#"{"TableName":"things","KeySchema":[{"AttributeName":"k","KeyType":"HASH"}],
        "AttributeDefinitions":[{"AttributeName":"k","AttributeType":"S"}],
        "BillingMode":"PAY_PER_REQUEST"}"#;

    fn put(key: usize) -> String {
        format!(r#"{{"TableName":"things","Item":{{"k":{{"S":"{key}"}}}}}}"#)
    }

    fn get(key: usize) -> String {
        format!(r#"{{"TableName":"things","Key":{{"k":{{"S":"{key}"}}}}}}"#)
    }

    /// A flush that waits for the test's go-ahead, counting the flushes and failing on demand.
    #[derive(Clone, Default)]
    struct Gate {
        state: Arc<Mutex<GateState>>,
    }

    #[derive(Default)]
    struct GateState {
        flushes: usize,
        /// The thread each flush ran on.
        threads: Vec<std::thread::ThreadId>,
        closed: bool,
        fail: bool,
    }

    impl Flush for Gate {
        fn flush(&mut self) -> io::Result<()> {
            while self.state.lock().unwrap().closed {
                std::thread::sleep(Duration::from_millis(1));
            }
            // Long enough for the calls sent meanwhile to queue up behind this group.
            std::thread::sleep(Duration::from_millis(5));
            let mut state = self.state.lock().unwrap();
            state.flushes += 1;
            state.threads.push(std::thread::current().id());
            if state.fail {
                Err(io::Error::other("disk gone"))
            } else {
                Ok(())
            }
        }
    }

    /// An engine on `gate`; `inline` lets a lone caller lead (see [`Engine::call`]). Without,
    /// every call goes through the thread: the tests that hold its flush closed from the test's
    /// own thread need that thread not to be the one flushing.
    fn engine_with(gate: &Gate, inline: bool) -> Engine {
        Engine::start(
            Database::memory().unwrap(),
            Some(Box::new(gate.clone())),
            inline,
        )
    }

    /// An engine on a gate of its own (see [`engine_with`]), with the table made.
    async fn with_table(inline: bool) -> (Gate, Engine) {
        let gate = Gate::default();
        let engine = engine_with(&gate, inline);
        engine.call("CreateTable".into(), CREATE.into()).await;
        (gate, engine)
    }

    /// A quiet store runs a lone call on its caller's thread, flush included.
    #[tokio::test]
    async fn a_lone_call_on_a_quiet_store_runs_and_flushes_on_its_callers_thread() {
        let _serial = SERVING_TESTS.lock().await;
        let (gate, engine) = with_table(true).await;
        pause();
        let _request = Serving::start();
        assert_eq!(engine.call("PutItem".into(), put(1)).await.0, 200);
        let state = gate.state.lock().unwrap();
        assert_eq!(state.threads.last(), Some(&std::thread::current().id()));
    }

    /// While another request is being served, a call goes to the engine's thread even on an
    /// idle store: this worker is not to be held up flushing.
    #[tokio::test]
    async fn a_call_while_other_requests_are_served_goes_to_the_thread() {
        let _serial = SERVING_TESTS.lock().await;
        let (gate, engine) = with_table(true).await;
        let _this = Serving::start();
        let other = Serving::start();
        pause();
        assert_eq!(engine.call("PutItem".into(), put(1)).await.0, 200);
        let last = *gate.state.lock().unwrap().threads.last().unwrap();
        assert_ne!(last, std::thread::current().id());
        // Once the other request is done, this one is alone again.
        drop(other);
        pause();
        assert_eq!(engine.call("PutItem".into(), put(2)).await.0, 200);
        let last = *gate.state.lock().unwrap().threads.last().unwrap();
        assert_eq!(last, std::thread::current().id());
    }

    /// Calls close together go to the thread even one at a time.
    #[tokio::test]
    async fn calls_close_together_go_to_the_thread() {
        let _serial = SERVING_TESTS.lock().await;
        let (gate, engine) = with_table(true).await;
        // The premise is calls closer together than SPARSE: on a machine busy with other work
        // (a parallel build) a burst can come out sparser, so it is tried again until one was
        // dense (the fresh-clone CI of 2026-12-05 met one that was not).
        for _ in 0..20 {
            let started = Instant::now();
            for i in 0..16 {
                engine.call("GetItem".into(), get(i)).await;
            }
            if started.elapsed() / 16 >= SPARSE {
                continue;
            }
            assert_eq!(engine.call("PutItem".into(), put(1)).await.0, 200);
            let last = *gate.state.lock().unwrap().threads.last().unwrap();
            assert_ne!(last, std::thread::current().id());
            return;
        }
        panic!("no burst of 16 calls came closer together than {SPARSE:?} apart in 20 tries");
    }

    /// A call that arrives while a caller leads waits for that group, then is its own, run and
    /// flushed by the engine's thread before it is answered.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_call_behind_a_leading_caller_is_run_and_flushed_by_the_thread() {
        let _serial = SERVING_TESTS.lock().await;
        let (gate, engine) = with_table(true).await;
        pause();
        gate.state.lock().unwrap().closed = true;
        let leader = std::thread::spawn({
            let engine = engine.clone();
            move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                let answer = runtime.block_on(engine.call("PutItem".into(), put(1)));
                (answer, std::thread::current().id())
            }
        });
        // The leader is in its flush (held closed) once the store has a caller for a lead.
        let started = Instant::now();
        while engine.handle.shared.lock().lead != Lead::Caller {
            assert!(
                started.elapsed() < Duration::from_secs(5),
                "no caller took the lead"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        let behind = tokio::spawn({
            let engine = engine.clone();
            async move { engine.call("PutItem".into(), put(2)).await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!behind.is_finished(), "answered before any flush");
        gate.state.lock().unwrap().closed = false;
        let (answer, leader_thread) = leader.join().unwrap();
        assert_eq!(answer.0, 200);
        assert_eq!(behind.await.unwrap().0, 200);
        let threads = gate.state.lock().unwrap().threads.clone();
        let n = threads.len();
        assert_eq!(
            threads[n - 2],
            leader_thread,
            "the leader flushed its own call"
        );
        assert_ne!(threads[n - 1], leader_thread, "the thread flushed the next");
        let (_, body) = engine.call("GetItem".into(), get(2)).await;
        assert!(body.contains(r#""S":"2""#), "{body}");
    }

    #[tokio::test]
    async fn a_write_is_answered_only_after_its_flush() {
        let gate = Gate::default();
        let engine = engine_with(&gate, false);
        assert_eq!(
            engine.call("CreateTable".into(), CREATE.into()).await.0,
            200
        );
        gate.state.lock().unwrap().closed = true;
        let pending = tokio::spawn({
            let engine = engine.clone();
            async move { engine.call("PutItem".into(), put(1)).await }
        });
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(!pending.is_finished(), "answered before the flush");
        gate.state.lock().unwrap().closed = false;
        assert_eq!(pending.await.unwrap().0, 200);
    }

    #[tokio::test]
    async fn reads_alone_are_not_flushed() {
        let (gate, engine) = with_table(false).await;
        let before = gate.state.lock().unwrap().flushes;
        let (status, body) = engine.call("GetItem".into(), get(1)).await;
        assert_eq!((status, body.as_str()), (200, "{}"));
        assert_eq!(gate.state.lock().unwrap().flushes, before);
    }

    /// Callers arriving together share the thread's groups and flushes, and every write lands:
    /// through the thread only, and with lone callers allowed to lead (they do not, arriving
    /// together: a caller that leads, leads its own call only).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_writes_share_flushes_and_all_land() {
        for inline in [false, true] {
            let (gate, engine) = with_table(inline).await;
            let before = gate.state.lock().unwrap().flushes;
            let writes: Vec<_> = (0..64)
                .map(|i| {
                    let engine = engine.clone();
                    tokio::spawn(async move { engine.call("PutItem".into(), put(i)).await })
                })
                .collect();
            for write in writes {
                assert_eq!(write.await.unwrap().0, 200);
            }
            let flushes = gate.state.lock().unwrap().flushes - before;
            assert!(
                (1..32).contains(&flushes),
                "{flushes} flushes for 64 writes (inline {inline})"
            );
            for i in 0..64 {
                let (_, body) = engine.call("GetItem".into(), get(i)).await;
                assert!(body.contains(&format!(r#""S":"{i}""#)), "{i}: {body}");
            }
        }
    }

    #[tokio::test]
    async fn a_failed_flush_fails_its_group_and_every_call_after() {
        // Through the thread, and led by a lone caller on a quiet store.
        let _serial = SERVING_TESTS.lock().await;
        for inline in [false, true] {
            let (gate, engine) = with_table(inline).await;
            pause();
            gate.state.lock().unwrap().fail = true;
            let (status, body) = engine.call("PutItem".into(), put(1)).await;
            assert_eq!(status, 500, "{body}");
            assert!(body.contains("durable"), "{body}");
            gate.state.lock().unwrap().fail = false;
            pause();
            let (status, _) = engine.call("GetItem".into(), get(1)).await;
            assert_eq!(
                status, 500,
                "a read after a failed fsync must not be answered"
            );
        }
    }

    /// A conditional put on key 1 that fails once the key exists.
    fn put_new(key: usize, tag: &str) -> String {
        format!(
            r#"{{"TableName":"things","Item":{{"k":{{"S":"{key}"}},"tag":{{"S":"{tag}"}}}},"ConditionExpression":"attribute_not_exists(k)"}}"#
        )
    }

    /// A group that writes runs in one transaction, flushed once; a call refused in it undoes
    /// only itself, and the group's other writes land.
    #[tokio::test]
    async fn a_group_commits_once_and_a_refused_call_undoes_only_itself() {
        let (gate, engine) = with_table(false).await;
        let shared = &engine.handle.shared;
        let before = gate.state.lock().unwrap().flushes;
        let (first, again, second) = (
            put_new(1, "first"),
            put_new(1, "again"),
            put_new(2, "second"),
        );
        let statuses: Vec<u16> = shared
            .run_group([
                ("PutItem", first.as_str()),
                ("PutItem", again.as_str()),
                ("PutItem", second.as_str()),
                ("GetItem", get(2).as_str()),
            ])
            .into_iter()
            .map(|(status, _)| status)
            .collect();
        assert_eq!(
            statuses,
            [200, 400, 200, 200],
            "the second put of key 1 is refused"
        );
        assert_eq!(gate.state.lock().unwrap().flushes - before, 1);
        let (_, one) = engine.call("GetItem".into(), get(1)).await;
        assert!(
            one.contains(r#""first""#) && !one.contains("again"),
            "{one}"
        );
        let (_, two) = engine.call("GetItem".into(), get(2)).await;
        assert!(two.contains(r#""second""#), "{two}");
    }

    /// When SQLite ends the group's transaction by itself (a full disk, an I/O error), the
    /// writes of the calls before went with it though they succeeded: every call of the group
    /// is answered with an error, nothing is flushed, and every later call is refused, as after
    /// a failed flush.
    #[tokio::test]
    async fn a_group_whose_transaction_ends_fails_every_call_and_every_later_one() {
        let (gate, engine) = with_table(false).await;
        let shared = &engine.handle.shared;
        let before = gate.state.lock().unwrap().flushes;
        *shared.fault_after.lock().unwrap() = Some((2, Fault::EndGroup));
        let answers = shared.run_group([
            ("PutItem", put(1).as_str()),
            ("PutItem", put(2).as_str()),
            ("PutItem", put(3).as_str()),
        ]);
        assert!(
            answers.iter().all(|(status, _)| *status == 500),
            "{answers:?}"
        );
        assert_eq!(
            gate.state.lock().unwrap().flushes,
            before,
            "nothing flushed"
        );
        // The first call's write is gone with the group, and the third never ran.
        for key in [1, 3] {
            assert_eq!(serve(&shared.database, "GetItem", &get(key)).1, "{}");
        }
        let (status, _) = engine.call("GetItem".into(), get(1)).await;
        assert_eq!(
            status, 500,
            "a call after a lost group must not be answered"
        );
    }

    /// The flush finds the database's log under its name (a wrong path would fail the flush, and
    /// so the write's answer); what it made durable reads back after a reopen. (A power cut is
    /// not simulated here: that the answer waits for the flush is the test above.)
    #[tokio::test]
    async fn the_flush_finds_the_log_on_disk() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db.sqlite3");
        let engine = Engine::open(&path).unwrap();
        assert_eq!(
            engine.call("CreateTable".into(), CREATE.into()).await.0,
            200
        );
        assert_eq!(engine.call("PutItem".into(), put(1)).await.0, 200);
        // Answered, so flushed: the log is there under its name and holds the commit.
        let wal = dir.path().join("db.sqlite3-wal");
        assert!(std::fs::metadata(&wal).unwrap().len() > 0);
        drop(engine);
        let database = Database::new(path.to_str().unwrap()).unwrap();
        let found = serve(&database, "GetItem", &get(1)).1;
        assert!(found.contains(r#""S":"1""#), "{found}");
    }

    /// A call that panics fails its group and every later call, on the engine's thread or a
    /// lone caller's: before, the panic ended the thread with the lead, and the next call
    /// waited for ever.
    #[tokio::test]
    async fn a_call_that_panics_fails_its_group_and_every_later_call_instead_of_hanging() {
        let _serial = SERVING_TESTS.lock().await;
        for inline in [false, true] {
            let (_gate, engine) = with_table(inline).await;
            pause();
            let shared = &engine.handle.shared;
            *shared.fault_after.lock().unwrap() = Some((1, Fault::Panic));
            let _request = Serving::start();
            let (status, _) = engine.call("PutItem".into(), put(1)).await;
            assert_eq!(status, 500, "inline: {inline}");
            let later = tokio::time::timeout(
                Duration::from_secs(10),
                engine.call("GetItem".into(), get(1)),
            )
            .await
            .unwrap_or_else(|_| panic!("a call after a panic hung (inline: {inline})"));
            assert_eq!(later.0, 500, "inline: {inline}: {later:?}");
        }
    }

    /// A parsed expression is remembered by its text (dynoxide's fourth addition,
    /// vendor/README.md): the same text with other values is decided on those values, and a
    /// text that does not parse is refused the same way every time, on the engine's thread and
    /// on a lone caller's.
    #[tokio::test]
    async fn a_remembered_expression_is_decided_on_each_calls_values() {
        for inline in [true, false] {
            let engine = engine_with(&Gate::default(), inline);
            let created = engine.call("CreateTable".into(), CREATE.into()).await;
            assert_eq!(created.0, 200, "{created:?}");
            let update = |expected: u64, next: u64| {
                format!(
                    r##"{{"TableName":"things","Key":{{"k":{{"S":"1"}}}},
                        "UpdateExpression":"SET #n = :next",
                        "ConditionExpression":"attribute_not_exists(#n) OR #n = :expected",
                        "ExpressionAttributeNames":{{"#n":"n"}},
                        "ExpressionAttributeValues":{{":next":{{"N":"{next}"}},":expected":{{"N":"{expected}"}}}}}}"##
                )
            };
            for (expected, next, status) in [(0, 1, 200), (1, 2, 200), (1, 3, 400), (2, 3, 200)] {
                let (got, answer) = engine
                    .call("UpdateItem".into(), update(expected, next))
                    .await;
                assert_eq!(got, status, "{expected} -> {next}: {answer}");
                if status == 400 {
                    assert!(answer.contains("ConditionalCheckFailed"), "{answer}");
                }
            }
            let (_, item) = engine.call("GetItem".into(), get(1)).await;
            assert!(item.contains(r#""n":{"N":"3"}"#), "{item}");
            let bad = r#"{"TableName":"things","Key":{"k":{"S":"1"}},"UpdateExpression":"SET = :v",
                "ExpressionAttributeValues":{":v":{"N":"1"}}}"#;
            let first = engine.call("UpdateItem".into(), bad.into()).await;
            assert_eq!(first.0, 400, "{first:?}");
            assert!(first.1.contains("Syntax error"), "{first:?}");
            assert_eq!(engine.call("UpdateItem".into(), bad.into()).await, first);
        }
    }

    /// An index row stays right through writes that leave the index's attributes alone (which
    /// skip rewriting it: dynoxide's second addition, vendor/README.md) and writes that move it,
    /// drop it or bring it back, by each kind of write, alone and in a group.
    #[tokio::test]
    async fn an_index_follows_every_write_whether_or_not_it_changes_the_row() {
        let engine = Engine::memory();
        let create = r#"{"TableName":"tab","KeySchema":[{"AttributeName":"k","KeyType":"HASH"}],
            "AttributeDefinitions":[{"AttributeName":"k","AttributeType":"S"},
                {"AttributeName":"g","AttributeType":"S"},{"AttributeName":"r","AttributeType":"S"}],
            "GlobalSecondaryIndexes":[{"IndexName":"by-g","Projection":{"ProjectionType":"KEYS_ONLY"},
                "KeySchema":[{"AttributeName":"g","KeyType":"HASH"},{"AttributeName":"r","KeyType":"RANGE"}]}],
            "BillingMode":"PAY_PER_REQUEST"}"#;
        let created = engine.call("CreateTable".into(), create.into()).await;
        assert_eq!(created.0, 200, "{created:?}");
        let call = |operation: &'static str, body: String| {
            let engine = engine.clone();
            async move {
                let (status, answer) = engine.call(operation.into(), body).await;
                assert_eq!(status, 200, "{operation}: {answer}");
            }
        };
        // What the index holds under `g`: the items' keys and their `r`.
        let index = |g: &'static str| {
            let engine = engine.clone();
            async move {
                let query = format!(
                    r#"{{"TableName":"tab","IndexName":"by-g","KeyConditionExpression":"g = :g",
                        "ExpressionAttributeValues":{{":g":{{"S":"{g}"}}}}}}"#
                );
                let (status, answer) = engine.call("Query".into(), query).await;
                assert_eq!(status, 200, "{answer}");
                let answer: serde_json::Value = serde_json::from_str(&answer).unwrap();
                let mut rows: Vec<String> = answer["Items"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|item| format!("{}={}", item["k"]["S"], item["r"]["S"]))
                    .collect();
                rows.sort();
                rows.join(" ").replace('"', "")
            }
        };
        // An update of item 1; the values it may name: :v, :s, :a and :b strings, :n the number 1.
        let update = |set: &str| {
            let values: Vec<String> = [
                (":v", r#"{"S":"x"}"#),
                (":s", r#"{"S":"s"}"#),
                (":a", r#"{"S":"a"}"#),
                (":b", r#"{"S":"b"}"#),
                (":n", r#"{"N":"1"}"#),
            ]
            .iter()
            .filter(|(name, _)| set.contains(name))
            .map(|(name, value)| format!(r#""{name}":{value}"#))
            .collect();
            let values = if values.is_empty() {
                String::new()
            } else {
                format!(r#","ExpressionAttributeValues":{{{}}}"#, values.join(","))
            };
            format!(
                r#"{{"TableName":"tab","Key":{{"k":{{"S":"1"}}}},"UpdateExpression":"{set}"{values}}}"#
            )
        };
        let put = |g: &str, r: &str, other: &str| {
            format!(
                r#"{{"TableName":"tab","Item":{{"k":{{"S":"1"}},"g":{{"S":"{g}"}},"r":{{"S":"{r}"}},"o":{{"S":"{other}"}}}}}}"#
            )
        };
        call("PutItem", put("a", "r1", "one")).await;
        assert_eq!(index("a").await, "1=r1");
        // Writes that leave g and r alone: the row stays, once.
        call("PutItem", put("a", "r1", "two")).await;
        call("UpdateItem", update("SET o = :v ADD n :n")).await;
        let transact = format!(
            r#"{{"TransactItems":[{{"Update":{}}}]}}"#,
            update("SET o = :s")
        );
        call("TransactWriteItems", transact).await;
        assert_eq!(index("a").await, "1=r1");
        // A sort key that moves, a partition key that moves.
        call("UpdateItem", update("SET r = :v")).await;
        assert_eq!(index("a").await, "1=x");
        call("UpdateItem", update("SET g = :b")).await;
        assert_eq!(
            (index("a").await.as_str(), index("b").await.as_str()),
            ("", "1=x")
        );
        // Out of the index (sparse), a write that leaves it out, and back in.
        call("UpdateItem", update("REMOVE g")).await;
        call("UpdateItem", update("SET o = :v")).await;
        assert_eq!(
            (index("a").await.as_str(), index("b").await.as_str()),
            ("", "")
        );
        call("UpdateItem", update("SET g = :a")).await;
        assert_eq!(index("a").await, "1=x");
        // The same in one group: the last write decides.
        let shared = &engine.handle.shared;
        let (first, second, third) = (
            put("a", "r2", "p"),
            update("SET o = :v"),
            update("SET g = :b"),
        );
        let answers = shared.run_group([
            ("PutItem", first.as_str()),
            ("UpdateItem", second.as_str()),
            ("UpdateItem", third.as_str()),
        ]);
        assert!(
            answers.iter().all(|(status, _)| *status == 200),
            "{answers:?}"
        );
        assert_eq!(
            (index("a").await.as_str(), index("b").await.as_str()),
            ("", "1=r2")
        );
        // A delete takes the row.
        call(
            "DeleteItem",
            r#"{"TableName":"tab","Key":{"k":{"S":"1"}}}"#.into(),
        )
        .await;
        assert_eq!(index("b").await, "");
    }

    /// The thread runs the next group while the flusher makes the last one durable, so a read
    /// may see a write not yet flushed: its answer waits for that flush all the same, whether
    /// the thread ran it or a lone caller that leads.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_read_of_a_write_not_yet_flushed_waits_for_that_flush() {
        let _serial = SERVING_TESTS.lock().await;
        for inline in [false, true] {
            let (gate, engine) = with_table(inline).await;
            gate.state.lock().unwrap().closed = true;
            // Two requests served: the write goes to the thread, and the flusher holds it.
            let (this, other) = (Serving::start(), Serving::start());
            let write = tokio::spawn({
                let engine = engine.clone();
                async move { engine.call("PutItem".into(), put(1)).await }
            });
            let started = Instant::now();
            while engine.handle.shared.committed.load(Ordering::SeqCst) < 2 {
                assert!(
                    started.elapsed() < Duration::from_secs(5),
                    "the write never ran"
                );
                std::thread::sleep(Duration::from_millis(1));
            }
            drop((this, other));
            pause();
            // One request (this read): alone, it is led by its caller when `inline`.
            let read = std::thread::spawn({
                let engine = engine.clone();
                move || {
                    let _request = Serving::start();
                    let runtime = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .unwrap();
                    runtime.block_on(engine.call("GetItem".into(), get(1)))
                }
            });
            tokio::time::sleep(Duration::from_millis(100)).await;
            assert!(
                !read.is_finished() && !write.is_finished(),
                "answered before the flush (inline: {inline})"
            );
            gate.state.lock().unwrap().closed = false;
            assert_eq!(write.await.unwrap().0, 200);
            let (status, body) = read.join().unwrap();
            assert_eq!(status, 200);
            assert!(
                body.contains(r#""S":"1""#),
                "the read saw the write: {body}"
            );
        }
    }

    /// The thread does not wait for the flusher: groups run while a flush is in hand, and the
    /// groups handed over meanwhile share the next flush.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn groups_run_during_a_flush_and_share_the_next() {
        let (gate, engine) = with_table(false).await;
        gate.state.lock().unwrap().closed = true;
        let before = gate.state.lock().unwrap().flushes;
        let mut writes = Vec::new();
        for i in 0..8 {
            writes.push(tokio::spawn({
                let engine = engine.clone();
                async move { engine.call("PutItem".into(), put(i)).await }
            }));
            // Each its own group, run while the first group's flush is held.
            let started = Instant::now();
            while engine.handle.shared.committed.load(Ordering::SeqCst) < 2 + i as u64 {
                assert!(
                    started.elapsed() < Duration::from_secs(5),
                    "write {i} never ran"
                );
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        gate.state.lock().unwrap().closed = false;
        for write in writes {
            assert_eq!(write.await.unwrap().0, 200);
        }
        let flushes = gate.state.lock().unwrap().flushes - before;
        assert!((1..=2).contains(&flushes), "{flushes} flushes for 8 groups");
    }
}
