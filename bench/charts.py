"""Charts of bench/versus.py's results: throughput and p99 latency against clients, per system;
and, where the run has them, 64 clients on one lock or semaphore of limit 1, 8 and 64 and 16
clients waiting in line (versus-limits.png).

Usage: python bench/charts.py bench/results/versus.json bench/results [--limits]
(run by versus.py inside .venv-bench, which has matplotlib).
"""

import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def limits(report, out):
    """Grouped bars: granted cycles/s per system at each limit, and waiting in line."""
    wanted = ["64 contending", "64 on a limit-8 semaphore", "64 on a limit-64 semaphore",
              "16 waiting in line"]
    results = [r for r in report["results"] if r["scenario"] in wanted]
    if not results:
        return
    names = list(dict.fromkeys(r["name"] for r in results))
    fig, ax = plt.subplots(figsize=(11, 4.5))
    width = 0.8 / len(names)
    for i, name in enumerate(names):
        xs, ys = [], []
        for j, scenario in enumerate(wanted):
            row = next((r for r in results if r["name"] == name and r["scenario"] == scenario), None)
            if row is not None:
                xs.append(j + i * width)
                ys.append(row["granted_per_s"])
        bars = ax.bar(xs, ys, width, label=name, color=f"C{i}")
        ax.bar_label(bars, fmt="{:,.0f}", fontsize=7)
    ax.set_yscale("log")
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(wanted))],
                  ["64 on a lock (limit 1)", "64 on limit 8", "64 on limit 64",
                   "16 waiting in line (no Redis equivalent)"], fontsize=8)
    ax.set_ylabel("granted cycles per second")
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=8)
    fig.suptitle(f"one contended resource: a lock, semaphores, and waiting in line\n"
                 f"{report['machine']['cores']} cores, loopback, median of "
                 f"{report.get('repeat', 1)} runs of {report['seconds']:g} s, {report['date']}",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "versus-limits.png"), dpi=110)
    plt.close(fig)


def main(path, out, only_limits=False):
    report = json.load(open(path))
    limits(report, out)
    results = report["results"]
    if only_limits:
        return
    names = list(dict.fromkeys(r["name"] for r in results))
    machine = report["machine"]
    subtitle = (f"{machine['cores']} cores, loopback, median of {report.get('repeat', 1)} runs of "
                f"{report['seconds']:g} s per point, {report['date']}")
    for metric, label, filename in [
        ("granted_per_s", "acquire+release cycles per second", "versus-throughput.png"),
        ("p99_ms", "p99 latency of a cycle (ms)", "versus-p99.png"),
    ]:
        fig, (distinct, contended) = plt.subplots(
            1, 2, figsize=(11, 4.5), gridspec_kw={"width_ratios": [3, 1.4]})
        for name in names:
            rows = [r for r in results if r["name"] == name and not r["contended"]]
            style = "-" if any(r["durable"] for r in rows) else ":"
            distinct.plot([r["clients"] for r in rows], [r[metric] for r in rows], style,
                          marker="o", label=name)
        distinct.set_xscale("log", base=2)
        # Log scale: the systems differ by orders of magnitude, and ratios are what matter.
        distinct.set_yscale("log")
        contended.set_yscale("log")
        distinct.set_xticks([1, 16, 64], ["1", "16", "64"])
        distinct.set_xlabel("clients, one resource each")
        distinct.set_ylabel(label)
        distinct.grid(alpha=0.3)
        distinct.legend(fontsize=8)
        hot = [next(r for r in results if r["name"] == n and r["contended"]) for n in names]
        bars = contended.bar(range(len(names)), [r[metric] for r in hot],
                             color=[f"C{i}" for i in range(len(names))])
        # On a log axis bar heights mislead: print the values.
        contended.bar_label(bars, fmt="{:,.0f}" if metric == "granted_per_s" else "{:.1f}",
                            fontsize=7)
        contended.set_xticks(range(len(names)), [n.split(" (")[0] + ("*" if not r["durable"] else "")
                                                 for n, r in zip(names, hot)], fontsize=8)
        contended.set_xlabel("16 clients, one resource (* not durable)")
        contended.grid(alpha=0.3, axis="y")
        fig.suptitle(f"{label}: leasekit local server, etcd, Redis\n{subtitle}", fontsize=10)
        fig.tight_layout()
        fig.savefig(os.path.join(out, filename), dpi=110)
        plt.close(fig)


if __name__ == "__main__":
    # --limits: a partial run, whose figures must not replace the full run's charts.
    main(sys.argv[1], sys.argv[2], only_limits="--limits" in sys.argv[3:])
