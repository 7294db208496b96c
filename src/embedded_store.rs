//! The embedded store's engine: dynoxide's database on a thread of its own, committing in groups.
//!
//! dynoxide runs each operation to completion on the thread that calls it and serializes them
//! all on one lock, so one thread loses no parallelism; it saves the hand-offs. (With a blocking
//! pool thread per call, each call woke a pool thread that queued on dynoxide's lock, and each
//! release of the lock woke the next waiter.)
//!
//! Group commit. With SQLite's default `synchronous=FULL` every commit is fsynced alone, so the
//! store did one fsync per write, one write at a time, and that alone capped the local server
//! below etcd on this machine (BENCHMARKS.md). Instead the database runs with
//! `synchronous=NORMAL` (in WAL mode: commits are written to the WAL but not fsynced; SQLite still
//! syncs around checkpoints, so the file stays consistent), and this thread takes every call
//! waiting in its queue, runs them one after another, then fsyncs the WAL once, and only then
//! answers them. Every answer, a read's included, is sent after the fsync that made what it saw
//! durable: what an answer says survives a power cut exactly as with `synchronous=FULL`. Under
//! load the calls that arrive during one fsync share the next.
//!
//! If the fsync fails, nothing the engine answered since the last good one can be trusted to be
//! on disk: every call of that group, and every later one, is answered with an internal error, and
//! the server must be restarted (PostgreSQL's lesson: after a failed fsync the page cache no
//! longer says what the disk holds).

use dynoxide::{Database, DynoxideError};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::fs::File;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc;

/// The most calls one group takes: a bound on how long the first of them waits for its answer.
const MAX_GROUP: usize = 256;

/// A handle on the engine's thread; clones share it. The thread ends with the last clone.
#[derive(Clone)]
pub struct Engine {
    jobs: mpsc::Sender<Job>,
}

/// One call: the operation, its JSON body, and where its status and answer go.
struct Job {
    operation: String,
    body: String,
    answer: tokio::sync::oneshot::Sender<Answer>,
}

/// The HTTP status and JSON body DynamoDB would answer with.
pub type Answer = (u16, String);

/// Makes every commit so far durable.
trait Flush: Send + 'static {
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
        Ok(Self::start(database, Some(Box::new(wal))))
    }

    /// An engine on an in-memory database: nothing to make durable.
    #[cfg(test)]
    pub fn memory() -> Self {
        Self::start(Database::memory().expect("an in-memory database"), None)
    }

    fn start(database: Database, flush: Option<Box<dyn Flush>>) -> Self {
        let (jobs, queue) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("embedded-store".into())
            .spawn(move || run(&database, flush, &queue))
            .expect("spawning the embedded store's thread");
        Self { jobs }
    }

    /// Run `operation` with its JSON `body`; answered once what it did is durable.
    pub async fn call(&self, operation: String, body: String) -> Answer {
        let (answer, answered) = tokio::sync::oneshot::channel();
        let job = Job {
            operation,
            body,
            answer,
        };
        if self.jobs.send(job).is_err() {
            return internal_error("the embedded store has stopped");
        }
        answered
            .await
            .unwrap_or_else(|_| internal_error("the embedded store has stopped"))
    }
}

/// The engine's loop: take every waiting call, run them, flush once, answer them.
fn run(database: &Database, mut flush: Option<Box<dyn Flush>>, queue: &mpsc::Receiver<Job>) {
    let mut failed: Option<String> = None;
    while let Ok(first) = queue.recv() {
        let group: Vec<Job> = std::iter::once(first)
            .chain(queue.try_iter().take(MAX_GROUP - 1))
            .collect();
        if let Some(why) = &failed {
            for job in group {
                let _ = job.answer.send(internal_error(why));
            }
            continue;
        }
        let wrote = group.iter().any(|job| !is_read(&job.operation));
        let answers: Vec<(Job, Answer)> = group
            .into_iter()
            .map(|job| {
                let answer = serve(database, &job.operation, &job.body);
                (job, answer)
            })
            .collect();
        let flushed = match &mut flush {
            Some(flush) if wrote => flush.flush(),
            _ => Ok(()),
        };
        if let Err(e) = flushed {
            let why = format!("the embedded store could not make its writes durable: {e}");
            tracing::error!(error = %e, "fsync of the embedded store failed; restart the server");
            failed = Some(why);
        }
        for (job, answer) in answers {
            // A caller that went away (its request cancelled) no longer wants the answer; what
            // the operation did stands either way, as on the wire.
            let answer = match &failed {
                Some(why) => internal_error(why),
                None => answer,
            };
            let _ = job.answer.send(answer);
        }
    }
}

