"""Where the deployment under test answers differently from `leasekit serve`, pinned both ways.

Under LEASEKIT_TARGET=sam-local these tests assert what SAM's emulation of API Gateway does (SAM
CLI 1.170, samcli/local/apigw), under serve what the service does, so a change on either side
shows up here instead of as a mystery elsewhere:

- No route is behind the API Gateway authorizer any more (/mcp takes a wallet's payment per tool
  call too, so a keyless caller must reach the function). Were one added: a bad key makes the
  authorizer fail with `Unauthorized`, which real API Gateway turns into 401 (GatewayResponses
  UNAUTHORIZED) but SAM into 502 `{"message": "Internal server error"}`, and a missing key gets
  SAM's own 401 body: API Gateway's GatewayResponses bodies are not emulated.
- Every request gets the same `requestContext.requestId` (a default argument SAM evaluates once).
  No answer carries it; only the functions' log lines do.
- Routes that check keys in the function (lease, MCP, free claims) answer 401 with our body in both.
"""

import json
import os
import re
import time
import urllib.error
import urllib.request

import pytest

from conftest import API_KEY, SAM_LOCAL, needs_own_server, start_serve, stop_serve, unique

# A well-formed key no deployment issued, and something that is not a key at all.
BAD_KEYS = ["lk_" + "A" * 43, "not a key"]


def post(url, body, headers=None):
    """(status, parsed body or raw text) of a POST with a JSON body."""
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST")
    request.add_header("content-type", "application/json")
    request.add_header("accept", "application/json, text/event-stream")
    for name, value in (headers or {}).items():
        request.add_header(name, value)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            status, raw = response.status, response.read()
    except urllib.error.HTTPError as error:
        status, raw = error.code, error.read()
    try:
        return status, json.loads(raw)
    except ValueError:
        return status, raw.decode(errors="replace")


def our_unauthorized(body):
    return isinstance(body, dict) and body.get("code") == "UNAUTHORIZED" and body.get("error")


MCP_LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}


def test_no_key_on_mcp_lists_the_tools_for_a_wallet(server):
    """No key is no refusal: a wallet lists the tools, and pays per call (test_mcp.py)."""
    status, body = post(server + "/mcp", MCP_LIST)
    assert status == 200, (status, body)
    if isinstance(body, str):
        body = json.loads(next(line[5:] for line in body.splitlines() if line.startswith("data:")))
    assert sorted(t["name"] for t in body["result"]["tools"]) == ["claim_free", "lease", "lease_audit", "lease_list", "lease_read", "lease_revoke"]


def test_the_good_key_on_mcp(server):
    """The control for the bad keys below: the same request with the key is answered."""
    status, body = post(server + "/mcp", MCP_LIST, {"x-api-key": API_KEY})
    assert status == 200, (status, body)
    if isinstance(body, str):  # an SSE stream: its data line holds the JSON-RPC answer
        body = json.loads(next(line[5:] for line in body.splitlines() if line.startswith("data:")))
    assert sorted(t["name"] for t in body["result"]["tools"]) == ["claim_free", "lease", "lease_audit", "lease_list", "lease_read", "lease_revoke"]


@pytest.mark.parametrize("bad", BAD_KEYS)
def test_keys_checked_in_the_function_are_401_in_every_mode(server, bad):
    lease = {"op": "get", "resource": unique("kd"), "tenantId": unique("kd")}
    claim = {"key": unique("kd"), "holder": "h"}
    for path, body in [("/api/v1/lease", lease), ("/claim/free", claim), ("/mcp", MCP_LIST)]:
        status, answer = post(server + path, body, {"x-api-key": bad})
        assert status == 401 and our_unauthorized(answer), (path, status, answer)


def test_answers_do_not_depend_on_the_gateway_request_id(server):
    """SAM repeats one requestContext.requestId: if anything keyed on it (idempotency, say), the
    second and third mutations here would be replayed or refused instead of applied."""
    key = {"x-api-key": API_KEY}
    base = {"resource": unique("kd-rid"), "tenantId": unique("kd"), "holder": "h"}
    first = post(server + "/api/v1/lease", {"op": "acquire", **base}, key)[1]["data"]
    token = first["fencingToken"]
    released = post(server + "/api/v1/lease", {"op": "release", "token": token, **base}, key)[1]["data"]
    again = post(server + "/api/v1/lease", {"op": "acquire", **base}, key)[1]["data"]
    assert (first["granted"], released["granted"], again["granted"]) == (True, True, True)
    assert not any(a["replayed"] for a in (first, released, again))
    assert again["fencingToken"] > token


# The request's span on each line: `request{id=…}` locally (text), `"span":{…"id":"…"…}` on Lambda (JSON).
REQUEST_ID = re.compile(r'request\{id=([^}]*)\}|"span":\{[^}]*"id":"([^"]*)"')


def logged_request_ids(text):
    """The span id of each request line (the one that names the route)."""
    return [m.group(1) or m.group(2) for line in text.splitlines() if "route" in line
            for m in REQUEST_ID.finditer(line)]


def test_the_request_id_in_the_log_lines(server, tmp_path):
    if SAM_LOCAL:
        log = os.environ.get("LEASEKIT_SAM_LOG")
        if not log:
            pytest.skip("set LEASEKIT_SAM_LOG to SAM's output (start.sh's SAM_LOG) to read the functions' log lines")
        for _ in range(3):
            urllib.request.urlopen(server + "/.well-known/did.json", timeout=30).read()
        for _ in range(50):  # SAM copies a container's log lines to its output as they come
            with open(log, errors="replace") as file:
                ids = logged_request_ids(file.read())
            if len(ids) >= 3:
                break
            time.sleep(0.1)
        assert len(ids) >= 3, "the functions' request log lines are not in LEASEKIT_SAM_LOG"
        # Known difference: real API Gateway gives every request its own id.
        assert len(set(ids)) == 1, set(ids)
    else:
        needs_own_server("reads the request log lines of a server it starts with RUST_LOG=info")
        # serve has no API Gateway request context: each request gets a random id of its own.
        with open(tmp_path / "serve.log", "w+") as errors:
            process, url = start_serve(env={"RUST_LOG": "info"}, stderr=errors)
            try:
                for _ in range(3):
                    urllib.request.urlopen(url + "/.well-known/did.json", timeout=10).read()
            finally:
                stop_serve(process)
            errors.seek(0)
            ids = logged_request_ids(errors.read())
        assert len(ids) == 3 and len(set(ids)) == 3 and all(ids), ids
