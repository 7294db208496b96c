"""Every route of the contract, at least once, with the official clients, against whatever is under
test (own `leasekit serve`, or LEASEKIT_URL such as `sam local start-api`). Every signed answer is
checked with the independent verifier against the DID document the deployment publishes."""

import asyncio
import base64
import json
import pathlib

import pytest
import requests
from eth_account import Account
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from x402 import x402ClientSync
from x402.extensions.sign_in_with_x import create_siwx_payload, encode_siwx_header
from x402.http.clients import x402_requests
from x402.mechanisms.evm.exact.register import register_exact_evm_client

from conftest import API_KEY, unique
from verifier import public_key_of, verify

# The contract's route table: (method, path).
ROUTES = [
    ("post", "/api/v1/lease"),
    ("post", "/claim"),
    ("post", "/claim/free"),
    ("post", "/api/v1/verify-provenance"),
    ("post", "/mcp"),
    ("get", "/openapi.json"),
    ("get", "/api/v1/catalog"),
    ("get", "/docs/index.json"),
    ("get", "/docs/lease/"),
    ("get", "/docs/lease.json"),
    ("get", "/api/v1/samples/lease"),
    ("get", "/.well-known/did.json"),
    ("get", "/"),
    ("get", "/healthz"),
]
# The console's files in this tree: what the server under test must serve as they are.
CONSOLE_DIR = pathlib.Path(__file__).resolve().parents[2] / "shared" / "console"
# Generous: a cold Lambda container under `sam local` takes seconds to answer its first call.
TIMEOUT = 60
KEY = {"X-API-KEY": API_KEY}


@pytest.fixture(scope="module")
def did(server):
    """The issuer the deployment publishes: a did:key whose document names its own key."""
    response = requests.get(server + "/.well-known/did.json", timeout=TIMEOUT)
    assert response.status_code == 200
    document = response.json()
    issuer = document["id"]
    method = document["verificationMethod"][0]
    assert method["controller"] == issuer and method["id"] in document["assertionMethod"]
    assert public_key_of(method["id"]) == public_key_of(issuer)
    assert issuer == "did:key:" + method["publicKeyMultibase"]
    return issuer


def signed(response, did, status=200):
    """The answer of a response, which must be genuine and verify independently."""
    assert response.status_code == status, response.text
    answer = response.json()
    assert verify(answer, did) == [], answer
    return answer


def paying_session():
    account = Account.create()
    client = x402ClientSync()
    register_exact_evm_client(client, account)
    return account, x402_requests(client)


def settlement(response, account):
    settled = json.loads(base64.b64decode(response.headers["PAYMENT-RESPONSE"]))
    assert settled["success"] is True and settled["payer"] == account.address.lower()
    assert settled["transaction"].startswith("local-settlement:")
    return settled


def test_the_openapi_document_lists_every_route(server):
    response = requests.get(server + "/openapi.json", timeout=TIMEOUT)
    assert response.status_code == 200
    document = response.json()
    assert document["openapi"].startswith("3.1") and document["servers"][0]["url"] == server
    missing = [(m, p) for m, p in ROUTES if m not in document["paths"].get(p, {})]
    assert missing == []


def test_the_root_links_every_route_and_healthz_answers(server):
    """GET / (a page; JSON on request) and GET /healthz, here and through the deployed shape."""
    page = requests.get(server + "/", timeout=TIMEOUT)
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html"), page.text
    index = requests.get(server + "/", headers={"Accept": "application/json"}, timeout=TIMEOUT).json()
    urls = [route["url"] for route in index["routes"]]
    # Every route but the claims (their own section of the docs) and the docs' JSON twins.
    for _, path in ROUTES:
        if path not in ("/claim", "/claim/free", "/docs/index.json", "/docs/lease.json", "/"):
            assert any(url.endswith(path) for url in urls), (path, urls)
    health = requests.get(server + "/healthz", timeout=TIMEOUT)
    assert health.status_code == 200 and health.json() == {"status": "ok"}
    assert health.headers["cache-control"] == "no-store"


def test_lease_with_a_key(server, did):
    url = server + "/api/v1/lease"
    base = {"resource": unique("every"), "tenantId": unique("every")}

    def lease(body):
        return signed(requests.post(url, json={**base, **body}, headers=KEY, timeout=TIMEOUT), did)["data"]

    acquired = lease({"op": "acquire", "holder": "w1", "ttlSeconds": 60})
    assert acquired["granted"] is True and acquired["holder"] == "w1"
    token = acquired["fencingToken"]
    renewed = lease({"op": "renew", "holder": "w1", "token": token, "ttlSeconds": 120})
    assert renewed["granted"] is True and renewed["fencingToken"] == token
    got = lease({"op": "get"})
    assert (got["granted"], got["holder"], got["fencingToken"]) == (True, "w1", token)
    released = lease({"op": "release", "holder": "w1", "token": token})
    assert released["granted"] is True and released["holder"] is None
    assert lease({"op": "get"})["granted"] is False


