"""Interop: the official x402 Python SDK (client side, PyPI `x402`) pays a real `leasekit serve`
with a fresh wallet, gets a lease, and reads the settlement; the same PAYMENT-SIGNATURE sent again
is refused, unless it names itself with the payment-identifier extension: then it gets the answer
it bought, and is charged once."""

import base64
import json
import subprocess
import tempfile

import requests
from eth_account import Account
from x402 import x402ClientSync
from x402.schemas import PaymentPayload
from x402.extensions.payment_identifier import (
    PAYMENT_IDENTIFIER,
    append_payment_identifier_to_extensions,
    extract_payment_identifier,
    generate_payment_id,
)
from x402.http.clients import x402_requests
from x402.mechanisms.evm.exact.register import register_exact_evm_client

from conftest import BIN, needs_own_server, start_serve, stop_serve


def paying_session():
    account = Account.create()
    client = x402ClientSync()
    register_exact_evm_client(client, account)
    return account, x402_requests(client)


def test_the_official_client_pays_for_a_lease(server):
    account, session = paying_session()
    body = {"op": "acquire", "resource": "deploy:prod", "holder": "agent-1", "ttlSeconds": 60}
    response = session.post(server + "/api/v1/lease", json=body, timeout=10)
    assert response.status_code == 200, response.text
    data = response.json()["data"]
    assert data["granted"] is True and data["fencingToken"] == 1
    settlement = json.loads(base64.b64decode(response.headers["PAYMENT-RESPONSE"]))
    assert settlement["success"] is True
    assert settlement["payer"] == account.address.lower()
    assert settlement["transaction"].startswith("local-settlement:")

    # The same payment authorization, sent again by hand: refused, nothing applied.
    signature = response.request.headers["PAYMENT-SIGNATURE"]
    again = requests.post(server + "/api/v1/lease", json=body, headers={"PAYMENT-SIGNATURE": signature}, timeout=10)
    assert again.status_code == 402
    assert "used before" in again.json()["error"]

    # The wallet is the tenant: it sees its own lease.
    got = session.post(server + "/api/v1/lease", json={"op": "get", "resource": "deploy:prod"}, timeout=10)
    assert got.json()["data"]["holder"] == "agent-1"


def test_another_wallet_is_another_tenant(server):
    _, session = paying_session()
    got = session.post(server + "/api/v1/lease", json={"op": "get", "resource": "deploy:prod"}, timeout=10)
    assert got.status_code == 200
    assert got.json()["data"]["granted"] is False


class NamedPayment:
    """A client extension that names each payment with the official SDK's payment-identifier
    helper, as an application that keeps one id across its own retries would."""

    key = PAYMENT_IDENTIFIER
    hooks = None
    transport_hooks = None

    def __init__(self, payment_id):
        self.payment_id = payment_id

    def enrich_payment_payload(self, payload, required):
        extensions = dict(payload.extensions or required.extensions or {})
        append_payment_identifier_to_extensions(extensions, self.payment_id)
        return payload.model_copy(update={"extensions": extensions})


def test_a_resent_payment_with_an_identifier_gets_its_answer_and_is_charged_once():
    needs_own_server("reads the payment ledger of its data dir")
    data_dir = tempfile.mkdtemp()
    process, server = start_serve(data_dir=data_dir)
    try:
        account = Account.create()
        client = x402ClientSync()
        register_exact_evm_client(client, account)
        payment_id = generate_payment_id()
        client.register_extension(NamedPayment(payment_id))
        session = x402_requests(client)
        body = {"op": "acquire", "resource": "deploy:prod", "holder": "agent-1", "ttlSeconds": 60}
        first = session.post(server + "/api/v1/lease", json=body, timeout=10)
        assert first.status_code == 200, first.text
        # The server declared the extension, and the SDK's payload carries the id.
        sent = json.loads(base64.b64decode(first.request.headers["PAYMENT-SIGNATURE"]))
        assert extract_payment_identifier(PaymentPayload.model_validate(sent)) == payment_id

        # The answer was lost; the same payment is sent again.
        again = requests.post(server + "/api/v1/lease", json=body, headers={"PAYMENT-SIGNATURE": first.request.headers["PAYMENT-SIGNATURE"]}, timeout=10)
        assert again.status_code == 200, again.text
        assert again.json()["data"]["replayed"] is True
        assert again.json()["data"]["fencingToken"] == first.json()["data"]["fencingToken"]
        assert again.headers["PAYMENT-RESPONSE"] and json.loads(base64.b64decode(again.headers["PAYMENT-RESPONSE"]))["transaction"] == json.loads(base64.b64decode(first.headers["PAYMENT-RESPONSE"]))["transaction"]

        # The same id with another payment (the SDK signs a new one): refused, nothing applied.
        other = session.post(server + "/api/v1/lease", json={**body, "holder": "agent-2"}, timeout=10)
        assert other.status_code == 409 and other.json()["code"] == "PAYMENT_IDENTIFIER_CONFLICT", other.text
    finally:
        stop_serve(process)
    ledger = subprocess.run([BIN, "payments", "--data-dir", data_dir], capture_output=True, text=True, check=True)
    rows = [json.loads(line) for line in ledger.stdout.splitlines()]
    assert [row["status"] for row in rows] == ["settled"], rows
