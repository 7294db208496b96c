"""Where the local server's time goes as clients grow (issue #47): for each client count, one
`leasekit serve` on a fresh data dir driven by bench/loadgen (acquire+release cycles, a resource
per client), and while it runs
- each thread's CPU, from /proc/<pid>/task/*/stat: the embedded store's thread (the leader that
  runs every group of store calls), its flusher (the fsync after each group, and the answers),
  the runtime's workers (HTTP, handlers, signing, the SDK), and the load generator;
- the embedded store's own account (src/engine_stats.rs, logged every 2 s): groups and their
  mean size, the share of the time a leader was busy, and how long a call waited for its turn
  (p50, p99: upper bounds, powers of two of microseconds).
A leader busy nearly all the time is what serializes; a worker pool using its cores is CPU.

Reproduce: python3 bench/store_share.py [--clients 1,16,64,128] [--seconds 5] [--request-ids]
[--no-build]. Builds the release binaries unless told not to; prints a table (and the machine).
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import versus

ROOT = versus.ROOT
TICKS = os.sysconf("SC_CLK_TCK")


def thread_cpu(pid):
    """Each thread's name and CPU seconds so far (user + system)."""
    seconds = {}
    task = f"/proc/{pid}/task"
    for tid in os.listdir(task):
        try:
            with open(f"{task}/{tid}/stat") as f:
                stat = f.read()
        except FileNotFoundError:
            continue
        name = stat[stat.index("(") + 1: stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        seconds[(tid, name)] = (int(fields[11]) + int(fields[12])) / TICKS
    return seconds


def group(name):
    if name == "embedded-store":
        return "store thread"
    if name == "embedded-flush":
        return "flusher"
    if name.startswith("tokio-r"):  # tokio-rt-worker (names are cut at 15 bytes)
        return "runtime workers"
    return "other threads"


ENGINE = re.compile(r"groups=(\d+) calls=(\d+) mean_group=([\d.]+) largest_group=(\d+) "
                    r"busy_share=([\d.]+) wait_p50_us=(\d+) wait_p99_us=(\d+)")


def run(clients, seconds, request_ids):
    data = tempfile.mkdtemp(prefix="store-share-", dir=os.path.join(ROOT, "target"))
    port = versus.free_port()
    log_path = os.path.join(data, "server.log")
    env = dict(os.environ, RUST_LOG="warn,leasekit::engine_stats=debug")
    with open(log_path, "w") as log:
        server = subprocess.Popen(
            [versus.LEASEKIT_BIN, "serve", "--addr", f"127.0.0.1:{port}", "--data-dir",
             os.path.join(data, "store"), "--api-key", f"bench:{versus.API_KEY}"],
            stdout=subprocess.DEVNULL, stderr=log, env=env)
    try:
        versus.wait_for_port(port, server, "leasekit")
        cmd = [os.path.join(ROOT, "target/release/loadgen"), "--system", "leasekit", "--url",
               f"http://127.0.0.1:{port}", "--clients", str(clients), "--seconds", str(seconds),
               "--api-key", versus.API_KEY, "--label", f"c{clients}"]
        if request_ids:
            cmd.append("--request-ids")
        loadgen = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
        # Past the load generator's warm-up (1 s), sample the threads over the measured seconds.
        time.sleep(1.0)
        before, loadgen_before, t0 = thread_cpu(server.pid), versus.cpu_seconds(loadgen.pid), time.monotonic()
        time.sleep(seconds - 0.3)
        after, loadgen_after, t1 = thread_cpu(server.pid), versus.cpu_seconds(loadgen.pid), time.monotonic()
        out, _ = loadgen.communicate()
        result = versus.json.loads(out)
    finally:
        server.terminate()
        server.wait()
    wall = t1 - t0
    cores = {}
    for key, spent in after.items():
        cores[group(key[1])] = cores.get(group(key[1]), 0) + (spent - before.get(key, 0)) / wall
    cores["load generator"] = (loadgen_after - loadgen_before) / wall
    with open(log_path) as f:
        windows = [tuple(float(x) for x in m.groups()) for m in ENGINE.finditer(f.read())]
    versus.shutil.rmtree(data, ignore_errors=True)
    # The windows inside the measured part (the first may hold the warm-up; the last the end).
    inner = windows[1:-1] or windows
    median = (lambda i: statistics.median(w[i] for w in inner)) if inner else (lambda i: float("nan"))
    return {
        "clients": clients, "cycles": result["granted_per_s"], "p99": result["p99_ms"],
        "cores": cores, "mean_group": median(2), "largest": max((w[3] for w in inner), default=0),
        "busy": median(4), "wait_p50": median(5), "wait_p99": median(6),
    }


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--clients", default="1,16,64,128")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--request-ids", action="store_true")
    parser.add_argument("--no-build", action="store_true")
    parser.add_argument("--leasekit-bin", default=None)
    args = parser.parse_args()
    if args.leasekit_bin:
        versus.LEASEKIT_BIN = os.path.abspath(args.leasekit_bin)
    if not args.no_build:
        subprocess.run(["cargo", "build", "--release", "-p", "leasekit", "-p", "loadgen"], cwd=ROOT, check=True)
    facts = {**versus.machine(), "load_before": versus.load_average(),
             "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
             "fsync": versus.fsync_latency(os.path.join(ROOT, "target"))}
    print(versus.describe(facts), flush=True)
    print(f"requestIds: {'yes' if args.request_ids else 'no'}")
    print("| clients | cycles/s | p99 ms | store thread (cores) | flusher | runtime workers | other | load generator "
          "| store leader busy | mean group | largest | wait p50 / p99 us |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for clients in [int(c) for c in args.clients.split(",")]:
        r = run(clients, args.seconds, args.request_ids)
        c = r["cores"]
        print(f"| {clients} | {r['cycles']:,.0f} | {r['p99']:.2f} | {c.get('store thread', 0):.2f} | "
              f"{c.get('flusher', 0):.2f} | {c.get('runtime workers', 0):.2f} | {c.get('other threads', 0):.2f} | {c['load generator']:.2f} | "
              f"{r['busy']:.2f} | {r['mean_group']:.1f} | {r['largest']:.0f} | "
              f"{r['wait_p50']:.0f} / {r['wait_p99']:.0f} |", flush=True)


if __name__ == "__main__":
    sys.exit(main())
