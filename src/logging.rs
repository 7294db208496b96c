//! Where the log lines go: stderr, as every command writes them; a server's lines (one per
//! request, see `leasekit_core::http::observe`) in batches, by a thread of their own.
//!
//! Why batches: written from the request's task, each line was a write(2) on the request path,
//! which cost 6-14% of the local server's cycles/s at 64 clients (BENCHMARKS.md, issue #47). A
//! writer thread woken per line (as a channel to it does) would trade that for a futex wake and a
//! context switch per line. Here a line is appended to a buffer under a lock, and the writer
//! thread writes what has gathered every [`INTERVAL`], or sooner when it passes [`WAKE_AT`].
//!
//! Nothing is dropped: past [`HIGH_WATER`] a line's writer waits for the buffer to be written (a
//! stalled stderr slows requests down rather than losing their lines). What is buffered is written
//! when [`Logging`] is dropped, and before a panic's message; a process killed with SIGKILL loses
//! the lines of its last [`INTERVAL`] at most.

use std::io::{IsTerminal, Write};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;
use tracing_subscriber::fmt::MakeWriter;

/// The default filter: our own lines at info, the SDK's warnings, dynoxide's errors.
const DEFAULT_FILTER: &str = "info,aws=warn,dynoxide=error";

/// How long a line waits, at most, to be written (on a quiet server too).
const INTERVAL: Duration = Duration::from_millis(50);

/// A buffer this large is written at once (about 800 request lines).
const WAKE_AT: usize = 256 * 1024;

/// A buffer this large makes a line's writer wait until it is written.
const HIGH_WATER: usize = 4 * WAKE_AT;

/// Logging set up; what is still buffered is written when this is dropped.
#[must_use = "dropping it at once stops the batched writer"]
pub struct Logging {
    batches: Option<Batches>,
}

/// Log to stderr, filtered by `RUST_LOG` (else [`DEFAULT_FILTER`]): in batches if `batched` (for a
/// server), else as each line is made (a command's few lines, in order with what it prints).
pub fn init(batched: bool) -> Logging {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| DEFAULT_FILTER.into());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        // Colours only for a person at a terminal, not for files and log collectors.
        .with_ansi(std::io::stderr().is_terminal());
    if !batched {
        builder.with_writer(std::io::stderr).init();
        return Logging { batches: None };
    }
    let batches = Batches::start(std::io::stderr());
    builder.with_writer(batches.writer()).init();
    let buffer = batches.writer();
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        // The lines before a panic, then its message (the release build aborts after it).
        buffer.flush_now();
        report(info);
    }));
    Logging {
        batches: Some(batches),
    }
}

impl Drop for Logging {
    fn drop(&mut self) {
        if let Some(batches) = self.batches.take() {
            batches.stop();
        }
    }
}

struct Shared {
    state: Mutex<State>,
    /// The writer thread waits on it for the next batch.
    gathered: Condvar,
    /// A line's writer waits on it past [`HIGH_WATER`].
    written: Condvar,
    sink: Mutex<Box<dyn Write + Send>>,
}

#[derive(Default)]
struct State {
    buffer: Vec<u8>,
    stopping: bool,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A writer that panicked left whole lines (a line is appended in one piece).
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn append(&self, line: &[u8]) {
        let mut state = self.lock();
        while state.buffer.len() >= HIGH_WATER && !state.stopping {
            state = self
                .written
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
        let before = state.buffer.len();
        state.buffer.extend_from_slice(line);
        // Wake the writer once as the buffer passes WAKE_AT, not per line.
        if before < WAKE_AT && state.buffer.len() >= WAKE_AT {
            self.gathered.notify_one();
        }
    }

    /// Write what is buffered; `false` once stopping and nothing is left.
    fn write_batch(&self, wait: bool) -> bool {
        let mut state = self.lock();
        if wait && !state.stopping && state.buffer.len() < WAKE_AT {
            state = self
                .gathered
                .wait_timeout(state, INTERVAL)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        let batch = std::mem::take(&mut state.buffer);
        let more = !state.stopping;
        // The sink is taken before the buffer's lock is given up, so batches keep their order.
        let mut sink = self.sink.lock().unwrap_or_else(PoisonError::into_inner);
        drop(state);
        self.written.notify_all();
        // A log line that cannot be written has nowhere to be reported.
        let _ = sink.write_all(&batch);
        let _ = sink.flush();
        more || !batch.is_empty()
    }
}

/// A buffer of log lines and the thread that writes it to a sink.
struct Batches {
    shared: Arc<Shared>,
    thread: JoinHandle<()>,
}

impl Batches {
    fn start(sink: impl Write + Send + 'static) -> Self {
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            gathered: Condvar::new(),
            written: Condvar::new(),
            sink: Mutex::new(Box::new(sink)),
        });
        let writer = shared.clone();
        let thread = std::thread::Builder::new()
            .name("log-writer".into())
            .spawn(move || while writer.write_batch(true) {})
            .expect("a thread to write log lines");
        Self { shared, thread }
    }

