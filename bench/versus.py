"""leasekit's local server against etcd and Redis, in one run, on loopback, with one load generator.

Each system runs from a fresh data directory, on this machine, with the same load generator
(bench/loadgen: one connection per client, acquire+release cycles back to back). All of them are
started first; for each point the systems take turns, a run each per round. Scenarios:
1, 16, 64 and 128 clients on distinct resources, 16 clients contending for one resource, and 16
clients on one limit-4 semaphore, 64 on one lock or semaphore of limit 8 and 64, and 16
waiting in line for one lock (leasekit's waitSeconds, etcd's lock recipe; Redis has none) (each system's nearest equivalent: see bench/loadgen/src/systems.rs;
etcd has no semaphore, so N slot keys as its users build one; Redis the expirable-permit script).
And "change to observer": a leader proclaims new values one after another while an observer
follows it (leasekit's watch chained on stateTag, etcd's election Observe stream; Redis has no
election): the time from sending a change to the observer having it (bench/observe.py).

Configurations (durable ones first):
- leasekit: `leasekit serve` on the embedded store (dynoxide on SQLite in WAL mode, group commit:
  the WAL is fsynced once per group of calls, before any of them is answered). Every answer is
  signed, as in production.
- etcd 3.4 (Debian etcd-server), one member, default settings: the WAL is fsynced before a write
  is acknowledged. Called through its v3 JSON gateway.
- Redis 7 (Debian redis-server), appendonly with appendfsync always: fsynced before the reply.
- Redis without persistence: the ceiling, not a durable lock service.
- leasekit with its data dir on tmpfs (/dev/shm), where fsync costs nothing: not durable, shown
  to tell the embedded store's fsync from leasekit's own work.

Reproduce: python3 bench/versus.py [--seconds 5] [--repeat 3] [--systems leasekit,etcd]
[--scenarios "16 on a limit-4 semaphore,64 on a limit-8 semaphore,16 waiting in line"]
Each point's figures are the median of its runs; the first system's ratio to each other is the
median of the ratios within each round (see paired_ratio), printed in a table of its own.
It prints what it ran on first (CPU, cores, the fsync latency of a 4 KiB write in target/, where
the data dirs are, the load average) and again above its table, and refuses to start while the
machine is busy (1-minute load above 0.5) unless given --busy-ok.
It needs etcd and redis-server (`apt-get install etcd-server redis-server`), builds the release
binaries, installs matplotlib into .venv-bench, and writes bench/results/versus.json (a run
of some systems or scenarios: versus-partial.json), the markdown table it prints,
bench/results/versus-limits.png (the one-resource scenarios it ran) and, for a full run,
bench/results/versus-{throughput,p99}.png (`bench/charts.py` draws them from any run's JSON).
"""

import argparse
import json
import os
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

import observe

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
RESULTS = os.path.join(ROOT, "bench", "results")
# (clients, all on one resource, limit, waiting)
SCENARIOS = [(1, False, 1, False), (16, False, 1, False), (64, False, 1, False),
             (128, False, 1, False), (16, True, 1, False), (16, True, 4, False),
             # How a semaphore's cost grows with its limit (issue #28), and waiting in line.
             (64, True, 1, False), (64, True, 8, False), (64, True, 64, False),
             (16, True, 1, True)]
API_KEY = "bench-key-0123456789abcdef"
OBSERVE = "change to observer"
#: Changes per run of the observe scenario.
OBSERVE_CHANGES = 300


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port, proc, what):
    for _ in range(200):
        if proc.poll() is not None:
            sys.exit(f"{what} exited at start (code {proc.returncode})")
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    sys.exit(f"{what} did not start")


# The leasekit binary to run: the release build, or another one to compare it with
# (`--leasekit-bin`, e.g. a build of an earlier commit).
LEASEKIT_BIN = os.path.join(ROOT, "target/release/leasekit")


def start_leasekit(data):
    return _start_leasekit(data, data)


def start_leasekit_tmpfs(data):
    store_dir = tempfile.mkdtemp(prefix="versus-", dir="/dev/shm")
    # Removed with `data`.
    os.symlink(store_dir, os.path.join(data, "tmpfs"))
    return _start_leasekit(data, store_dir)


