"""Change-to-observer latency: how long after a leader's new value is sent an observer hears it.

One writer process holds the leadership and proclaims a new value (its sequence number), one
observer follows the leader; both are threads of this process on one monotonic clock, each with
its own keep-alive connection. A change's latency runs from just before the writer sends the
proclaim to the moment the observer has read the change. The next change is sent once the
observer has it (plus a 10 ms pause), so changes never coalesce.

- leasekit: proclaim is a renew with `value`; the observer chains `watch` calls on `stateTag`
  (each a long poll answered as soon as the state changes: the local server wakes it from the
  write, no polling), or reads one server-sent-event stream of them (`leasekit_stream`).
- etcd: its election API through the v3 JSON gateway: Campaign once, Proclaim per change, and
  one Observe stream (newline-delimited JSON messages on one response).

Used by bench/versus.py (the "change to observer" scenario); alone:
python3 bench/observe.py leasekit URL API_KEY | leasekit-stream URL API_KEY | etcd URL [--changes 200]
"""

import base64
import http.client
import json
import secrets
import statistics
import sys
import threading
import time
import urllib.parse


def _connection(url):
    parts = urllib.parse.urlsplit(url)
    return http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)


def _post(conn, path, body, headers=None):
    conn.request("POST", path, json.dumps(body), {"content-type": "application/json", **(headers or {})})
    response = conn.getresponse()
    data = response.read()
    if response.status != 200:
        raise RuntimeError(f"{path}: {response.status} {data[:200]!r}")
    return json.loads(data)


class _Seen:
    """The values the observer has read, each with when."""

    def __init__(self):
        self.at = {}
        self.changed = threading.Condition()

    def add(self, value):
        with self.changed:
            self.at.setdefault(value, time.monotonic())
            self.changed.notify_all()

    def wait(self, value, timeout=10.0):
        give_up = time.monotonic() + timeout
        with self.changed:
            while value not in self.at:
                left = give_up - time.monotonic()
                if left <= 0:
                    raise RuntimeError(f"the observer never saw {value!r}")
                self.changed.wait(left)
            return self.at[value]


def _observed(observe, proclaim, changes):
    """Run `observe(seen)` on a thread of its own until the leader's first value is seen, then
    measure `changes` proclaims against it."""
    seen = _Seen()
    thread = threading.Thread(target=observe, args=(seen,), daemon=True)
    thread.start()
    seen.wait("v0")
    return _measure(proclaim, seen, changes), thread


def _measure(proclaim, seen, changes):
    """Proclaim `changes` values one after another; each one's (write, observed) seconds."""
    figures = []
    for i in range(1, changes + 1):
        value = f"v{i}"
        sent = time.monotonic()
        proclaim(value)
        answered = time.monotonic()
        observed = seen.wait(value)
        figures.append((answered - sent, observed - sent))
        time.sleep(0.01)
    return figures


class _Leader:
    """A leasekit resource led by `writer` with value v0, and its proclaims (renews with a
    value), on a connection of its own."""

    def __init__(self, url, api_key):
        self.headers = {"x-api-key": api_key}
        self.base = {"tenantId": "bench", "resource": f"observe-{secrets.token_hex(4)}"}
        self._writer = _connection(url)
        self._token = self._send({"op": "acquire", "ttlSeconds": 600, "value": "v0"})["fencingToken"]

    def _send(self, fields):
        body = {**self.base, "holder": "writer", "requestId": secrets.token_hex(12), **fields}
        data = _post(self._writer, "/api/v1/lease", body, self.headers)["data"]
        assert data["granted"], data
        return data

    def proclaim(self, value):
        self._send({"op": "renew", "token": self._token, "ttlSeconds": 600, "value": value})


def leasekit(url, api_key, changes):
    leader, observer = _Leader(url, api_key), _connection(url)
    stop = threading.Event()

    def observe(seen):
        tag = None
        while not stop.is_set():
            body = {**leader.base, "op": "watch", "waitSeconds": 2}
            if tag:
                body["stateTag"] = tag
            data = _post(observer, "/api/v1/lease", body, leader.headers)["data"]
            if data["changed"] and data["value"]:
                seen.add(data["value"])
            tag = data["stateTag"]

    figures, thread = _observed(observe, leader.proclaim, changes)
    stop.set()
    thread.join()
    return figures


def _streamed(url, path, body, headers, value_of, proclaim, changes):
    """`changes` proclaims, observed on one streamed response to `body` at `path`: each line
    that `value_of` reads a value from is that value seen."""
    stream = _connection(url)
    stream.request("POST", path, json.dumps(body), {"content-type": "application/json", **headers})
    response = stream.getresponse()
    if response.status != 200:
        raise RuntimeError(f"{path}: {response.status}")

    def observe(seen):
        # For as long as the stream is open (closed at the end).
        try:
            for line in response:
                value = value_of(line)
                if value:
                    seen.add(value)
        except (OSError, ValueError, AttributeError):
            return

    try:
        return _observed(observe, proclaim, changes)[0]
    finally:
        stream.close()


def leasekit_stream(url, api_key, changes):
    """The same through one server-sent-event stream (`Accept: text/event-stream` on a watch):
    no new request per change, as etcd's Observe."""
    leader = _Leader(url, api_key)

    def value_of(line):
        return json.loads(line[6:])["data"]["value"] if line.startswith(b"data: ") else None

    return _streamed(url, "/api/v1/lease", {**leader.base, "op": "watch"},
                     {"accept": "text/event-stream", **leader.headers}, value_of, leader.proclaim, changes)


def _b64(text):
    return base64.b64encode(text.encode()).decode()


def etcd(url, changes):
    name = _b64(f"observe-{secrets.token_hex(4)}")
    writer = _connection(url)
    lease = _post(writer, "/v3/lease/grant", {"TTL": 600})["ID"]
    leader = _post(writer, "/v3/election/campaign", {"name": name, "lease": lease, "value": _b64("v0")})["leader"]

    def value_of(line):
        # One JSON message per line.
        kv = json.loads(line).get("result", {}).get("kv")
        return base64.b64decode(kv["value"]).decode() if kv and "value" in kv else None

    def proclaim(value):
        _post(writer, "/v3/election/proclaim", {"leader": leader, "value": _b64(value)})

    return _streamed(url, "/v3/election/observe", {"name": name}, {}, value_of, proclaim, changes)


def summary(figures):
    """p50 and p99 of the write alone and of change-to-observer, in ms."""
    def pct(values, q):
        ordered = sorted(values)
        return 1000 * ordered[min(len(ordered) - 1, int(q * len(ordered)))]
    writes = [w for w, _ in figures]
    observed = [o for _, o in figures]
    return {"changes": len(figures), "write_p50_ms": pct(writes, 0.5), "write_p99_ms": pct(writes, 0.99),
            "observed_p50_ms": pct(observed, 0.5), "observed_p99_ms": pct(observed, 0.99),
            "observed_mean_ms": 1000 * statistics.fmean(observed)}


if __name__ == "__main__":
    args = sys.argv[1:]
    n = 200
    if "--changes" in args:
        at = args.index("--changes")
        n = int(args[at + 1])
        del args[at:at + 2]
    if args[0] == "leasekit":
        print(json.dumps(summary(leasekit(args[1], args[2], n))))
    elif args[0] == "leasekit-stream":
        print(json.dumps(summary(leasekit_stream(args[1], args[2], n))))
    else:
        print(json.dumps(summary(etcd(args[1], n))))