/// Operations that never write: a group of only these needs no flush.
fn is_read(operation: &str) -> bool {
    matches!(
        operation,
        "GetItem" | "BatchGetItem" | "Query" | "Scan" | "TransactGetItems" | "DescribeTable"
    )
}

fn internal_error(why: &str) -> Answer {
    let error = DynoxideError::InternalServerError(why.into());
    (error.status_code(), error.to_json())
}

/// The answer DynamoDB would give `operation`. Only the operations this service sends are
/// routed; any other is refused as DynamoDB refuses an unknown operation. Inputs come from the
/// SDK, so they are well formed: a body that does not decode is answered with a
/// SerializationException, as dynoxide's server would.
fn serve(db: &Database, operation: &str, body: &str) -> Answer {
    let result = match operation {
        "GetItem" => run_op(body, |r| db.get_item(r)),
        "BatchGetItem" => run_op(body, |r| db.batch_get_item(r)),
        "PutItem" => run_op(body, |r| db.put_item(r)),
        "UpdateItem" => run_op(body, |r| db.update_item(r)),
        "DeleteItem" => run_op(body, |r| db.delete_item(r)),
        "Query" => run_op(body, |r| db.query(r)),
        "Scan" => run_op(body, |r| db.scan(r)),
        "TransactGetItems" => run_op(body, |r| db.transact_get_items(r)),
        "TransactWriteItems" => run_op(body, |r| db.transact_write_items(r)),
        "CreateTable" => run_op(body, |r| db.create_table(r)),
        "DescribeTable" => run_op(body, |r| db.describe_table(r)),
        "UpdateTable" => run_op(body, |r| db.update_table(r)),
        "UpdateTimeToLive" => run_op(body, |r| db.update_time_to_live(r)),
        _ => {
            return (
                400,
                r#"{"__type":"com.amazon.coral.service#UnknownOperationException"}"#.into(),
            );
        }
    };
    match result {
        Ok(json) => (200, json),
        Err(e) => (e.status_code(), e.to_json()),
    }
}

/// Decode the request, run it, encode the answer.
fn run_op<Q, A>(body: &str, op: impl FnOnce(Q) -> dynoxide::Result<A>) -> dynoxide::Result<String>
where
    Q: DeserializeOwned,
    A: Serialize,
{
    let request = serde_json::from_str(body)
        .map_err(|e| DynoxideError::SerializationException(e.to_string()))?;
    let answer = op(request)?;
    serde_json::to_string(&answer).map_err(|e| DynoxideError::InternalServerError(e.to_string()))
}

/// The database's write-ahead log, `<database>-wal`: where every commit lands first.
struct WalFile {
    path: PathBuf,
    dir: PathBuf,
    /// The open log and its inode, so that a log replaced under the same name is noticed.
    open: Option<(File, u64)>,
}

impl WalFile {
    fn new(database: &Path) -> Self {
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

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
            if state.fail {
                Err(io::Error::other("disk gone"))
            } else {
                Ok(())
            }
        }
    }

    fn engine_with(gate: &Gate) -> Engine {
        Engine::start(Database::memory().unwrap(), Some(Box::new(gate.clone())))
    }

    #[tokio::test]
    async fn a_write_is_answered_only_after_its_flush() {
        let gate = Gate::default();
        let engine = engine_with(&gate);
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
        let gate = Gate::default();
        let engine = engine_with(&gate);
        engine.call("CreateTable".into(), CREATE.into()).await;
        let before = gate.state.lock().unwrap().flushes;
        let (status, body) = engine.call("GetItem".into(), get(1)).await;
        assert_eq!((status, body.as_str()), (200, "{}"));
        assert_eq!(gate.state.lock().unwrap().flushes, before);
    }

    #[tokio::test]
    async fn concurrent_writes_share_flushes_and_all_land() {
        let gate = Gate::default();
        let engine = engine_with(&gate);
        engine.call("CreateTable".into(), CREATE.into()).await;
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
            "{flushes} flushes for 64 writes"
        );
        for i in 0..64 {
            let (_, body) = engine.call("GetItem".into(), get(i)).await;
            assert!(body.contains(&format!(r#""S":"{i}""#)), "{i}: {body}");
        }
    }

    #[tokio::test]
    async fn a_failed_flush_fails_its_group_and_every_call_after() {
        let gate = Gate::default();
        let engine = engine_with(&gate);
        engine.call("CreateTable".into(), CREATE.into()).await;
        gate.state.lock().unwrap().fail = true;
        let (status, body) = engine.call("PutItem".into(), put(1)).await;
        assert_eq!(status, 500, "{body}");
        assert!(body.contains("durable"), "{body}");
        gate.state.lock().unwrap().fail = false;
        let (status, _) = engine.call("GetItem".into(), get(1)).await;
        assert_eq!(
            status, 500,
            "a read after a failed fsync must not be answered"
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
}
