"""The Python client against a real `leasekit serve`: calls, errors, retries, held leases."""

from __future__ import annotations

import asyncio
import base64
import json
import secrets
import time
from datetime import datetime, timezone

import httpx
import pytest

import leasekit
from leasekit import AsyncClient, Client

from conftest import API_KEY, SilentProxy


def name(prefix: str) -> str:
    return f"{prefix}-{secrets.token_hex(4)}"


@pytest.fixture
def client(server: str) -> Client:
    return Client(server, api_key=API_KEY, tenant=name("t"))


def test_acquire_get_renew_release(client: Client) -> None:
    r = name("r")
    first = client.acquire(r, holder="a", ttl=30)
    assert first.granted and first.token is not None and first.holder == "a"
    assert first.expires_at is not None and first.expires_at > datetime.now(timezone.utc)
    assert first.rules == () and not first.replayed
    assert client.get(r).holder == "a"
    renewed = client.renew(r, holder="a", token=first.token, ttl=60)
    assert renewed.granted and renewed.token == first.token
    assert renewed.expires_at is not None and renewed.expires_at > first.expires_at
    assert client.release(r, holder="a", token=first.token).granted
    free = client.get(r)
    assert (free.granted, free.holder, free.token) == (False, None, None)
    # The next holder's token is larger: what fences the last one's late writes.
    second = client.acquire(r, holder="b")
    assert second.token is not None and second.token > first.token


def test_refusals_are_answers_with_their_rule(client: Client) -> None:
    r = name("r")
    held = client.acquire(r, holder="a")
    assert held.token is not None
    other = client.acquire(r, holder="b")
    assert (other.granted, other.holder, other.rules) == (False, "a", ("LEASE_HELD",))
    wrong = client.renew(r, holder="a", token=held.token + 1)
    assert not wrong.granted and "TOKEN_MISMATCH" in wrong.rules


def test_errors_are_typed(server: str, client: Client) -> None:
    with pytest.raises(leasekit.Unauthorized) as unauthorized:
        Client(server, api_key="unknown-key-0123456789", tenant="t").get("r")
    assert (unauthorized.value.status, unauthorized.value.code) == (401, "UNAUTHORIZED")
    with pytest.raises(leasekit.InvalidInput) as invalid:
        client.acquire("not a valid name", holder="a")
    assert invalid.value.status == 400 and "resource" in invalid.value.message
    r = name("r")
    client.acquire(r, holder="a", request_id="same-id-1")
    with pytest.raises(leasekit.IdempotencyConflict):
        client.acquire(r, holder="b", request_id="same-id-1")
    with pytest.raises(leasekit.Unavailable):
        Client("http://127.0.0.1:9", api_key=API_KEY, retries=1, timeout=1).get("r")


def test_a_retried_mutation_keeps_its_request_id_and_applies_once(server: str) -> None:
    """The first answer is lost on the way back (the transport raises after the server
    answered); the retry carries the same request id and gets the stored answer."""
    sent: list[bytes] = []

    class LoseFirstAnswer(httpx.HTTPTransport):
        def handle_request(self, request: httpx.Request) -> httpx.Response:
            response = super().handle_request(request)
            sent.append(request.read())
            if len(sent) == 1:
                response.read()
                raise httpx.ReadError("connection reset after the commit")
            return response

    client = Client(server, api_key=API_KEY, tenant=name("t"), transport=LoseFirstAnswer())
    r = name("r")
    lease = client.acquire(r, holder="a")
    assert lease.granted and lease.replayed, "the retry got the stored answer"
    assert len(sent) == 2 and sent[0] == sent[1], "the same request, request id included"
    assert client.get(r).token == lease.token == 1


def test_a_held_lease_renews_and_is_released_on_exit(client: Client) -> None:
    r = name("r")
    with client.lease(r, holder="a", ttl=2) as lease:
        token = lease.token
        first_deadline = lease.deadline
        time.sleep(3)  # past the TTL: only renewals keep it
        assert not lease.lost
        assert lease.deadline > first_deadline
        now = client.get(r)
        assert (now.holder, now.token) == ("a", token)
    assert client.get(r).holder is None


def test_not_acquired_within_wait(client: Client) -> None:
    r = name("r")
    client.acquire(r, holder="other", ttl=30)
    began = time.monotonic()
    with pytest.raises(leasekit.NotAcquired) as failed:
        with client.lease(r, holder="a", wait=0.5):
            pytest.fail("entered a lease held by another")
    assert failed.value.holder == "other"
    assert 0.5 <= time.monotonic() - began < 5


def test_waiting_gets_the_lease_when_it_frees(client: Client) -> None:
    r = name("r")
    client.acquire(r, holder="other", ttl=1)
    with client.lease(r, holder="a", wait=5) as lease:
        assert client.get(r).holder == "a" and lease.token == 2


def test_a_refused_renewal_is_a_loss_with_its_rule(client: Client) -> None:
    r = name("r")
    with client.lease(r, holder="a", ttl=2) as lease:
        client.release(r, holder="a", token=lease.token)  # taken away behind its back
        assert lease.wait_lost(timeout=3)
        with pytest.raises(leasekit.LeaseLost) as lost:
            lease.check()
        assert lost.value.rule == "NO_HOLD"


