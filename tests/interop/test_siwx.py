"""Interop: free claims with a wallet proven by x402 sign-in-with-x, the message built and signed
by the official x402 Python SDK (EIP-4361 via `siwe`, EIP-191 via `eth_account`) from the
challenge leasekit advertises; replayed and stale proofs are refused."""

import asyncio
import base64
import json

import requests
from eth_account import Account
from x402.extensions.sign_in_with_x import create_siwx_payload, encode_siwx_header

BODY = {"key": "cron:nightly-report", "holder": "host-1"}


def challenge(url):
    """The sign-in-with-x challenge of a 402, with its first supported chain selected."""
    response = requests.post(url, json=BODY, timeout=10)
    assert response.status_code == 402
    assert response.json()["code"] == "IDENTITY_REQUIRED"
    required = json.loads(base64.b64decode(response.headers["PAYMENT-REQUIRED"]))
    assert required["accepts"] == [], "a free route asks no payment"
    extension = required["extensions"]["sign-in-with-x"]
    chain = extension["supportedChains"][0]
    return {**extension["info"], "chainId": chain["chainId"], "type": chain["type"]}


def proof(url, account, info):
    payload = asyncio.run(create_siwx_payload(info, account, url))
    return encode_siwx_header(payload)


def test_a_wallet_proven_with_sign_in_with_x_gets_a_free_hold(server):
    url = server + "/claim/free"
    account = Account.create()
    header = proof(url, account, challenge(url))
    response = requests.post(url, json=BODY, headers={"SIGN-IN-WITH-X": header}, timeout=10)
    assert response.status_code == 201, response.text
    answer = response.json()
    assert answer["outcome"] == "acquired" and answer["plan"] == "free"
    assert "payment" not in answer

    # The same signed proof again: its nonce was used.
    again = requests.post(url, json=BODY, headers={"SIGN-IN-WITH-X": header}, timeout=10)
    assert again.status_code == 402
    assert again.json()["code"] == "IDENTITY_INVALID"
    assert "used before" in again.json()["error"]

    # A fresh proof of the same wallet: the hold is its own (crash-resume).
    fresh = requests.post(url, json=BODY, headers={"SIGN-IN-WITH-X": proof(url, account, challenge(url))}, timeout=10)
    assert fresh.status_code == 200 and fresh.json()["mine"] is True

    # Another wallet: another namespace, so it acquires the same key.
    other = requests.post(url, json=BODY, headers={"SIGN-IN-WITH-X": proof(url, Account.create(), challenge(url))}, timeout=10)
    assert other.status_code == 201


def test_stale_or_foreign_proofs_are_refused(server):
    url = server + "/claim/free"
    info = challenge(url)
    stale = {**info, "issuedAt": "2020-01-01T00:00:00.000Z"}
    response = requests.post(url, json=BODY, headers={"SIGN-IN-WITH-X": proof(url, Account.create(), stale)}, timeout=10)
    assert response.status_code == 402
    assert "5 minutes" in response.json()["error"]
    # Signed for another site: the domain does not match.
    foreign_url = "https://example.com/claim/free"
    foreign = {**info, "domain": "example.com", "uri": foreign_url}
    response = requests.post(url, json=BODY, headers={"SIGN-IN-WITH-X": proof(foreign_url, Account.create(), foreign)}, timeout=10)
    assert response.status_code == 402
    assert "domain" in response.json()["error"]


def test_forged_host_headers_change_neither_the_challenge_nor_what_a_proof_must_name(server):
    url = server + "/claim/free"
    forged = {"Host": "evil.example", "X-Forwarded-Proto": "https"}
    response = requests.post(url, json=BODY, headers=forged, timeout=10)
    assert response.status_code == 402
    required = json.loads(base64.b64decode(response.headers["PAYMENT-REQUIRED"]))
    info = required["extensions"]["sign-in-with-x"]["info"]
    assert info["domain"] == server.removeprefix("http://") and info["uri"] == url
    assert required["resource"]["url"] == url
    # A proof made for the forged host, sent with the forged headers, is refused.
    chain = required["extensions"]["sign-in-with-x"]["supportedChains"][0]
    evil_url = "https://evil.example/claim/free"
    evil = {**info, "chainId": chain["chainId"], "type": chain["type"], "domain": "evil.example", "uri": evil_url}
    headers = {**forged, "SIGN-IN-WITH-X": proof(evil_url, Account.create(), evil)}
    response = requests.post(url, json=BODY, headers=headers, timeout=10)
    assert response.status_code == 402 and response.json()["code"] == "IDENTITY_INVALID"


def test_an_oversized_nonce_is_a_400_naming_it(server):
    url = server + "/claim/free"
    info = {**challenge(url), "nonce": "a" * 3000}
    response = requests.post(url, json=BODY, headers={"SIGN-IN-WITH-X": proof(url, Account.create(), info)}, timeout=10)
    assert response.status_code == 400, response.text
    assert response.json()["witnesses"][0]["path"] == "SIGN-IN-WITH-X.nonce"
