"""Tasks per second of a work queue on the local server (issue #45, docs/adr/0012).

16 workers drain a queue of 50 tasks: each takes the next free one (acquire with the 50 names as
`candidates`), does its work (a fenced write to an in-memory store that refuses a smaller token:
no sleep, so the figure is the service's), and releases it with `done` and a result. A queue is
drained when every task is finished; the figure is 50 over the time from the first claim to the
last done. Two ways to be a worker:

- client: a thread with its own keep-alive connection, calling the HTTP API (what the clients do);
- run: a process loop of `leasekit run --candidates ... --done -- true` (what scripts do: each
  task starts a process, a watchdog, and its command, so this is mostly process start-up).

Each way drains `--queues` queues (fresh names) per repeat, and the whole is run `--repeat` times:
the median of each repeat is printed, so a figure that does not reproduce shows.

    python3 bench/work_queue.py [--no-build] [--queues 5] [--repeat 2] [--ways client,run]
"""

import argparse
import http.client
import json
import os
import platform
import secrets
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
BIN = os.path.join(ROOT, "target", "release", "leasekit")
KEY = "bench-key-0123456789abcdef"
TASKS, WORKERS = 50, 16


def serve(data_dir):
    process = subprocess.Popen(
        [BIN, "serve", "--addr", "127.0.0.1:0", "--data-dir", data_dir, "--api-key", f"bench:{KEY}"],
        stdout=subprocess.PIPE, env={**os.environ, "RUST_LOG": "error"},
    )
    url = process.stdout.readline().decode().strip()
    assert url.startswith("http://"), url
    return process, url


class Store:
    """A store that refuses a write whose token is smaller than the last it took for a task."""

    def __init__(self):
        self.lock = threading.Lock()
        self.fence, self.work = {}, {}

    def write(self, task, token, holder):
        with self.lock:
            if token < self.fence.get(task, 0):
                return False
            self.fence[task], self.work[task] = token, (holder, token)
            return True


def client_worker(url, tenant, names, store, w, done):
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    holder = f"worker-{w}"

    def post(body):
        conn.request("POST", "/api/v1/lease", json.dumps({**body, "tenantId": tenant}),
                     {"content-type": "application/json", "x-api-key": KEY})
        response = conn.getresponse()
        data = response.read()
        assert response.status == 200, data[:300]
        return json.loads(data)["data"]

    while True:
        claim = post({"op": "acquire", "candidates": names, "holder": holder, "ttlSeconds": 30})
        if not claim["granted"]:
            rules = {w["ruleId"] for w in claim["witnesses"]}
            if rules == {"DONE"}:
                return
            continue  # the rest are held: finishing soon
        task, token = claim["resource"], claim["fencingToken"]
        assert store.write(task, token, holder)
        finished = post({"op": "release", "resource": task, "holder": holder, "token": token, "done": True,
                         "result": f"{holder}:{token}"})
        assert finished["granted"], finished
        with done:
            done.append(task)


def run_worker(url, tenant, names, w, done):
    env = {**os.environ, "LEASEKIT_URL": url, "LEASEKIT_API_KEY": KEY, "LEASEKIT_TENANT": tenant,
           "LEASEKIT_HOLDER": f"worker-{w}"}
    while True:
        code = subprocess.run([BIN, "run", "--candidates", ",".join(names), "--done", "--ttl", "30", "--", "true"],
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
        if code == 77:
            return
        if code == 0:
            with done:
                done.append(w)


class Done(list):
    """The tasks finished, under a lock."""

    def __init__(self):
        super().__init__()
        self._lock = threading.Lock()

    def __enter__(self):
        self._lock.acquire()

    def __exit__(self, *_):
        self._lock.release()


def drain(way, url):
    """Tasks per second of one queue drained by `way`."""
    tenant = f"bench-{secrets.token_hex(4)}"
    names = [f"task:{i:02}" for i in range(TASKS)]
    store, done = Store(), Done()
    if way == "client":
        targets = [(client_worker, (url, tenant, names, store, w, done)) for w in range(WORKERS)]
    else:
        targets = [(run_worker, (url, tenant, names, w, done)) for w in range(WORKERS)]
    threads = [threading.Thread(target=f, args=a) for f, a in targets]
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    took = time.monotonic() - started
    assert len(done) == TASKS, f"{way}: {len(done)} finished, not {TASKS}"
    if way == "client":
        assert sorted(store.work) == sorted(names)
    return TASKS / took


def machine():
    model = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            model = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"{platform.system()} {platform.machine()}, {os.cpu_count()} cores ({model}), Python {platform.python_version()}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--no-build", action="store_true")
    parser.add_argument("--queues", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--ways", default="client,run")
    args = parser.parse_args()
    if not args.no_build:
        subprocess.run(["cargo", "build", "--release", "-q", "--bin", "leasekit"], cwd=ROOT, check=True)
    print(f"# {TASKS} tasks, {WORKERS} workers; leasekit serve on the embedded store; {machine()}")
    with tempfile.TemporaryDirectory() as data_dir:
        process, url = serve(data_dir)
        try:
            for way in args.ways.split(","):
                for repeat in range(1, args.repeat + 1):
                    figures = [drain(way, url) for _ in range(args.queues)]
                    print(f"{way:>6}  repeat {repeat}: {statistics.median(figures):7.1f} tasks/s "
                          f"(median of {args.queues} queues; min {min(figures):.1f}, max {max(figures):.1f})")
                    sys.stdout.flush()
        finally:
            process.terminate()
            process.wait(10)


if __name__ == "__main__":
    main()