def _start_leasekit(data, store_dir):
    port = free_port()
    log = open(os.path.join(data, "leasekit.log"), "w")
    proc = subprocess.Popen(
        [LEASEKIT_BIN, "serve", "--addr", f"127.0.0.1:{port}",
         "--data-dir", store_dir, "--api-key", f"bench:{API_KEY}"],
        stdout=subprocess.DEVNULL, stderr=log)
    wait_for_port(port, proc, "leasekit")
    return proc, f"http://127.0.0.1:{port}"


def start_etcd(data):
    port, peer = free_port(), free_port()
    log = open(os.path.join(data, "etcd.log"), "w")
    proc = subprocess.Popen(
        ["etcd", "--data-dir", os.path.join(data, "etcd"),
         "--listen-client-urls", f"http://127.0.0.1:{port}",
         "--advertise-client-urls", f"http://127.0.0.1:{port}",
         "--listen-peer-urls", f"http://127.0.0.1:{peer}",
         "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
         "--initial-cluster", f"default=http://127.0.0.1:{peer}"],
        stdout=log, stderr=log)
    wait_for_port(port, proc, "etcd")
    time.sleep(1)  # the member elects itself leader
    return proc, f"http://127.0.0.1:{port}"


def start_redis(persistence):
    def start(data):
        port = free_port()
        durability = (["--appendonly", "yes", "--appendfsync", "always"] if persistence
                      else ["--appendonly", "no"])
        proc = subprocess.Popen(
            ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--dir", data,
             "--save", ""] + durability,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for_port(port, proc, "redis-server")
        return proc, f"redis://127.0.0.1:{port}"
    return start


# (name in the results, loadgen --system, starter, durable)
SYSTEMS = [
    ("leasekit", "leasekit", start_leasekit, True),
    ("etcd", "etcd", start_etcd, True),
    ("redis (appendfsync always)", "redis", start_redis(True), True),
    ("redis (no persistence)", "redis", start_redis(False), False),
    ("leasekit (tmpfs, no fsync)", "leasekit", start_leasekit_tmpfs, False),
]


