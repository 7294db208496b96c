"""How far `list` lags behind the writes it shows, and what a page costs, on `leasekit serve`.

Lag: each trial acquires a new resource and lists (prefix = its name) until the page shows it;
the lag is from the acquire's answer to the first page that shows it, and the count of pages
that missed it first. The same after a release, until the page no longer shows it. Cost: a
tenant with `--resources` live leases is paged through at `--page-size`; each page's DynamoDB
round trips and read units are the server's own request-log figures (`store_round_trips`,
`store_read_units`), and its latency is the client's.

    cargo build --release --bin leasekit
    python bench/list_lag.py --bin target/release/leasekit --trials 200 --resources 500
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import tempfile
import time

import httpx

KEY = "bench:bench-key-0123456789abcdef"


def summary(values: list[float], unit: str) -> str:
    ordered = sorted(values)
    p95 = ordered[max(0, int(len(ordered) * 0.95) - 1)]
    return f"p50 {statistics.median(ordered):.2f} {unit}, p95 {p95:.2f} {unit}, max {ordered[-1]:.2f} {unit}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin", default="target/release/leasekit")
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--resources", type=int, default=500)
    parser.add_argument("--page-size", type=int, default=50)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as data:
        log_path = f"{data}/server.log"
        with open(log_path, "w") as log:
            server = subprocess.Popen(
                [args.bin, "serve", "--addr", "127.0.0.1:0", "--data-dir", f"{data}/d", "--api-key", KEY],
                stdout=subprocess.PIPE, stderr=log, text=True, env={"RUST_LOG": "info"})
        try:
            assert server.stdout is not None
            url = server.stdout.readline().strip() + "/api/v1/lease"
            http = httpx.Client(headers={"x-api-key": KEY.split(":")[1]}, timeout=30)

            def call(body: dict[str, object]) -> dict[str, object]:
                answer: dict[str, object] = http.post(url, json={"tenantId": "b", **body}).json()["data"]
                return answer

            def shown(resource: str) -> bool:
                page = call({"op": "list", "prefix": resource})
                return any(entry["resource"] == resource for entry in page["leases"])  # type: ignore[index, union-attr]

            def lag(resource: str, want: bool) -> tuple[float, int]:
                start, misses = time.perf_counter(), 0
                while shown(resource) != want:
                    misses += 1
                return (time.perf_counter() - start) * 1000, misses

            grant_lags, release_lags, misses = [], [], 0
            for i in range(args.trials):
                resource = f"lag-{i:05}"
                taken = call({"op": "acquire", "resource": resource, "holder": "w", "ttlSeconds": 60})
                ms, missed = lag(resource, True)
                grant_lags.append(ms)
                misses += missed
                call({"op": "release", "resource": resource, "holder": "w", "token": taken["fencingToken"]})
                ms, missed = lag(resource, False)
                release_lags.append(ms)
                misses += missed
            print(f"list lag, {args.trials} trials (acquire or release answered -> first page that agrees):")
            print(f"  after a grant:   {summary(grant_lags, 'ms')}")
            print(f"  after a release: {summary(release_lags, 'ms')}")
            print(f"  pages that disagreed first: {misses} of {2 * args.trials}")

            for i in range(args.resources):
                call({"op": "acquire", "resource": f"job-{i:05}", "holder": "w", "ttlSeconds": 600})
            with open(log_path) as f:
                skip = len(f.readlines())
            cursor, latencies, pages, listed = None, [], 0, 0
            while True:
                body: dict[str, object] = {"op": "list", "prefix": "job-", "pageSize": args.page_size}
                if cursor:
                    body["cursor"] = cursor
                start = time.perf_counter()
                page = call(body)
                latencies.append((time.perf_counter() - start) * 1000)
                pages += 1
                listed += len(page["leases"])  # type: ignore[arg-type]
                cursor = page["nextCursor"]
                if cursor is None:
                    break
            time.sleep(0.2)
            with open(log_path) as f:
                lines = [line for line in f.readlines()[skip:] if 'op="list"' in line]
            trips = [int(m.group(1)) for line in lines if (m := re.search(r"store_round_trips=(\d+)", line))]
            units = [float(m.group(1)) for line in lines if (m := re.search(r"store_read_units=([\d.]+)", line))]
            print(f"paging {listed} live leases at pageSize {args.page_size}: {pages} pages")
            print(f"  latency per page: {summary(latencies, 'ms')}")
            print(f"  DynamoDB per page: {statistics.median(trips):.0f} round trips, "
                  f"{statistics.median(units):.1f} read units (median; max {max(units):.1f})")
        finally:
            server.terminate()
            server.wait(10)


if __name__ == "__main__":
    main()
