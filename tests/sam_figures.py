"""Figures of the deployed shape under `sam local start-api`, for BENCHMARKS.md: each function's
init duration (from the REPORT lines in SAM's log), the warm latency of each route (median
and 90th percentile of 20 calls, after 3 to warm up), through SAM's API Gateway emulation, and
the release-to-grant delay of a waiting acquire (the function polls the store; nothing wakes it).

Usage: python tests/sam_figures.py BASE_URL API_KEY SAM_LOG
"""

import json
import re
import statistics
import sys
import threading
import time
import urllib.request


def call(url, body=None, headers=None):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"content-type": "application/json", **(headers or {})})
    start = time.perf_counter()
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            response.read()
    except urllib.error.HTTPError as e:
        e.read()
    return (time.perf_counter() - start) * 1000


def main(base, key, log):
    routes = {
        "GET /openapi.json (public)": (f"{base}/openapi.json", None, None),
        "GET /.well-known/did.json (public)": (f"{base}/.well-known/did.json", None, None),
        "POST /api/v1/lease get (lease)": (f"{base}/api/v1/lease", {"op": "get", "tenantId": "bench", "resource": "r"}, {"x-api-key": key}),
        "POST /api/v1/lease acquire (lease)": (f"{base}/api/v1/lease", {"op": "acquire", "tenantId": "bench", "resource": "r", "holder": "h"}, {"x-api-key": key}),
        "POST /claim/free (claim-free)": (f"{base}/claim/free", {"key": "bench", "holder": "h"}, {"x-api-key": key}),
        "POST /mcp tools/list (mcp, key checked in the function)": (
            f"{base}/mcp",
            {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            {"x-api-key": key, "accept": "application/json, text/event-stream", "mcp-protocol-version": "2025-06-18"},
        ),
    }
    print("warm latency through sam local (ms): median / p90 of 20")
    for name, (url, body, headers) in routes.items():
        for _ in range(3):
            call(url, body, headers)
        times = sorted(call(url, body, headers) for _ in range(20))
        print(f"  {name}: {statistics.median(times):.1f} / {times[17]:.1f}")
    try:
        figure = release_to_grant(base, key)
    except Exception as e:  # a figure, not a test: say why there is none
        figure = f"not measured ({type(e).__name__}: {e})"
    print("release to grant of a waiting acquire through sam local (ms), 5 trials: " + figure)
    inits, durations = [], []
    with open(log, errors="replace") as f:
        for line in f:
            if not line.startswith("REPORT "):
                continue
            init = re.search(r"Init Duration:\s*([0-9.]+)\s*ms", line)
            if init:
                inits.append(float(init.group(1)))
            duration = re.search(r"\tDuration:\s*([0-9.]+)\s*ms", line)
            if duration:
                durations.append(float(duration.group(1)))
    # The emulator reports the init of a container it started eagerly, before the first call.
    print(f"init durations (REPORT lines, {len(inits)} functions): " + ", ".join(f"{v:.2f}" for v in sorted(inits)) + " ms")
    if durations:
        durations.sort()
        print(
            f"function durations (REPORT lines, {len(durations)} calls): median {statistics.median(durations):.1f} ms, "
            f"p90 {durations[len(durations) * 9 // 10]:.1f} ms, first/slowest {durations[-1]:.1f} ms"
        )


def over_mcp(base, key, tool, arguments):
    """A lease tool called through the MCP function (its `data`)."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}
    headers = {"x-api-key": key, "content-type": "application/json",
               "accept": "application/json, text/event-stream", "mcp-protocol-version": "2025-06-18"}
    request = urllib.request.Request(f"{base}/mcp", data=json.dumps(body).encode(), headers=headers)
    with urllib.request.urlopen(request, timeout=40) as response:
        answer = json.loads(response.read())
    return answer["result"]["structuredContent"]["data"]


def release_to_grant(base, key, trials=5):
    """A holder takes a lease, a waiter asks with waitSeconds 20 and is seen in the queue, the
    holder releases: from the release's answer to the waiter's."""
    url, headers = f"{base}/api/v1/lease", {"x-api-key": key}

    def post(body):
        data = json.dumps({"tenantId": "bench-wait", **body}).encode()
        request = urllib.request.Request(url, data=data, headers={"content-type": "application/json", **headers})
        with urllib.request.urlopen(request, timeout=40) as response:
            return json.loads(response.read())["data"]

    delays = []
    for i in range(trials):
        resource = f"wait-{time.time_ns()}-{i}"
        held = post({"op": "acquire", "resource": resource, "holder": "owner", "ttlSeconds": 60})
        answered = {}

        def wait():
            answered["data"] = post({"op": "acquire", "resource": resource, "holder": "waiter", "waitSeconds": 20})
            answered["at"] = time.perf_counter()

        waiter = threading.Thread(target=wait)
        waiter.start()
        # The waiter's place shows in the list (its waiters) once its first round wrote it. The
        # list and the release go through the MCP function: sam local runs one invocation of a
        # function at a time, so a call to the lease function would wait behind the waiting one.
        deadline = time.time() + 20
        while time.time() < deadline:
            leases = over_mcp(base, key, "lease_list", {"op": "list", "tenantId": "bench-wait", "prefix": resource})["leases"]
            if leases and leases[0]["waiters"]:
                break
            time.sleep(0.1)
        over_mcp(base, key, "lease", {"op": "release", "tenantId": "bench-wait", "resource": resource,
                                      "holder": "owner", "token": held["fencingToken"]})
        released = time.perf_counter()
        waiter.join(40)
        if answered.get("data", {}).get("granted"):
            delays.append((answered["at"] - released) * 1000)
    if not delays:
        return "no waiter was granted"
    delays.sort()
    return f"median {statistics.median(delays):.0f}, max {delays[-1]:.0f} ({len(delays)} granted)"


if __name__ == "__main__":
    main(*sys.argv[1:4])