def test_semaphore_set_and_check_with_a_key(server, did):
    """The coordination ops on whatever is under test (`sam local` too): signed, verified."""
    url = server + "/api/v1/lease"
    tenant = unique("every-coord")

    def lease(body):
        return signed(requests.post(url, json={"tenantId": tenant, **body}, headers=KEY, timeout=TIMEOUT), did)["data"]

    pool = unique("pool")
    first = lease({"op": "acquire", "resource": pool, "holder": "w1", "limit": 2})
    second = lease({"op": "acquire", "resource": pool, "holder": "w2", "limit": 2})
    third = lease({"op": "acquire", "resource": pool, "holder": "w3", "limit": 2})
    assert (first["fencingToken"], second["fencingToken"], second["limit"]) == (1, 2, 2)
    assert third["granted"] is False and third["witnesses"][0]["ruleId"] == "LEASE_HELD"
    assert [h["holder"] for h in third["holders"]] == ["w1", "w2"]
    assert lease({"op": "acquire", "resource": pool, "holder": "w3", "limit": 3})["witnesses"][0]["ruleId"] == "LIMIT_MISMATCH"
    assert lease({"op": "check", "resource": pool, "token": 2, "holder": "w2"})["current"] is True
    assert lease({"op": "check", "resource": pool, "token": 2, "holder": "w1"})["current"] is False
    a, b = unique("set-a"), unique("set-b")
    taken = lease({"op": "acquire", "resources": [a, b], "holder": "w1"})
    assert taken["granted"] is True and [m["fencingToken"] for m in taken["leases"]] == [1, 1]
    blocked = lease({"op": "acquire", "resources": [unique("set-c"), b], "holder": "w2"})
    assert blocked["granted"] is False and blocked["witnesses"][0]["path"] == "/resources/1"
    leases = [{"resource": a, "token": 1}, {"resource": b, "token": 1}]
    assert lease({"op": "release", "leases": leases, "holder": "w1"})["granted"] is True
    assert lease({"op": "get", "resource": a})["granted"] is False


def test_a_waiting_acquire(server, did):
    """Fair waiting on whatever is under test (through `sam local`, the Lambda function waits
    inside the request and reads again every 125-250 ms): a lapse is handed to the waiter, and a
    wait that ends answers the place."""
    import time
    from datetime import datetime

    url = server + "/api/v1/lease"
    tenant, resource = unique("every-wait"), unique("wait")

    def lease(body):
        response = requests.post(url, json={"tenantId": tenant, "resource": resource, **body}, headers=KEY,
                                 timeout=TIMEOUT)
        return signed(response, did)["data"]

    held = lease({"op": "acquire", "holder": "gone", "ttlSeconds": 2})
    expires = datetime.fromisoformat(held["expiresAt"].replace("Z", "+00:00")).timestamp()
    got = lease({"op": "acquire", "holder": "next", "waitSeconds": 10})
    late_ms = (time.time() - expires) * 1000
    print(f"lapse to grant: {late_ms:.0f} ms")
    assert got["granted"] is True and got["fencingToken"] == held["fencingToken"] + 1, got
    assert late_ms < 3000, late_ms
    began = time.monotonic()
    ended = lease({"op": "acquire", "holder": "late", "waitSeconds": 1})
    assert (ended["granted"], ended["queuePosition"]) == (False, 1), ended
    assert ended["witnesses"][0]["ruleId"] == "LEASE_HELD"
    assert time.monotonic() - began >= 1.0


def test_lease_paid_with_the_x402_sdk(server, did):
    account, session = paying_session()
    body = {"op": "acquire", "resource": unique("every-paid"), "holder": "agent-1"}
    response = session.post(server + "/api/v1/lease", json=body, timeout=TIMEOUT)
    answer = signed(response, did)
    assert answer["data"]["granted"] is True
    settlement(response, account)


def test_claim_paid_with_the_x402_sdk(server):
    account, session = paying_session()
    body = {"key": unique("every-claim"), "plan": "hour", "holder": "h"}
    response = session.post(server + "/claim", json=body, timeout=TIMEOUT)
    assert response.status_code == 201, response.text
    answer = response.json()
    assert (answer["outcome"], answer["plan"], answer["claim"]["key"]) == ("acquired", "hour", body["key"])
    assert answer["payment"]["payer"] == account.address.lower()
    assert settlement(response, account)["transaction"] == answer["payment"]["transaction"]


def test_claim_free_with_a_key(server):
    body = {"key": unique("every-free"), "holder": "h"}
    response = requests.post(server + "/claim/free", json=body, headers=KEY, timeout=TIMEOUT)
    assert response.status_code == 201, response.text
    answer = response.json()
    assert (answer["outcome"], answer["plan"]) == ("acquired", "free") and "payment" not in answer


