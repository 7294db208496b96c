"""What a requestId write costs as they pile up (issue #41, item 2).

Starts `leasekit serve` on a fresh data dir and drives it with `bench/loadgen --request-ids`
(16 clients, a resource each, acquire then release, every call with a requestId of its own, so
every call is a transaction with a record), in slices of a few seconds, until --writes calls
were made. After each slice it reads the server's CPU time (utime + stime, /proc/PID/stat) and
resident memory (VmRSS), and prints a row at each 10,000 calls: the server's CPU per call and
calls per second over those 10,000, and its RSS.

    cargo build --release -p leasekit -p loadgen
    python3 bench/request_ids.py                                  # this build
    python3 bench/request_ids.py --bin target/leasekit-before     # another one, to compare
"""

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
API_KEY = "bench-key-0123456789abcdef"
TICKS = os.sysconf("SC_CLK_TCK")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", default=os.path.join(ROOT, "target/release/leasekit"))
    parser.add_argument("--writes", type=int, default=100_000)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--slice", type=float, default=4.0, help="seconds of each loadgen run")
    args = parser.parse_args()
    data = tempfile.mkdtemp(prefix="request-ids-", dir=os.path.join(ROOT, "target"))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(
        [args.bin, "serve", "--addr", f"127.0.0.1:{port}", "--data-dir", data,
         "--api-key", f"bench:{API_KEY}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        else:
            sys.exit("leasekit did not start")
        print(f"{os.path.basename(args.bin)}: {args.clients} clients, every call with a requestId")
        print("| calls | calls/s | server CPU per call (ms) | RSS (MB) |")
        print("|---:|---:|---:|---:|")
        calls, mark = 0, 0
        cpu_at_mark, time_at_mark = cpu_seconds(server.pid), time.monotonic()
        run = 0
        while calls < args.writes:
            out = subprocess.run(
                [os.path.join(ROOT, "target/release/loadgen"), "--system", "leasekit", "--url", url,
                 "--clients", str(args.clients), "--seconds", str(args.slice), "--warmup", "0",
                 "--label", f"r{run}", "--api-key", API_KEY, "--request-ids"],
                check=True, capture_output=True, text=True)
            run += 1
            report = json.loads(out.stdout)
            granted = report["granted_per_s"] * report["seconds"]
            attempts = report["attempts_per_s"] * report["seconds"]
            # A granted cycle is an acquire and a release; a refused one only the acquire.
            calls += round(granted * 2 + (attempts - granted))
            if report["errors"]:
                sys.exit(f"loadgen reported {report['errors']} errors")
            if calls - mark >= 10_000 or calls >= args.writes:
                cpu, now = cpu_seconds(server.pid), time.monotonic()
                per_call_ms = (cpu - cpu_at_mark) * 1000 / (calls - mark)
                rate = (calls - mark) / (now - time_at_mark)
                print(f"| {calls:,} | {rate:,.0f} | {per_call_ms:.3f} | {rss_mb(server.pid):.0f} |",
                      flush=True)
                mark, cpu_at_mark, time_at_mark = calls, cpu, now
    finally:
        server.terminate()
        server.wait()
        shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    main()
