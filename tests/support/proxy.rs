//! A loopback TCP proxy in front of a real server, whose behaviour a test switches while clients
//! stay connected: pass bytes through, go silent (a hung proxy or a partition), drop connections,
//! or deliver the server's answers late. Plain threads, so sync and async tests can both use it.
//!
//! The mode is read for every chunk, not per connection, so a client's pooled keep-alive
//! connection obeys a switch too.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::thread;
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Forward both ways.
    Pass,
    /// Accept and read, forward nothing either way: requests never reach the server, answers
    /// never come.
    Silent,
    /// Close every connection at once: new ones right after accept (unread data: the peer gets
    /// an RST), pooled ones at their next byte.
    Drop,
    /// Forward requests at once (the server acts on them) but deliver each answer chunk this long
    /// after it arrived.
    Slow(Duration),
}

pub struct Proxy {
    /// `http://127.0.0.1:PORT`: give this to the client instead of the server's URL.
    pub url: String,
    mode: Arc<Mutex<Mode>>,
    stopped: Arc<AtomicBool>,
    port: u16,
    streams: Arc<Mutex<Vec<TcpStream>>>,
}

impl Proxy {
    /// A proxy to `upstream` (`http://127.0.0.1:PORT`), in `Mode::Pass`.
    pub fn start(upstream: &str) -> Self {
        let upstream = upstream
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .to_owned();
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the proxy");
        let port = listener.local_addr().unwrap().port();
        let mode = Arc::new(Mutex::new(Mode::Pass));
        let stopped = Arc::new(AtomicBool::new(false));
        let streams = Arc::new(Mutex::new(Vec::new()));
        let (m, s, all) = (mode.clone(), stopped.clone(), streams.clone());
        thread::spawn(move || {
            for client in listener.incoming() {
                if s.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(client) = client else { continue };
                let mode = *m.lock().unwrap();
                if mode == Mode::Drop {
                    drop(client);
                    continue;
                }
                let Ok(server) = TcpStream::connect(&upstream) else {
                    continue;
                };
                let _ = client.set_nodelay(true);
                let _ = server.set_nodelay(true);
                {
                    let mut all = all.lock().unwrap();
                    all.push(client.try_clone().unwrap());
                    all.push(server.try_clone().unwrap());
                }
                let up = (client.try_clone().unwrap(), server.try_clone().unwrap());
                let m1 = m.clone();
                thread::spawn(move || requests(up.0, up.1, &m1));
                let m2 = m.clone();
                thread::spawn(move || answers(server, client, &m2));
            }
        });
        Self {
            url: format!("http://127.0.0.1:{port}"),
            mode,
            stopped,
            port,
            streams,
        }
    }

    pub fn set(&self, mode: Mode) {
        *self.mode.lock().unwrap() = mode;
    }
}

fn close(a: &TcpStream, b: &TcpStream) {
    let _ = a.shutdown(Shutdown::Both);
    let _ = b.shutdown(Shutdown::Both);
}

/// Client to server.
fn requests(mut from: TcpStream, mut to: TcpStream, mode: &Mutex<Mode>) {
    let mut buf = [0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => return close(&from, &to),
            Ok(n) => n,
        };
        match *mode.lock().unwrap() {
            Mode::Silent => {}
            Mode::Drop => return close(&from, &to),
            Mode::Pass | Mode::Slow(_) => {
                if to.write_all(&buf[..n]).is_err() {
                    return close(&from, &to);
                }
            }
        }
    }
}

/// Server to client, through a queue so a slow answer is late by the delay, not by the sum of
/// the delays of the chunks before it.
fn answers(mut from: TcpStream, to: TcpStream, mode: &Mutex<Mode>) {
    let (queue, chunks) = mpsc::channel::<(Instant, Vec<u8>)>();
    let (mut writer, reader) = (to.try_clone().unwrap(), from.try_clone().unwrap());
    thread::spawn(move || {
        for (due, chunk) in chunks {
            thread::sleep(due.saturating_duration_since(Instant::now()));
            if writer.write_all(&chunk).is_err() {
                break;
            }
        }
        // The server closed (or the client went away): close once the late answers are out.
        close(&writer, &reader);
    });
    let mut buf = [0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        let due = match *mode.lock().unwrap() {
            Mode::Silent => continue,
            Mode::Drop => return close(&from, &to),
            Mode::Pass => Instant::now(),
            Mode::Slow(delay) => Instant::now() + delay,
        };
        if queue.send((due, buf[..n].to_vec())).is_err() {
            return close(&from, &to);
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stopped.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        for stream in self.streams.lock().unwrap().drain(..) {
            let _ = stream.shutdown(Shutdown::Both);
        }
    }
}
