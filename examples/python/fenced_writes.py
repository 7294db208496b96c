"""Leases with plain `requests`, and a downstream store that refuses stale fencing tokens.

Two workers want to write the same record. Each takes the lease first and sends its fencing token
with every write; the store remembers the largest token it has seen and refuses anything smaller.
So a worker that was paused past its lease (GC pause, network partition) cannot overwrite the
work of the worker that took over, even though it still believes it holds the lease.

Run against a local server:
    cargo run --release --bin leasekit -- serve --api-key dev:dev-key-0123456789
    LEASEKIT_URL=http://127.0.0.1:3000 LEASEKIT_API_KEY=dev-key-0123456789 python3 examples/python/fenced_writes.py
"""

import os
import time
import uuid

import requests

URL = os.environ.get("LEASEKIT_URL", "http://127.0.0.1:3000") + "/api/v1/lease"
KEY = os.environ["LEASEKIT_API_KEY"]


def lease(op, **fields):
    """One lease call. A requestId makes a retry of a mutation safe: retry with the same one."""
    body = {"op": op, "tenantId": "examples", **fields}
    if op != "get":
        body.setdefault("requestId", str(uuid.uuid4()))
    response = requests.post(URL, json=body, headers={"X-API-KEY": KEY}, timeout=10)
    response.raise_for_status()
    return response.json()["data"]


class FencedStore:
    """The downstream store: refuses a write whose token is smaller than one it has accepted."""

    def __init__(self):
        self.value, self.highest_token = None, 0

    def write(self, value, token):
        if token < self.highest_token:
            raise PermissionError(f"stale fencing token {token} < {self.highest_token}: refused")
        self.highest_token, self.value = token, value


def main():
    store = FencedStore()
    resource = f"invoice:{uuid.uuid4().hex[:8]}"

    # Worker A takes the lease for 1 second, then stalls past it.
    a = lease("acquire", resource=resource, holder="worker-a", ttlSeconds=1)
    assert a["granted"]
    time.sleep(1.2)

    # Worker B finds it lapsed and takes it with a larger token, and writes.
    b = lease("acquire", resource=resource, holder="worker-b", ttlSeconds=30)
    assert b["granted"] and b["fencingToken"] > a["fencingToken"]
    store.write("written by B", b["fencingToken"])

    # Worker A wakes up and tries to write with its old token: refused.
    try:
        store.write("written by A", a["fencingToken"])
        raise SystemExit("the stale write went through")
    except PermissionError as refused:
        print(f"worker A: {refused}")

    # Worker A learns it lost the lease by renewing.
    renewed = lease("renew", resource=resource, holder="worker-a", token=a["fencingToken"])
    print(f"worker A renew: granted={renewed['granted']} ({renewed['witnesses'][0]['ruleId']})")

    lease("release", resource=resource, holder="worker-b", token=b["fencingToken"])
    print(f"store holds {store.value!r}, highest token {store.highest_token}")
    return store


if __name__ == "__main__":
    main()
