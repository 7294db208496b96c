"""How the local server's cost grows with its store: throughput, p99, disk and memory with 1
thousand, 100 thousand and 1 million resources in it.

One `leasekit serve` on a fresh data directory (durable, as in bench/versus.py). The store is
filled step by step through the API (`loadgen --fill`: 64 clients acquiring resources they keep;
each lease lapses after 30 s, its item stays, as a user's finished resources do, and so does its
list-index entry until a list tidies it), and at each size the same load as versus.py's
"16 distinct" scenario is run on fresh resources: 16 clients, acquire+release cycles, 3 runs of
5 s, the median kept. Measured at each size: granted cycles/s, p50 and p99, the data dir's size on
disk (`du`: SQLite's database and WAL), and the server's resident memory (VmRSS, and its peak,
VmHWM, from /proc).

Reproduce: python3 bench/growth.py [--sizes 1000,100000,1000000] [--seconds 5] [--repeat 3]
Writes bench/results/growth.json and bench/results/growth.png (matplotlib in .venv-bench, as
versus.py installs it).
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from versus import API_KEY, RESULTS, ROOT, charts_python, machine_cpu, start_leasekit  # noqa: E402


def loadgen(url, *extra):
    cmd = [os.path.join(ROOT, "target/release/loadgen"), "--system", "leasekit", "--url", url,
           "--api-key", API_KEY, *extra]
    return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)


def kib(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def disk_bytes(path):
    out = subprocess.run(["du", "-sb", path], check=True, capture_output=True, text=True).stdout
    return int(out.split()[0])


def chart(report, out):
    script = r'''
import json, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
report = json.load(open(sys.argv[1]))
rows = report["results"]
sizes = [r["resources"] for r in rows]
fig, (speed, space) = plt.subplots(1, 2, figsize=(11, 4.5))
speed.plot(sizes, [r["granted_per_s"] for r in rows], marker="o", label="cycles/s")
speed.set_xscale("log"); speed.set_xlabel("resources in the store"); speed.set_ylabel("cycles/s")
speed.set_ylim(0, 1.25 * max(r["granted_per_s"] for r in rows)); speed.grid(alpha=0.3)
p99 = speed.twinx()
p99.plot(sizes, [r["p99_ms"] for r in rows], marker="s", color="C1", label="p99 ms")
p99.set_ylabel("p99 of a cycle (ms)"); p99.set_ylim(0, 1.25 * max(r["p99_ms"] for r in rows))
speed.legend(loc="lower left", fontsize=8); p99.legend(loc="lower right", fontsize=8)
space.plot(sizes, [r["disk_bytes"] / 2**20 for r in rows], marker="o", label="data dir on disk")
space.plot(sizes, [r["rss_kib"] / 1024 for r in rows], marker="s", label="server RSS")
space.plot(sizes, [r["peak_rss_kib"] / 1024 for r in rows], ":", marker="^", label="server peak RSS")
space.set_xscale("log"); space.set_yscale("log"); space.set_xlabel("resources in the store")
space.set_ylabel("MiB"); space.grid(alpha=0.3); space.legend(fontsize=8)
fig.suptitle("leasekit serve as its store grows: 16 clients on fresh resources\n"
             f"{report['machine']['cores']} cores, median of {report['repeat']} runs of "
             f"{report['seconds']:g} s, {report['date']}", fontsize=10)
fig.tight_layout()
fig.savefig(sys.argv[2], dpi=110)
'''
    subprocess.run([charts_python(), "-c", script, os.path.join(RESULTS, "growth.json"),
                    os.path.join(out, "growth.png")], check=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1000,100000,1000000")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-build", action="store_true")
    args = parser.parse_args()
    if not args.no_build:
        subprocess.run(["cargo", "build", "--release", "-p", "leasekit", "-p", "loadgen"],
                       cwd=ROOT, check=True)
    sizes = [int(s) for s in args.sizes.split(",")]
    data = tempfile.mkdtemp(prefix="growth-", dir=os.path.join(ROOT, "target"))
    proc, url = start_leasekit(data)
    results = []
    try:
        filled = 0
        for size in sizes:
            fill = loadgen(url, "--clients", "64", "--fill", str(size - filled),
                           "--label", f"fill{size}")
            if fill["errors"]:
                sys.exit(f"filling to {size}: {fill['errors']} errors")
            filled = size
            runs = sorted((loadgen(url, "--clients", "16", "--seconds", str(args.seconds),
                                   "--label", f"n{size}r{k}") for k in range(args.repeat)),
                          key=lambda r: r["granted_per_s"])
            r = runs[len(runs) // 2]
            row = {"resources": size, "granted_per_s": r["granted_per_s"], "p50_ms": r["p50_ms"],
                   "p99_ms": r["p99_ms"], "errors": r["errors"],
                   "runs_granted_per_s": [x["granted_per_s"] for x in runs],
                   "fill_per_s": fill["filled"] / fill["seconds"],
                   "disk_bytes": disk_bytes(data), "rss_kib": kib(proc.pid, "VmRSS"),
                   "peak_rss_kib": kib(proc.pid, "VmHWM")}
            results.append(row)
            print(f"{size:>9,} resources  {row['granted_per_s']:>7,.0f} cycles/s  "
                  f"p50 {row['p50_ms']:.2f} ms  p99 {row['p99_ms']:.2f} ms  "
                  f"disk {row['disk_bytes'] / 2**20:,.1f} MiB  RSS {row['rss_kib'] / 1024:,.1f} MiB "
                  f"(peak {row['peak_rss_kib'] / 1024:,.1f})  filled at {row['fill_per_s']:,.0f}/s",
                  flush=True)
    finally:
        proc.terminate()
        proc.wait()
        shutil.rmtree(data, ignore_errors=True)
    os.makedirs(RESULTS, exist_ok=True)
    report = {"machine": machine_cpu(), "seconds": args.seconds, "repeat": args.repeat,
              "date": time.strftime("%Y-%m-%d"), "results": results}
    with open(os.path.join(RESULTS, "growth.json"), "w") as f:
        json.dump(report, f, indent=1)
    print()
    print("| resources | cycles/s (runs) | p50 ms | p99 ms | data dir | RSS (peak) |")
    print("|---:|---|---:|---:|---:|---:|")
    for r in results:
        runs = " / ".join(f"{x:,.0f}" for x in r["runs_granted_per_s"])
        print(f"| {r['resources']:,} | {r['granted_per_s']:,.0f} ({runs}) | {r['p50_ms']:.2f} | "
              f"{r['p99_ms']:.2f} | {r['disk_bytes'] / 2**20:,.1f} MiB | "
              f"{r['rss_kib'] / 1024:,.1f} MiB ({r['peak_rss_kib'] / 1024:,.1f}) |")
    chart(report, RESULTS)


if __name__ == "__main__":
    main()
