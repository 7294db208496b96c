"""Interop: leasekit's signed answers checked by an independent Python verifier (verifier.py),
against a real `leasekit serve`, offline (only the public key from the DID document is used)."""

import copy
import json
import urllib.request

import pytest

from conftest import API_KEY as KEY, unique
from verifier import public_key_of, verify, verify_proof

# W3C vc-di-eddsa test vector (eddsa-jcs-2022, the Alumni credential): checks the verifier itself.
W3C_SIGNED = {
    "@context": ["https://www.w3.org/ns/credentials/v2", "https://www.w3.org/ns/credentials/examples/v2"],
    "id": "urn:uuid:58172aac-d8ba-11ed-83dd-0b3aef56cc33",
    "type": ["VerifiableCredential", "AlumniCredential"],
    "name": "Alumni Credential",
    "description": "A minimum viable example of an Alumni Credential.",
    "issuer": "https://vc.example/issuers/5678",
    "validFrom": "2023-01-01T00:00:00Z",
    "credentialSubject": {"id": "did:example:abcdefgh", "alumniOf": "The School of Examples"},
    "proof": {
        "type": "DataIntegrityProof",
        "cryptosuite": "eddsa-jcs-2022",
        "created": "2023-02-24T23:36:38Z",
        "verificationMethod": "did:key:z6MkrJVnaZkeFzdQyMZu1cgjg7k1pZZ6pvBQ7XJPt4swbTQ2#z6MkrJVnaZkeFzdQyMZu1cgjg7k1pZZ6pvBQ7XJPt4swbTQ2",
        "proofPurpose": "assertionMethod",
        "@context": ["https://www.w3.org/ns/credentials/v2", "https://www.w3.org/ns/credentials/examples/v2"],
        "proofValue": "z2HnFSSPPBzR36zdDgK8PbEHeXbR56YF24jwMpt3R1eHXQzJDMWS93FCzpvJpwTWd3GAVFuUfjoJdcnTMuVor51aX",
    },
}


def test_the_verifier_accepts_the_w3c_vector_and_rejects_a_change():
    assert verify_proof(W3C_SIGNED) == public_key_of("did:key:z6MkrJVnaZkeFzdQyMZu1cgjg7k1pZZ6pvBQ7XJPt4swbTQ2")
    changed = copy.deepcopy(W3C_SIGNED)
    changed["credentialSubject"]["alumniOf"] = "The School of Examplez"
    with pytest.raises(Exception):
        verify_proof(changed)


def call(url, path, body=None, key=None):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url + path, data=data, method="POST" if body is not None else "GET")
    request.add_header("content-type", "application/json")
    if key:
        request.add_header("x-api-key", key)
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


# A tenant of this run only: its leases and requestIds are new even on a reused store.
TENANT = unique("t1")


def lease(url, body):
    return call(url, "/api/v1/lease", {"tenantId": TENANT, **body}, key=KEY)


def test_untouched_answers_verify_and_changed_ones_do_not(server):
    did = call(server, "/.well-known/did.json")["id"]
    answers = [
        lease(server, {"op": "acquire", "resource": "deploy:prod", "holder": "worker-7", "ttlSeconds": 60}),
        lease(server, {"op": "acquire", "resource": "deploy:prod", "holder": "worker-8"}),
        lease(server, {"op": "get", "resource": "deploy:prod"}),
        lease(server, {"op": "renew", "resource": "deploy:prod", "holder": "worker-7", "token": 1, "requestId": "r-1"}),
        lease(server, {"op": "renew", "resource": "deploy:prod", "holder": "worker-7", "token": 1, "requestId": "r-1"}),
    ]
    assert answers[-1]["data"]["replayed"] is True
    for answer in answers:
        assert verify(answer, did) == [], answer
        changes = [("holder", "worker-9"), ("fencingToken", 2), ("granted", not answer["data"]["granted"])]
        for field, value in changes + [("replayed", not answer["data"]["replayed"])]:
            changed = copy.deepcopy(answer)
            changed["data"][field] = value
            failures = verify(changed, did)
            assert "dataSha256" in failures and "c2pa.hash.data" in failures, (field, failures)
        changed = copy.deepcopy(answer)
        changed["_provenance"]["credential"]["credentialSubject"]["op"] = "x"
        assert any(f.startswith("proof") for f in verify(changed, did))


def test_the_service_and_the_independent_verifier_agree(server):
    did = call(server, "/.well-known/did.json")["id"]
    answer = lease(server, {"op": "acquire", "resource": "agree", "holder": "w"})
    changed = copy.deepcopy(answer)
    changed["data"]["holder"] = "x"
    for document, expected in [(answer, True), (changed, False)]:
        report = call(server, "/api/v1/verify-provenance", document)
        assert report["verified"] is expected
        assert (verify(document, did) == []) is expected


def test_a_replay_carries_a_proof_over_its_own_data(server):
    did = call(server, "/.well-known/did.json")["id"]
    body = {"op": "acquire", "resource": "replayed", "holder": "w", "requestId": "rp-1"}
    first, replay, again = (lease(server, body) for _ in range(3))
    assert (first["data"]["replayed"], replay["data"]["replayed"]) == (False, True)
    for answer in (first, replay):
        assert verify(answer, did) == [], answer
        assert call(server, "/api/v1/verify-provenance", answer)["verified"] is True
    proof = lambda a: a["_provenance"]["credential"]["proof"]["proofValue"]
    assert proof(first) != proof(replay), "the replay signs its own data"
    assert replay == again, "replays of one record are identical, proof included"


def test_a_sample_is_reported_as_a_sample(server):
    did = call(server, "/.well-known/did.json")["id"]
    sample = call(server, "/api/v1/samples/lease")
    answer = sample["response"]["body"]
    credential = answer["_provenance"]["credential"]
    assert credential["issuer"] == sample["sampleKey"] != did
    # Intact (proof and hashes hold), but not an answer: of this service's key, or of any.
    assert sorted(verify(answer, did)) == ["issuer", "sample"]
    assert verify(answer, sample["sampleKey"]) == ["sample"]
    report = call(server, "/api/v1/verify-provenance", answer)
    assert (report["verified"], report["sample"]) == (False, True)
    assert report["checks"] == {"proof": True, "issuer": False, "dataHash": True, "manifest": True}
    # Stripping the marking breaks the signature.
    unmarked = copy.deepcopy(answer)
    unmarked["_provenance"]["credential"]["type"] = ["VerifiableCredential", "LeaseAnswerCredential"]
    assert any(f.startswith("proof") for f in verify(unmarked, sample["sampleKey"]))
