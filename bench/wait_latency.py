"""Release-to-grant and lapse-to-grant delays of a waiting acquire on `leasekit serve`.

Each trial: a holder takes a lease; a waiter asks for it with waitSeconds 20 (its place taken
before the release, checked); the holder releases and the delay is from the release's answer
to the waiter's answer. Lapse trials: the holder's 1 s lease lapses, and the delay is from its
expiresAt (server clock, the same host) to the waiter's answer. The waiter's HTTP round trip is
in every figure.

    cargo build --release --bin leasekit
    python bench/wait_latency.py --bin target/release/leasekit --trials 50
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
import threading
import time
from datetime import datetime

import httpx

KEY = "bench:bench-key-0123456789abcdef"


def ms(values: list[float]) -> str:
    ordered = sorted(values)
    p95 = ordered[max(0, int(len(ordered) * 0.95) - 1)]
    return f"p50 {statistics.median(ordered):.1f} ms, p95 {p95:.1f} ms, max {ordered[-1]:.1f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin", default="target/release/leasekit")
    parser.add_argument("--trials", type=int, default=50)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as data:
        server = subprocess.Popen([args.bin, "serve", "--addr", "127.0.0.1:0", "--data-dir", data, "--api-key", KEY],
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            assert server.stdout is not None
            url = server.stdout.readline().strip() + "/api/v1/lease"
            http = httpx.Client(headers={"x-api-key": KEY.split(":")[1]}, timeout=30)

            def call(body: dict[str, object]) -> dict[str, object]:
                answer: dict[str, object] = http.post(url, json={"tenantId": "b", **body}).json()["data"]
                return answer

            def queued(resource: str) -> None:
                while call({"op": "acquire", "resource": resource, "holder": "w"}).get("queuePosition") != 1:
                    time.sleep(0.005)

            released: list[float] = []
            lapsed: list[float] = []
            for i in range(args.trials):
                for kind in ("release", "lapse"):
                    resource = f"{kind}-{i}"
                    ttl = 30 if kind == "release" else 1
                    held = call({"op": "acquire", "resource": resource, "holder": "h", "ttlSeconds": ttl})
                    answered: list[float] = []
                    waiter = threading.Thread(target=lambda r=resource: (call(
                        {"op": "acquire", "resource": r, "holder": "w", "waitSeconds": 20}), answered.append(time.time())))
                    waiter.start()
                    queued(resource)
                    if kind == "release":
                        call({"op": "release", "resource": resource, "holder": "h", "token": held["fencingToken"]})
                        at = time.time()
                        waiter.join()
                        released.append((answered[0] - at) * 1000)
                    else:
                        expires = datetime.fromisoformat(str(held["expiresAt"]).replace("Z", "+00:00")).timestamp()
                        waiter.join()
                        lapsed.append((answered[0] - expires) * 1000)
            print(f"leasekit serve (embedded store), {args.trials} trials each")
            print(f"release to grant: {ms(released)}")
            print(f"lapse to grant:   {ms(lapsed)}")
        finally:
            server.terminate()
            server.wait()


if __name__ == "__main__":
    main()
