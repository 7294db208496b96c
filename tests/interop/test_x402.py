"""Interop: the official x402 Python SDK (client side, PyPI `x402`) pays a real `leasekit serve`
with a fresh wallet, gets a lease, and reads the settlement; the same PAYMENT-SIGNATURE sent again
is refused."""

import base64
import json

import requests
from eth_account import Account
from x402 import x402ClientSync
from x402.http.clients import x402_requests
from x402.mechanisms.evm.exact.register import register_exact_evm_client


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
