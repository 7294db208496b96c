"""An independent verifier of leasekit's `_provenance`, written from the W3C specifications
(vc-di-eddsa, cryptosuite eddsa-jcs-2022; did:key; RFC 8785), sharing no code with the service.

verify(answer, did) -> list of failures (empty when the answer verifies). It follows the contract
literally: the data hash is SHA-256(JCS(data)) of `data` exactly as sent, and a credential the
signed part marks as a sample (type LeasekitSampleAnswer) is reported as "sample", never as an
answer.
"""

import base64
import hashlib

import base58
import rfc8785
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

ED25519_MULTICODEC = b"\xed\x01"
SAMPLE_TYPE = "LeasekitSampleAnswer"


def public_key_of(did_url: str) -> bytes:
    """The raw Ed25519 key a did:key (or did:key#fragment) names."""
    did = did_url.split("#", 1)[0]
    if not did.startswith("did:key:z"):
        raise ValueError(f"not a base58btc did:key: {did_url}")
    raw = base58.b58decode(did[len("did:key:z"):])
    if raw[:2] != ED25519_MULTICODEC or len(raw) != 34:
        raise ValueError("not an Ed25519 did:key")
    return raw[2:]


def verify_proof(secured: dict) -> bytes:
    """Verify an eddsa-jcs-2022 Data Integrity proof; return the signer's raw public key."""
    proof = dict(secured["proof"])
    if proof.get("type") != "DataIntegrityProof" or proof.get("cryptosuite") != "eddsa-jcs-2022":
        raise ValueError("not an eddsa-jcs-2022 DataIntegrityProof")
    proof_value = proof.pop("proofValue")
    if not proof_value.startswith("z"):
        raise ValueError("proofValue is not base58btc multibase")
    signature = base58.b58decode(proof_value[1:])
    unsecured = {k: v for k, v in secured.items() if k != "proof"}
    if "@context" in proof:
        context = unsecured.get("@context", [])
        wanted = proof["@context"] if isinstance(proof["@context"], list) else [proof["@context"]]
        if context[: len(wanted)] != wanted:
            raise ValueError("proof @context does not match the document")
    hash_data = hashlib.sha256(rfc8785.dumps(proof)).digest() + hashlib.sha256(rfc8785.dumps(unsecured)).digest()
    key = public_key_of(proof["verificationMethod"])
    Ed25519PublicKey.from_public_bytes(key).verify(signature, hash_data)  # raises InvalidSignature
    return key


def verify(answer: dict, expected_did: str) -> list[str]:
    """Check a `{data, _provenance}` answer of leasekit. Returns what failed."""
    failures = []
    provenance = answer["_provenance"]
    credential = provenance["credential"]
    subject = credential["credentialSubject"]
    try:
        signer = verify_proof(credential)
        if signer != public_key_of(expected_did) or credential.get("issuer") != expected_did:
            failures.append("issuer")
        # The signed part says what it is: invented data is no answer, whoever signed it.
        if SAMPLE_TYPE in credential.get("type", []):
            failures.append("sample")
    except (InvalidSignature, ValueError, KeyError) as error:
        failures.append(f"proof: {error!r}")
    data_hash = hashlib.sha256(rfc8785.dumps(answer["data"])).digest()
    if subject.get("dataSha256") != data_hash.hex():
        failures.append("dataSha256")
    manifest = provenance["manifest"]
    if subject.get("manifestSha256") != hashlib.sha256(rfc8785.dumps(manifest)).hexdigest():
        failures.append("manifestSha256")
    hashes = [a["data"]["hash"] for a in manifest.get("assertions", []) if a.get("label") == "c2pa.hash.data"]
    if hashes != [base64.b64encode(data_hash).decode()]:
        failures.append("c2pa.hash.data")
    return failures