    fn writer(&self) -> Buffer {
        Buffer(self.shared.clone())
    }

    /// Write what is buffered and end the thread.
    fn stop(self) {
        self.shared.lock().stopping = true;
        self.shared.gathered.notify_one();
        self.shared.written.notify_all();
        let _ = self.thread.join();
        // Lines appended while the thread ended.
        self.shared.write_batch(false);
    }
}

/// Where the formatter writes a line: the buffer.
#[derive(Clone)]
struct Buffer(Arc<Shared>);

impl Buffer {
    /// Write what is buffered, from a panic hook: it gives up rather than wait for a lock, which
    /// the panicking thread may hold itself.
    fn flush_now(&self) {
        let Ok(mut state) = self.0.state.try_lock() else {
            return;
        };
        let Ok(mut sink) = self.0.sink.try_lock() else {
            return;
        };
        let _ = sink.write_all(&std::mem::take(&mut state.buffer));
        let _ = sink.flush();
    }
}

/// The formatter writes each line with one `write_all` of the whole line.
impl Write for &Buffer {
    fn write(&mut self, line: &[u8]) -> std::io::Result<usize> {
        self.0.append(line);
        Ok(line.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for Buffer {
    type Writer = &'a Buffer;

    fn make_writer(&'a self) -> Self::Writer {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    /// A sink that keeps what it is given, and can be held up.
    #[derive(Clone, Default)]
    struct Kept {
        bytes: Arc<Mutex<Vec<u8>>>,
        writes: Arc<Mutex<usize>>,
        hold: Arc<Mutex<()>>,
    }

    impl Write for Kept {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            let _held = self.hold.lock().unwrap();
            self.bytes.lock().unwrap().extend_from_slice(buf);
            *self.writes.lock().unwrap() += 1;
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn line(n: usize) -> String {
        format!("line {n:05} {}\n", "x".repeat(200))
    }

    #[test]
    fn every_line_is_written_in_order_in_few_writes_and_on_stop() {
        let sink = Kept::default();
        let batches = Batches::start(sink.clone());
        let buffer = batches.writer();
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let buffer = buffer.clone();
                std::thread::spawn(move || {
                    for n in 0..2_000 {
                        (&buffer)
                            .write_all(line(t * 10_000 + n).as_bytes())
                            .unwrap();
                    }
                })
            })
            .collect();
        threads.into_iter().for_each(|t| t.join().unwrap());
        // Stopping writes what is left, without waiting for the next interval.
        batches.stop();
        let text = String::from_utf8(sink.bytes.lock().unwrap().clone()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 8_000);
        for t in 0..4 {
            let own: Vec<&str> = lines
                .iter()
                .copied()
                .filter(|l| l[5..].starts_with(&t.to_string()))
                .collect();
            let in_order = own
                .iter()
                .zip((0..2_000).map(|n| line(t * 10_000 + n)))
                .all(|(got, expected)| *got == expected.trim_end());
            assert!(own.len() == 2_000 && in_order, "writer {t}'s lines");
        }
        // Batched: far fewer writes than lines.
        let writes = *sink.writes.lock().unwrap();
        assert!(writes < 200, "{writes} writes for 8,000 lines");
    }

    #[test]
    fn a_quiet_line_is_written_within_the_interval() {
        let sink = Kept::default();
        let batches = Batches::start(sink.clone());
        (&batches.writer()).write_all(b"one line\n").unwrap();
        let started = Instant::now();
        while sink.bytes.lock().unwrap().is_empty() {
            assert!(
                started.elapsed() < INTERVAL * 20,
                "the line was not written"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        batches.stop();
        assert_eq!(*sink.bytes.lock().unwrap(), b"one line\n");
    }

    #[test]
    fn a_stalled_sink_holds_writers_at_the_high_water_mark_and_loses_nothing() {
        let sink = Kept::default();
        let held = sink.hold.lock().unwrap();
        let batches = Batches::start(sink.clone());
        let buffer = batches.writer();
        let total = 3 * HIGH_WATER / line(0).len();
        let writer = std::thread::spawn(move || {
            for n in 0..total {
                (&buffer).write_all(line(n).as_bytes()).unwrap();
            }
        });
        std::thread::sleep(Duration::from_millis(300));
        // The sink holds one batch; the buffer has filled up to the mark and the writer waits.
        assert!(!writer.is_finished(), "the writer went on past the mark");
        let buffered = batches.shared.lock().buffer.len();
        assert!(
            (HIGH_WATER..HIGH_WATER + line(0).len()).contains(&buffered),
            "{buffered}"
        );
        drop(held);
        writer.join().unwrap();
        batches.stop();
        let text = String::from_utf8(sink.bytes.lock().unwrap().clone()).unwrap();
        assert_eq!(text.lines().count(), total);
    }
}