def cpu_seconds(pid):
    """User and system CPU a process has used so far, from /proc."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_loadgen(system, url, clients, contended, limit, wait, seconds, label, server_pid):
    """One run of the load generator; its figures, and the cores the server and the load
    generator used meanwhile (the whole run's CPU, its warm-up included, over its wall time): on
    two cores, what the load generator spends is taken from the server."""
    cmd = [os.path.join(ROOT, "target/release/loadgen"), "--system", system, "--url", url,
           "--clients", str(clients), "--seconds", str(seconds), "--label", label,
           "--api-key", API_KEY, "--limit", str(limit)]
    if contended:
        cmd.append("--contended")
    if wait:
        cmd.append("--wait")
    server_before = cpu_seconds(server_pid)
    children_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.monotonic()
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    wall = time.monotonic() - began
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    run = json.loads(out.stdout)
    loadgen_cpu = (children.ru_utime - children_before.ru_utime
                   + children.ru_stime - children_before.ru_stime)
    run["server_cores"] = round((cpu_seconds(server_pid) - server_before) / wall, 3)
    run["loadgen_cores"] = round(loadgen_cpu / wall, 3)
    return run


def scenario_name(clients, contended, limit, wait=False):
    if wait:
        return f"{clients} waiting in line"
    if limit > 1:
        return f"{clients} on a limit-{limit} semaphore"
    return f"{clients} contending" if contended else f"{clients} distinct"


def machine_cpu():
    cpu = "unknown"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return {"cores": os.cpu_count(), "cpu": cpu}


def fsync_latency(directory, writes=200):
    """The data dir's disk: how long a 4 KiB write plus fsync takes there (p50 and p99, ms), the
    cost every durable system here pays per commit (or per group)."""
    path = os.path.join(directory, "fsync-probe")
    times = []
    with open(path, "wb") as f:
        for _ in range(writes):
            start = time.perf_counter()
            f.write(b"x" * 4096)
            f.flush()
            os.fsync(f.fileno())
            times.append((time.perf_counter() - start) * 1000)
    os.remove(path)
    times.sort()
    return {"p50_ms": round(times[len(times) // 2], 3), "p99_ms": round(times[int(len(times) * 0.99)], 3)}


def load_average():
    """The 1-, 5- and 15-minute load averages."""
    return [round(x, 2) for x in os.getloadavg()]


def describe(facts):
    """The machine facts as the lines printed above the table."""
    fsync = facts["fsync"]
    return (f"ran on: {facts['cpu']}, {facts['cores']} cores; fsync of a 4 KiB write in the data dir "
            f"p50 {fsync['p50_ms']:.2f} ms, p99 {fsync['p99_ms']:.2f} ms; load average before "
            f"{' '.join(f'{x:.2f}' for x in facts['load_before'])}; {facts['date']}")


def version(command, pick):
    """What `command` says its version is, or None where it is not installed."""
    if shutil.which(command[0]) is None:
        return None
    return pick(subprocess.run(command, capture_output=True, text=True).stdout)


def machine():
    return {**machine_cpu(),
            "etcd": version(["etcd", "--version"], lambda out: out.splitlines()[0]),
            "redis": version(["redis-server", "--version"], lambda out: out.split()[2]),
            "leasekit": LEASEKIT_BIN}


def table(results):
    lines = ["| system | durable | scenario | granted cycles/s | runs | attempts/s | p50 ms | p99 ms "
             "| cores: server / load generator |",
             "|---|---|---|---:|---|---:|---:|---:|---|"]
    for r in results:
        runs = " / ".join(f"{x:,.0f}" for x in r["runs_granted_per_s"])
        lines.append(f"| {r['name']} | {'yes' if r['durable'] else 'no'} | {r['scenario']} | "
                     f"{r['granted_per_s']:,.0f} | {runs} | {r['attempts_per_s']:,.0f} | "
                     f"{r['p50_ms']:.2f} | {r['p99_ms']:.2f} | "
                     f"{r['server_cores']:.2f} / {r['loadgen_cores']:.2f} |")
    return "\n".join(lines)


def paired_ratio(scenario, first, runs, others):
    """The first system's cycles/s over each other's, a ratio per round, and their median.

    The systems of a round run one after the other, seconds apart, so a ratio within a round
    cancels what the machine did that minute; the ratio of two medians does not, as the medians
    may come from different rounds. On this VM, whose speed moves by 20-40% from minute to minute
    (issue #47), two runs of the same command gave ratios of medians 0.42 apart at one point."""
    ratios = []
    for other in others:
        pairs = [(a["granted_per_s"], b["granted_per_s"]) for a, b in zip(runs[first], runs[other])]
        rounds = [a / b for a, b in pairs if b > 0]
        if rounds:
            ratios.append({"scenario": scenario, "of": first, "to": other,
                           "rounds": [round(x, 3) for x in rounds],
                           "median": round(statistics.median(rounds), 3)})
    return ratios


def ratio_table(ratios):
    lines = ["| scenario | cycles/s ratio | ratio per round |", "|---|---:|---|"]
    for r in ratios:
        lines.append(f"| {r['scenario']} ({r['of']} / {r['to']}) | {r['median']:.2f} | "
                     f"{', '.join(f'{x:.2f}' for x in r['rounds'])} |")
    return "\n".join(lines)


def observe_table(observed):
    lines = ["| system | durable | changes per run | change to observer p50 ms | p99 ms | runs p50 / p99 ms "
             "| the write alone p50 ms |",
             "|---|---|---:|---:|---:|---|---:|"]
    for r in observed:
        runs = " / ".join(f"{a:.2f}-{b:.2f}" for a, b in zip(r["runs_observed_p50_ms"], r["runs_observed_p99_ms"]))
        lines.append(f"| {r['name']} | {'yes' if r['durable'] else 'no'} | {r['changes']} | "
                     f"{r['observed_p50_ms']:.2f} | {r['observed_p99_ms']:.2f} | {runs} | {r['write_p50_ms']:.2f} |")
    return "\n".join(lines)


def charts_python():
    """The Python of .venv-bench, made with matplotlib on first use."""
    venv = os.path.join(ROOT, ".venv-bench")
    python = os.path.join(venv, "bin", "python")
    if not os.path.exists(python):
        subprocess.run([sys.executable, "-m", "venv", venv], check=True)
        subprocess.run([python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                        "-r", os.path.join(ROOT, "bench", "requirements.txt")], check=True)
    return python


def charts(path, partial):
    subprocess.run([charts_python(), os.path.join(ROOT, "bench", "charts.py"), path, RESULTS]
                   + (["--limits"] if partial else []), check=True)


def out_path(out, partial):
    """Where the results go: `out` as a path when it names a folder, else a name in RESULTS. A
    partial run (some scenarios or systems) is kept apart from the full one."""
    name = out or ("versus-partial.json" if partial else "versus.json")
    return name if os.path.dirname(name) else os.path.join(RESULTS, name)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--repeat", type=int, default=3, help="runs per point; the median is kept")
    parser.add_argument("--no-build", action="store_true")
    parser.add_argument("--systems", default=None,
                        help="comma-separated names to run (e.g. leasekit,etcd); default all")
    parser.add_argument("--leasekit-bin", default=None,
                        help="run this leasekit binary instead of target/release/leasekit "
                             "(results named 'leasekit' all the same; keep them apart with --out)")
    parser.add_argument("--out", default=None,
                        help="the results file: a name in bench/results, or a path (default "
                             "versus.json, or versus-partial.json for a partial run)")
    parser.add_argument("--scenarios", default=None,
                        help="comma-separated scenario names (e.g. '16 contending'); default all")
    parser.add_argument("--busy-ok", action="store_true",
                        help="run even though the machine is busy (1-minute load above 0.5): "
                             "its figures then say less")
    args = parser.parse_args()
    partial = args.scenarios is not None or args.systems is not None
    # Checked before minutes of measuring, not after (a run was once lost to a bad --out).
    out = out_path(args.out, partial)
    if not os.path.isdir(os.path.dirname(out) or "."):
        sys.exit(f"--out: no folder {os.path.dirname(out)!r} for {out!r}")
    global LEASEKIT_BIN
    if args.leasekit_bin:
        LEASEKIT_BIN = os.path.abspath(args.leasekit_bin)
    if not args.no_build:
        subprocess.run(["cargo", "build", "--release", "-p", "leasekit", "-p", "loadgen"],
                       cwd=ROOT, check=True)
    # Names in the comma-separated list; a name may hold a comma itself ("leasekit (tmpfs, no
    # fsync)"), so each system's whole name is looked for between commas.
    chosen = ([name for name, *_ in SYSTEMS if f",{name}," in f",{args.systems},"]
              if args.systems else None)
    # Only the systems this run starts need to be installed.
    needed = {"etcd": "etcd", "redis": "redis-server"}
    for name, system, *_ in SYSTEMS:
        tool = needed.get(system)
        if (chosen is None or name in chosen) and tool and shutil.which(tool) is None:
            sys.exit(f"{tool} not found: apt-get install etcd-server redis-server")
    # What it ran on, measured before the first system starts: another machine of the same kind
    # gave other ratios (issue #47), so every table carries these.
    load = load_average()
    if load[0] > 0.5 and not args.busy_ok:
        sys.exit(f"the machine is busy (load average {load[0]:.2f} > 0.5): wait for it to settle, "
                 "or pass --busy-ok to measure anyway")
    facts = {**machine(), "load_before": load, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
             "fsync": fsync_latency(os.path.join(ROOT, "target"))}
    print(describe(facts), flush=True)
    results = []
    ratios = []
    observed = []
    running = []
    try:
        for name, system, start, durable in SYSTEMS:
            if chosen is not None and name not in chosen:
                continue
            data = tempfile.mkdtemp(prefix="versus-", dir=os.path.join(ROOT, "target"))
            running.append((name, system, durable, data, start(data)))
        for i, (clients, contended, limit, wait) in enumerate(SCENARIOS):
            scenario = scenario_name(clients, contended, limit, wait)
            if args.scenarios is not None and scenario not in args.scenarios.split(","):
                continue
            # This machine is a VM with neighbours: each point is the median of several runs (by
            # throughput; its latencies are that run's), and every run's figure is kept. The
            # systems take turns, one run each a round, in an order that rotates, so a slow spell
            # falls on all of them alike: run one system after another, two runs of the same
            # command gave ratios that moved by up to 0.26 (issue #47).
            runs = {name: [] for name, *_ in running}
            for k in range(args.repeat):
                turn = k % len(running)
                for name, system, _, _, (proc, url) in running[turn:] + running[:turn]:
                    if wait and system == "redis":
                        continue  # no waiting lock: its nearest is the retry loop of "contending"
                    runs[name].append(run_loadgen(system, url, clients, contended, limit, wait,
                                                  args.seconds, f"s{i}r{k}", proc.pid))
            for name, system, durable, *_ in running:
                if not runs[name]:
                    continue
                ordered = sorted(runs[name], key=lambda run: run["granted_per_s"])
                r = dict(ordered[len(ordered) // 2])
                r.update(name=name, durable=durable, scenario=scenario,
                         runs_granted_per_s=[run["granted_per_s"] for run in ordered],
                         rounds_granted_per_s=[run["granted_per_s"] for run in runs[name]])
                results.append(r)
                print(f"{name:28} {r['scenario']:14} {r['granted_per_s']:>9,.0f} cycles/s  "
                      f"p50 {r['p50_ms']:.2f} ms  p99 {r['p99_ms']:.2f} ms  errors {r['errors']}  "
                      f"cores: server {r['server_cores']:.2f}, load generator "
                      f"{r['loadgen_cores']:.2f}", flush=True)
            ratio = paired_ratio(scenario, running[0][0], runs, [name for name, *_ in running[1:]])
            ratios.extend(ratio)
            for r in ratio:
                print(f"{r['of']} / {r['to']:20} {r['scenario']:14} {r['median']:>9.2f} "
                      f"(rounds: {', '.join(f'{x:.2f}' for x in r['rounds'])})", flush=True)
        for name, system, durable, _, (_, url) in running:
            if system == "redis" or (args.scenarios is not None and OBSERVE not in args.scenarios.split(",")):
                continue
            ways = ([("watch chain", lambda: observe.leasekit(url, API_KEY, OBSERVE_CHANGES)),
                     ("event stream", lambda: observe.leasekit_stream(url, API_KEY, OBSERVE_CHANGES))]
                    if system == "leasekit" else [("Observe stream", lambda: observe.etcd(url, OBSERVE_CHANGES))])
            for way, measure in ways:
                runs = [observe.summary(measure()) for _ in range(args.repeat)]
                runs.sort(key=lambda run: run["observed_p50_ms"])
                r = dict(runs[len(runs) // 2], name=f"{name} ({way})", durable=durable,
                         runs_observed_p50_ms=[run["observed_p50_ms"] for run in runs],
                         runs_observed_p99_ms=[run["observed_p99_ms"] for run in runs])
                observed.append(r)
                print(f"{r['name']:28} {OBSERVE}  p50 {r['observed_p50_ms']:.2f} ms  "
                      f"p99 {r['observed_p99_ms']:.2f} ms  (the write alone: p50 "
                      f"{r['write_p50_ms']:.2f} ms)", flush=True)
    finally:
        for _, _, _, data, (proc, _) in running:
            proc.terminate()
            proc.wait()
            link = os.path.join(data, "tmpfs")
            if os.path.islink(link):
                shutil.rmtree(os.readlink(link), ignore_errors=True)
            shutil.rmtree(data, ignore_errors=True)
    # One system's points together, in the systems' order, as the table and charts expect.
    order = [name for name, *_ in SYSTEMS]
    results.sort(key=lambda r: order.index(r["name"]))
    os.makedirs(RESULTS, exist_ok=True)
    report = {"machine": facts, "seconds": args.seconds, "repeat": args.repeat,
              "date": time.strftime("%Y-%m-%d"), "results": results, "ratios": ratios,
              "observe": observed}
    with open(out, "w") as f:
        json.dump(report, f, indent=1)
    print()
    print(describe(facts))
    print()
    print(table(results))
    if ratios:
        print()
        print(ratio_table(ratios))
    if observed:
        print()
        print(observe_table(observed))
    # A comparison kept apart (--out) leaves the published charts alone.
    if args.out is None:
        charts(os.path.join(RESULTS, name), partial)


if __name__ == "__main__":
    main()
