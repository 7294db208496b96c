"""Interop: leasekit's signed answers checked by an independent Python verifier (verifier.py),
against a real `leasekit serve`, offline (only the public key from the DID document is used)."""

import copy
import json
import urllib.request

import pytest

from conftest import API_KEY as KEY
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


def lease(url, body):
    return call(url, "/api/v1/lease", {"tenantId": "t1", **body}, key=KEY)


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
        for field, value in [("holder", "worker-9"), ("fencingToken", 2), ("granted", not answer["data"]["granted"])]:
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
