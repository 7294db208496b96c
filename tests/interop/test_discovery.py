"""Discovery: /openapi.json passes openapi-spec-validator; the sample and real answers of every
route validate against the document's own schemas; the sample is signed and reported as a sample."""

import base64
import json
import urllib.error
import urllib.request

import jsonschema
import pytest
from openapi_spec_validator import validate

from conftest import API_KEY, unique
from verifier import verify as independent_verify


def get(url):
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.status, response.headers, response.read()


def post(url, body, headers=None):
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST")
    request.add_header("content-type", "application/json")
    for name, value in (headers or {}).items():
        request.add_header(name, value)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def schemas(server):
    _, _, body = get(server + "/openapi.json")
    return json.loads(body)["components"]["schemas"]


def check(instance, schema):
    jsonschema.Draft202012Validator(schema).validate(instance)


def test_the_openapi_document_is_valid_3_1(server):
    _, _, body = get(server + "/openapi.json")
    document = json.loads(body)
    assert document["openapi"].startswith("3.1")
    validate(document)
    assert document["servers"][0]["url"] == server
    lease = document["paths"]["/api/v1/lease"]["post"]
    assert lease["x-x402-amount"] == "5000" and lease["x-x402-price-usdc"] == "0.005"
    plans = document["paths"]["/claim"]["post"]["x-payment-info"]["price"]["plans"]
    assert {p: plans[p]["amount"] for p in plans} == {"hour": "5200", "day": "30000", "week": "150000"}


def test_the_sample_validates_and_is_reported_as_a_sample(server):
    _, _, body = get(server + "/api/v1/samples/lease")
    sample = json.loads(body)
    s = schemas(server)
    check(sample["request"]["body"], s["LeaseRequest"])
    check(sample["response"]["body"], s["LeaseAnswer"])
    did = json.loads(get(server + "/.well-known/did.json")[2])["id"]
    assert sorted(independent_verify(sample["response"]["body"], did)) == ["issuer", "sample"]
    status, report = post(server + "/api/v1/verify-provenance", sample["response"]["body"])
    assert status == 200 and (report["verified"], report["sample"]) == (False, True)
    check(report, s["VerifyReport"])


def test_real_answers_match_the_documented_schemas(server):
    s = schemas(server)
    key = {"x-api-key": API_KEY}
    tenant = unique("t")
    status, answer = post(server + "/api/v1/lease", {"op": "acquire", "resource": "docs", "holder": "w", "tenantId": tenant}, key)
    assert status == 200
    check(answer, s["LeaseAnswer"])
    # One resource's fields are required of one resource's answer, and absent from a page's.
    lacking = {**answer, "data": {k: v for k, v in answer["data"].items() if k != "granted"}}
    with pytest.raises(jsonschema.ValidationError):
        check(lacking, s["LeaseAnswer"])
    status, page = post(server + "/api/v1/lease", {"op": "list", "tenantId": tenant}, key)
    assert status == 200 and "granted" not in page["data"]
    check(page, s["LeaseAnswer"])
    status, unsigned = post(server + "/api/v1/lease?signed=false", {"op": "get", "resource": "docs", "tenantId": "t"}, key)
    assert status == 200 and list(unsigned) == ["data"]
    check(unsigned, s["LeaseAnswer"])
    status, answer = post(server + "/api/v1/lease", {"op": "acquire", "resource": "docs"}, key)
    assert status == 400
    check(answer, s["Error"])
    status, answer = post(server + "/api/v1/lease", {"op": "get", "resource": "docs"})
    assert status == 402
    check(answer, s["PaymentRequired"])
    status, answer = post(server + "/claim/free", {"key": unique("k"), "holder": "h"}, key)
    assert status == 201
    check(answer, s["ClaimAnswer"])
    status, answer = post(server + "/claim", {"key": "k", "plan": "hour", "holder": "h"})
    assert status == 402
    check(answer, s["PaymentRequired"])
    status, answer = post(server + "/api/v1/verify-provenance", {"data": {}, "_provenance": {"manifest": {}, "credential": {}}})
    assert status == 200
    check(answer, s["VerifyReport"])


def test_catalog_and_docs_pages(server):
    for path in ["/api/v1/catalog", "/docs/index.json"]:
        catalog = json.loads(get(server + path)[2])
        ids = [c["id"] for c in catalog["capabilities"]]
        assert ids == ["lease", "claim", "claim-free"]
        lease = catalog["capabilities"][0]
        assert lease["price"]["amount"] == "0.005" and lease["links"]["openapi"] == server + "/openapi.json"
    status, headers, html = get(server + "/docs/lease/")
    assert status == 200 and headers["content-type"].startswith("text/html")
    assert b"Fencing tokens" in html and b"requestId" in html
    page = json.loads(get(server + "/docs/lease.json")[2])
    assert [s["title"] for s in page["sections"]][:2] == ["What a lease is", "Fencing tokens"]


def test_discovery_names_the_python_client_payment_identifier_and_paid_mcp(server):
    """What a new agent reads first says how to reach the service where it lives: the Python
    package, the x402 payment-identifier extension, and paying per MCP tool call."""
    document = json.loads(get(server + "/openapi.json")[2])
    assert [(c["language"], c["package"]) for c in document["info"]["x-clients"]] == [("python", "leasekit"), ("typescript", "leasekit")]
    lease = document["paths"]["/api/v1/lease"]["post"]
    assert lease["x-x402-extensions"] == ["payment-identifier"]
    assert "PAYMENT_IDENTIFIER_CONFLICT" in lease["responses"]["409"]["description"]
    mcp = document["paths"]["/mcp"]["post"]
    assert {} in mcp["security"], "no credential needed: the payment rides in _meta"
    assert "x402/payment" in mcp["description"] and "payment-identifier" in mcp["description"]

    catalog = json.loads(get(server + "/api/v1/catalog")[2])
    capability = catalog["capabilities"][0]
    assert capability["x402Extensions"] == ["payment-identifier"]
    assert capability["mcp"]["url"] == server + "/mcp" and "x402" in capability["mcp"]["channels"]
    assert "x402/payment" in capability["mcp"]["payment"]
    assert capability["clients"][0]["install"].startswith("pip install")
    assert capability["clients"][1]["install"].startswith("npm install ./clients/typescript")
    assert catalog["capabilities"][1]["x402Extensions"] == ["payment-identifier"]
    assert document["paths"]["/claim"]["post"]["x-x402-extensions"] == ["payment-identifier"]

    page = json.loads(get(server + "/docs/lease.json")[2])
    text = " ".join(p for s in page["sections"] for p in s["paragraphs"])
    assert {"From Python", "From TypeScript"} <= {s["title"] for s in page["sections"]}
    assert "payment-identifier" in text and "x402/payment" in text
    _, _, html = get(server + "/docs/lease/")
    assert b"From Python" in html and b"payment-identifier" in html
