"""Finished work and claim-next over HTTP against whatever is under test (own `leasekit serve`, or
LEASEKIT_URL such as the Lambda functions under `sam local start-api`): a done release refuses
the next acquire with DONE naming who finished it, get shows the mark, the finisher reopens it
and the counter continues; an acquire of candidates takes the first free one, a requestId retry
gets the same one. Each answer checked with the independent verifier. On Lambda each call may
land in another container: the mark lives in the store, not in any process."""

import pytest
import requests

from conftest import API_KEY, unique
from verifier import verify

TIMEOUT = 60
KEY = {"X-API-KEY": API_KEY}


@pytest.fixture(scope="module")
def issuer(server):
    return requests.get(server + "/.well-known/did.json", timeout=TIMEOUT).json()["id"]


def caller(server, issuer, tenant):
    def call(body):
        response = requests.post(server + "/api/v1/lease", json={"tenantId": tenant, **body},
                                 headers=KEY, timeout=TIMEOUT)
        assert response.status_code == 200, response.text
        answer = response.json()
        assert verify(answer, issuer) == [], answer
        return answer["data"]
    return call


def test_done_then_acquire_is_refused_with_who_finished_it_until_reopened(server, issuer):
    call = caller(server, issuer, unique("work"))
    held = call({"op": "acquire", "resource": "task:1", "holder": "agent-1", "ttlSeconds": 60})
    assert held["granted"] is True and held["done"] is None
    finished = call({"op": "release", "resource": "task:1", "holder": "agent-1", "token": held["fencingToken"],
                     "done": True, "result": "PR #97", "keepDoneSeconds": 600})
    assert finished["granted"] is True and finished["done"]["holder"] == "agent-1"
    assert finished["done"]["result"] == "PR #97" and finished["done"]["fencingToken"] == held["fencingToken"]
    refused = call({"op": "acquire", "resource": "task:1", "holder": "agent-2", "waitSeconds": 2})
    assert refused["status"] == "fail" and [w["ruleId"] for w in refused["witnesses"]] == ["DONE"]
    assert refused["witnesses"][0]["actual"]["holder"] == "agent-1"
    assert refused["witnesses"][0]["actual"]["result"] == "PR #97"
    assert call({"op": "get", "resource": "task:1"})["done"]["until"].endswith("Z")
    reopened = call({"op": "reopen", "resource": "task:1", "holder": "agent-1", "token": held["fencingToken"],
                     "reason": "the PR was reverted"})
    assert reopened["granted"] is True and reopened["done"] is None
    again = call({"op": "acquire", "resource": "task:1", "holder": "agent-2"})
    assert again["granted"] is True and again["fencingToken"] == held["fencingToken"] + 1


def test_candidates_take_the_first_free_one_and_a_retry_gets_the_same(server, issuer):
    call = caller(server, issuer, unique("work"))
    assert call({"op": "acquire", "resource": "issue:41", "holder": "other", "ttlSeconds": 60})["granted"]
    claim = {"op": "acquire", "candidates": ["issue:41", "issue:42", "issue:43"], "holder": "agent-1",
             "ttlSeconds": 60, "requestId": unique("claim")}
    won = call(claim)
    assert won["granted"] is True and won["resource"] == "issue:42" and won["fencingToken"] == 1
    assert call({"op": "release", "resource": "issue:41", "holder": "other", "token": 1})["granted"]
    retry = call(claim)
    assert retry["replayed"] is True and retry["resource"] == "issue:42"
    rest = call({"op": "acquire", "candidates": ["issue:42", "issue:43"], "holder": "agent-2"})
    assert rest["resource"] == "issue:43"
    none = call({"op": "acquire", "candidates": ["issue:42", "issue:43"], "holder": "agent-3"})
    assert none["granted"] is False
    assert [(w["path"], w["ruleId"]) for w in none["witnesses"]] == [
        ("/candidates/0", "LEASE_HELD"), ("/candidates/1", "LEASE_HELD")]
