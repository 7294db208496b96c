"""Another account's latency while one caller abuses the connection cap (issue #41, item 1).

Starts `leasekit serve --max-connections CAP` on a fresh data dir and runs one abuse for
--seconds while a victim account calls `get` one after another (each given 15 s), then prints
the victim's p50, p99 and max, and how many of its calls got no answer within 15 s (each of
its calls on a new connection). The abuses,
as the attack of 2026-12-05 ran them:

- waits: one account holds a resource and keeps --abusers keep-alive connections each re-sending
  a waiting acquire of it (waitSeconds 20) as soon as it is answered (after 50 ms, whatever the
  answer, Retry-After included), reconnecting when closed;
- slow-bodies: --abusers connections without a key, each sending a request head and then its
  body one byte a second, reconnecting when closed.

    cargo build --release -p leasekit
    python3 bench/fair_share.py                                   # this build
    python3 bench/fair_share.py --bin target/leasekit-before      # another one, to compare
"""

import argparse
import http.client
import json
import os
import platform
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

from versus import machine_cpu

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ABUSER_KEY = "abuser-key-0123456789abcdef"
VICTIM_KEY = "victim-key-0123456789abcdef"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def machine():
    cpu = machine_cpu()
    return (f"{cpu['cpu']}, {cpu['cores']} cores, {platform.system()} {platform.release()}, "
            f"load {os.getloadavg()[0]:.2f}")


def call(conn, key, body):
    headers = {"content-type": "application/json"}
    if key:
        headers["x-api-key"] = key
    conn.request("POST", "/api/v1/lease", json.dumps(body), headers)
    answer = conn.getresponse()
    answer.read()
    return answer.status, answer.getheader("connection", "")


def waits_abuser(port, stop, index):
    body = {"op": "acquire", "tenantId": "a", "resource": "r", "holder": f"w{index}",
            "ttlSeconds": 60, "waitSeconds": 20}
    conn = None
    while not stop.is_set():
        try:
            if conn is None:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            _, connection = call(conn, ABUSER_KEY, body)
            if connection.lower() == "close":
                conn.close()
                conn = None
        except (OSError, http.client.HTTPException):
            if conn is not None:
                conn.close()
            conn = None
        time.sleep(0.05)


def slow_body_abuser(port, stop, index):
    head = (f"POST /api/v1/lease HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            "Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{").encode()
    while not stop.is_set():
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
                s.sendall(head)
                while not stop.is_set():
                    time.sleep(1)
                    s.sendall(b" ")
        except OSError:
            time.sleep(0.05)


def victim(port, seconds, latencies, missed):
    """`get` after `get`, each on a new connection (as curl or a script makes them: a kept-alive
    connection, once in, is not the one a cap refuses)."""
    body = {"op": "get", "tenantId": "v", "resource": "x"}
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        started = time.monotonic()
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=15)
        try:
            status, _ = call(conn, VICTIM_KEY, body)
            if status != 200:
                raise OSError(f"status {status}")
            latencies.append(time.monotonic() - started)
        except (OSError, http.client.HTTPException):
            missed.append(time.monotonic() - started)
        finally:
            conn.close()
        time.sleep(0.1)


def percentile(values, p):
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def run(binary, abuse, cap, abusers, seconds):
    data = tempfile.mkdtemp(prefix="fair-share-", dir=os.path.join(ROOT, "target"))
    port = free_port()
    server = subprocess.Popen(
        [binary, "serve", "--addr", f"127.0.0.1:{port}", "--data-dir", data,
         "--max-connections", str(cap),
         "--api-key", f"abuser:{ABUSER_KEY}", "--api-key", f"victim:{VICTIM_KEY}"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        env={**os.environ, "RUST_LOG": "error", "AWS_ACCESS_KEY_ID": "x",
             "AWS_SECRET_ACCESS_KEY": "x", "AWS_REGION": "us-east-1"},
    )
    try:
        server.stdout.readline()
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        call(conn, ABUSER_KEY, {"op": "acquire", "tenantId": "a", "resource": "r",
                                "holder": "owner", "ttlSeconds": 3600})
        conn.close()
        stop = threading.Event()
        target = waits_abuser if abuse == "waits" else slow_body_abuser
        threads = [threading.Thread(target=target, args=(port, stop, i), daemon=True)
                   for i in range(abusers)]
        for t in threads:
            t.start()
        time.sleep(3)  # the abuse takes the cap
        latencies, missed = [], []
        victim(port, seconds, latencies, missed)
        stop.set()
        return latencies, missed
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
        shutil.rmtree(data, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", default=os.path.join(ROOT, "target/release/leasekit"))
    parser.add_argument("--abuse", choices=["waits", "slow-bodies"], default="waits")
    parser.add_argument("--cap", type=int, default=64)
    parser.add_argument("--abusers", type=int, default=90)
    parser.add_argument("--seconds", type=float, default=20)
    args = parser.parse_args()
    print(f"# {machine()}")
    print(f"# {args.bin}: --max-connections {args.cap}, {args.abusers} abusers ({args.abuse}), "
          f"victim's get for {args.seconds:.0f} s")
    latencies, missed = run(args.bin, args.abuse, args.cap, args.abusers, args.seconds)
    ms = lambda s: f"{s * 1000:,.0f}"
    print(f"answered {len(latencies)}, no answer within 15 s {len(missed)}; "
          f"p50 {ms(percentile(latencies, 50))} ms, p99 {ms(percentile(latencies, 99))} ms, "
          f"max {ms(max(latencies + missed, default=float('nan')))} ms")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