def test_claim_free_with_a_sign_in_with_x_wallet(server):
    url = server + "/claim/free"
    body = {"key": "every-free-wallet", "holder": "h"}  # a fresh wallet is a fresh namespace
    offer = requests.post(url, json=body, timeout=TIMEOUT)
    assert offer.status_code == 402, offer.text
    extension = json.loads(base64.b64decode(offer.headers["PAYMENT-REQUIRED"]))["extensions"]["sign-in-with-x"]
    chain = extension["supportedChains"][0]
    info = {**extension["info"], "chainId": chain["chainId"], "type": chain["type"]}
    # The deployment's public URL is what the proof names.
    assert info["uri"] == url
    header = encode_siwx_header(asyncio.run(create_siwx_payload(info, Account.create(), url)))
    response = requests.post(url, json=body, headers={"SIGN-IN-WITH-X": header}, timeout=TIMEOUT)
    assert response.status_code == 201, response.text
    assert response.json()["outcome"] == "acquired"


def test_verify_provenance(server, did):
    body = {"op": "get", "resource": unique("every-verify"), "tenantId": unique("every")}
    answer = signed(requests.post(server + "/api/v1/lease", json=body, headers=KEY, timeout=TIMEOUT), did)
    tampered = {**answer, "data": {**answer["data"], "holder": "someone-else"}}
    for document, genuine in [(answer, True), (tampered, False)]:
        response = requests.post(server + "/api/v1/verify-provenance", json=document, timeout=TIMEOUT)
        assert response.status_code == 200, response.text
        assert response.json()["verified"] is genuine
        assert (verify(document, did) == []) is genuine


def test_mcp_with_the_official_client(server, did):
    async def session():
        transport = streamable_http_client(server + "/mcp", http_client=create_mcp_http_client(headers=KEY))
        async with Client(transport, mode="auto") as c:
            names = sorted(t.name for t in (await c.list_tools()).tools)
            base = {"resource": unique("every-mcp"), "tenantId": unique("every")}
            acquired = await c.call_tool("lease", {"op": "acquire", "holder": "agent", **base})
            got = await c.call_tool("lease", {"op": "get", **base})
            return names, acquired, got

    names, acquired, got = asyncio.run(session())
    assert names == ["claim_free", "lease", "lease_audit", "lease_list", "lease_read", "lease_revoke"]
    for result in (acquired, got):
        assert not result.is_error, result
        assert verify(result.structured_content, did) == []
    assert got.structured_content["data"]["holder"] == "agent"


def test_the_console_page_and_its_assets(server):
    """GET /console/ and its files (the stylesheet and every ES module), under the strict CSP
    (through sam local too: the public function serves them); any other name under /console/ is
    refused; /console without its slash is sent to the folder."""
    page = requests.get(server + "/console/", timeout=TIMEOUT)
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    csp = page.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp, csp
    assert '<script type="module" src="console.js"></script>' in page.text
    modules = sorted(path.name for path in CONSOLE_DIR.glob("*.js"))
    assert "console.js" in modules and len(modules) > 1, modules
    for name, kind in [("console.css", "text/css")] + [(m, "text/javascript") for m in modules]:
        asset = requests.get(f"{server}/console/{name}", timeout=TIMEOUT)
        assert asset.status_code == 200 and asset.headers["content-type"].startswith(kind), name
        assert asset.headers["content-security-policy"] == csp, name
        assert asset.text == (CONSOLE_DIR / name).read_text(encoding="utf-8"), name
    for name in ["nope.js", "index.html", "test"]:
        assert requests.get(f"{server}/console/{name}", timeout=TIMEOUT).status_code == 404, name
    bare = requests.get(server + "/console", timeout=TIMEOUT, allow_redirects=False)
    assert bare.status_code == 308 and bare.headers["location"] == "console/"
    # The list it shows: a live lease of this tenant, by an API key.
    tenant, resource = unique("console"), unique("console:r")
    body = {"op": "acquire", "resource": resource, "holder": "w", "tenantId": tenant}
    assert requests.post(server + "/api/v1/lease", json=body, headers=KEY, timeout=TIMEOUT).json()["data"]["granted"]
    page = requests.post(server + "/api/v1/lease", json={"op": "list", "tenantId": tenant}, headers=KEY, timeout=TIMEOUT)
    assert [l["resource"] for l in page.json()["data"]["leases"]] == [resource]


def test_catalog_docs_and_sample(server, did):
    for path in ["/api/v1/catalog", "/docs/index.json"]:
        response = requests.get(server + path, timeout=TIMEOUT)
        assert response.status_code == 200
        assert [c["id"] for c in response.json()["capabilities"]] == ["lease", "claim", "claim-free"]
    page = requests.get(server + "/docs/lease/", timeout=TIMEOUT)
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "Fencing tokens" in page.text
    page = requests.get(server + "/docs/lease.json", timeout=TIMEOUT)
    assert page.status_code == 200 and page.json()["sections"]
    sample = requests.get(server + "/api/v1/samples/lease", timeout=TIMEOUT)
    assert sample.status_code == 200
    answer = sample.json()["response"]["body"]
    # Intact, but reported as a sample, not as an answer of this deployment.
    assert sorted(verify(answer, did)) == ["issuer", "sample"]
    report = requests.post(server + "/api/v1/verify-provenance", json=answer, timeout=TIMEOUT).json()
    assert (report["verified"], report["sample"]) == (False, True)
