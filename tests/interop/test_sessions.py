"""A session over HTTP against whatever is under test (own `leasekit serve`, or LEASEKIT_URL such
as the Lambda functions under `sam local start-api`): open, acquire in it, keep it alive, close
it, and every permit in it is free at once; each answer checked with the independent verifier.
On Lambda each call may land in another container: the session lives in the store, not in any
process."""

import pytest
import requests

from conftest import API_KEY, unique
from verifier import verify

TIMEOUT = 60
KEY = {"X-API-KEY": API_KEY}


@pytest.fixture(scope="module")
def issuer(server):
    return requests.get(server + "/.well-known/did.json", timeout=TIMEOUT).json()["id"]


def test_one_keepalive_holds_every_permit_and_a_close_frees_them_all(server, issuer):
    tenant = unique("sessions")

    def call(body):
        response = requests.post(server + "/api/v1/lease", json={"tenantId": tenant, **body},
                                 headers=KEY, timeout=TIMEOUT)
        assert response.status_code == 200, response.text
        answer = response.json()
        assert verify(answer, issuer) == [], answer
        return answer["data"]

    opened = call({"op": "open", "holder": "agent-1", "ttlSeconds": 60})
    assert opened["granted"] is True
    session = opened["session"]
    assert len(session["id"]) == 26 and session["holder"] == "agent-1" and session["leases"] == []
    for resource in ("invoice:1", "invoice:2"):
        held = call({"op": "acquire", "resource": resource, "holder": "agent-1", "session": session["id"]})
        assert held["granted"] is True and held["fencingToken"] == 1
        assert held["expiresAt"] == session["expiresAt"]
        assert held["holders"][0]["session"] == session["id"]
    kept = call({"op": "keepalive", "session": session["id"], "holder": "agent-1", "ttlSeconds": 120})
    assert kept["granted"] is True and kept["session"]["expiresAt"] > session["expiresAt"]
    assert [l["resource"] for l in kept["session"]["leases"]] == ["invoice:1", "invoice:2"]
    moved = call({"op": "get", "resource": "invoice:1"})
    assert moved["expiresAt"] == kept["session"]["expiresAt"], "the permit's end moved with the keepalive"

    other = call({"op": "close", "session": session["id"], "holder": "agent-2"})
    assert other["status"] == "fail" and [w["ruleId"] for w in other["witnesses"]] == ["NOT_HOLDER"]
    closed = call({"op": "close", "session": session["id"], "holder": "agent-1"})
    assert closed["granted"] is True and closed["session"] is None
    for resource in ("invoice:1", "invoice:2"):
        assert call({"op": "get", "resource": resource})["granted"] is False
        next_holder = call({"op": "acquire", "resource": resource, "holder": "agent-2", "ttlSeconds": 30})
        assert next_holder["granted"] is True and next_holder["fencingToken"] == 2
    late = call({"op": "acquire", "resource": "invoice:3", "holder": "agent-1", "session": session["id"]})
    assert late["granted"] is False and [w["ruleId"] for w in late["witnesses"]] == ["SESSION_EXPIRED"]
    assert call({"op": "get", "session": session["id"]})["session"] is None


def test_bad_session_input_is_a_400_naming_the_field(server):
    tenant = unique("sessions-bad")
    for body, field in [
        ({"op": "acquire", "resource": "r", "holder": "h", "session": "a" * 26, "ttlSeconds": 5}, "/ttlSeconds"),
        ({"op": "keepalive", "holder": "h"}, "/session"),
        ({"op": "get", "resource": "r", "session": "a" * 26}, "/session"),
        ({"op": "open", "holder": "h", "resource": "r"}, "/resource"),
        ({"op": "acquire", "resource": "r", "holder": "h", "session": "NOT-A-SESSION"}, "/session"),
    ]:
        response = requests.post(server + "/api/v1/lease", json={"tenantId": tenant, **body},
                                 headers=KEY, timeout=TIMEOUT)
        assert response.status_code == 400, (body, response.text)
        paths = [w["path"] for w in response.json().get("witnesses", [])]
        assert field in paths, (body, paths)