def test_a_silent_service_loses_the_lease_before_the_server_expires_it(server: str, proxy: SilentProxy) -> None:
    tenant = name("t")
    through_proxy = Client(proxy.url, api_key=API_KEY, tenant=tenant, timeout=5)
    direct = Client(server, api_key=API_KEY, tenant=tenant)
    r = name("r")
    with through_proxy.lease(r, holder="a", ttl=3) as lease:
        proxy.silent.set()
        assert lease.wait_lost(timeout=6), "never judged lost"
        # Judged lost while the server still counts it as ours: the work stopped in time.
        still = direct.get(r)
        assert still.holder == "a", "the server had expired it before the client knew"
        assert still.expires_at is not None and still.expires_at > datetime.now(timezone.utc)
        time.sleep(1)
        successor = direct.acquire(r, holder="b")
        assert successor.granted and successor.token is not None and successor.token > lease.token


def test_async_client_and_held_lease(server: str) -> None:
    async def main() -> None:
        async with AsyncClient(server, api_key=API_KEY, tenant=name("t")) as client:
            r = name("r")
            first = await client.acquire(r, holder="a")
            assert first.granted and first.token == 1
            assert (await client.acquire(r, holder="b")).rules == ("LEASE_HELD",)
            assert (await client.release(r, holder="a", token=1)).granted
            async with client.lease(r, holder="a", ttl=2) as lease:
                await asyncio.sleep(3)
                assert not lease.lost and (await client.get(r)).token == lease.token == 2
                await client.release(r, holder="a", token=lease.token)
                assert await lease.wait_lost(timeout=3)
                with pytest.raises(leasekit.LeaseLost):
                    lease.check()
            with pytest.raises(leasekit.NotAcquired):
                await client.acquire(r, holder="c", ttl=30)
                async with client.lease(r, holder="a", wait=0.3):
                    pass

    asyncio.run(main())


def test_a_wallet_pays_per_call_and_a_lost_paid_answer_is_charged_once(server: str) -> None:
    """No API key: the client answers the 402 with a payment from the wallet (the official x402
    SDK), named with a payment identifier. The paid answer is lost on the way back; the retry
    resends the same payment and gets the answer it bought."""
    from eth_account import Account

    sent: list[httpx.Request] = []

    class LoseFirstPaidAnswer(httpx.HTTPTransport):
        def handle_request(self, request: httpx.Request) -> httpx.Response:
            response = super().handle_request(request)
            sent.append(request)
            if len(sent) == 2:
                response.read()
                raise httpx.ReadError("connection reset after the commit")
            return response

    wallet = Account.create()
    client = Client(server, account=wallet, transport=LoseFirstPaidAnswer())
    r = name("r")
    lease = client.acquire(r, holder="a")
    assert lease.granted and lease.replayed and lease.token == 1
    offer, paid, resent = sent
    assert "payment-signature" not in offer.headers
    assert paid.headers["payment-signature"] == resent.headers["payment-signature"], "one payment, sent twice"
    payload = json.loads(base64.b64decode(paid.headers["payment-signature"]))
    assert len(payload["extensions"]["payment-identifier"]["info"]["id"]) >= 16
    assert payload["payload"]["authorization"]["from"].lower() == wallet.address.lower()
    # The wallet is the tenant: an API key's tenant of any name does not see it.
    assert client.get(r).holder == "a"
    assert Client(server, api_key=API_KEY, tenant=wallet.address.lower()).get(r).holder is None
    with pytest.raises(ValueError):
        Client(server, api_key=API_KEY, account=wallet)


def test_a_wallet_holds_a_lease_with_the_async_client(server: str) -> None:
    from eth_account import Account

    async def hold() -> tuple[int, bool, str | None]:
        async with AsyncClient(server, account=Account.create()) as client:
            r = name("r")
            async with client.lease(r, holder="a", ttl=2) as lease:
                await asyncio.sleep(2.5)  # past the TTL: renewals, each one paid
                token, lost = lease.token, lease.lost
            return token, lost, (await client.get(r)).holder

    token, lost, holder_after = asyncio.run(hold())
    assert (token, lost, holder_after) == (1, False, None)


def test_a_paid_call_waits_while_its_first_attempt_is_in_progress(server: str) -> None:
    """After a crash the service answers a resent payment 409 PAYMENT_IN_PROGRESS until its
    sweeper closes the first attempt (within a minute). The client waits for it with the same
    payment, rather than giving up after its few quick retries and paying again."""
    from eth_account import Account

    sent: list[httpx.Request] = []

    class InProgressFor5(httpx.HTTPTransport):
        def handle_request(self, request: httpx.Request) -> httpx.Response:
            sent.append(request)
            if "payment-signature" in request.headers and 2 <= len(sent) <= 6:
                return httpx.Response(409, json={"error": "the first call with this payment has not finished",
                                                 "code": "PAYMENT_IN_PROGRESS"})
            return super().handle_request(request)

    client = Client(server, account=Account.create(), retries=1, transport=InProgressFor5())
    lease = client.acquire(name("r"), holder="a")
    assert lease.granted and lease.token == 1
    paid = [r.headers["payment-signature"] for r in sent if "payment-signature" in r.headers]
    assert len(paid) == 6 and len(set(paid)) == 1, "one payment, waited on, then answered"
