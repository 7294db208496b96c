"""The Python client against a real `leasekit serve`: calls, errors, retries, held leases. Every
case runs with the blocking client and with the asyncio one (`make`, parametrized)."""

from __future__ import annotations

import asyncio
import base64
import json
import secrets
import time
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

import httpx
import pytest

import leasekit
from leasekit import AsyncClient, Client, HeldLease, Lease, Page

from conftest import ADMIN_KEY, API_KEY, SilentProxy


def name(prefix: str) -> str:
    return f"{prefix}-{secrets.token_hex(4)}"


class Tap:
    """What a client sent to the server, for a transport of either kind: `lose(n)` loses the
    server's answer to the n-th request (after the server acted on it), `answer(n, request)` may
    answer it instead of the server."""

    def __init__(self, lose: Callable[[int], bool] = lambda n: False,
                 answer: Callable[[int, httpx.Request], httpx.Response | None] = lambda n, request: None) -> None:
        self.sent: list[httpx.Request] = []
        self._lose, self._answer = lose, answer

    def before(self, request: httpx.Request) -> httpx.Response | None:
        self.sent.append(request)
        return self._answer(len(self.sent), request)

    def lost(self) -> bool:
        return self._lose(len(self.sent))


class Tapped(httpx.HTTPTransport):
    def __init__(self, tap: Tap) -> None:
        super().__init__()
        self.tap = tap

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self.tap.before(request)
        if response is None:
            response = super().handle_request(request)
        if self.tap.lost():
            response.read()
            raise httpx.ReadError("connection reset after the commit")
        return response


class AsyncTapped(httpx.AsyncHTTPTransport):
    def __init__(self, tap: Tap) -> None:
        super().__init__()
        self.tap = tap

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = self.tap.before(request)
        if response is None:
            response = await super().handle_async_request(request)
        if self.tap.lost():
            await response.aread()
            raise httpx.ReadError("connection reset after the commit")
        return response


class Blocking:
    """`Client` in the shape of `AsyncClient` (each call awaitable), so that one test body checks
    both: the calls are the blocking client's own, made on the test's thread."""

    def __init__(self, url: str, *, tap: Tap | None = None, **options: Any) -> None:
        self.client = Client(url, transport=Tapped(tap) if tap else None, **options)

    async def acquire(self, resource: str, **options: Any) -> Lease:
        return self.client.acquire(resource, **options)

    async def renew(self, resource: str, **options: Any) -> Lease:
        return self.client.renew(resource, **options)

    async def release(self, resource: str, **options: Any) -> Lease:
        return self.client.release(resource, **options)

    async def get(self, resource: str, **options: Any) -> Lease:
        return self.client.get(resource, **options)

    async def acquire_all(self, resources: list[str], **options: Any) -> Lease:
        return self.client.acquire_all(resources, **options)

    async def renew_all(self, leases: list[tuple[str, int]], **options: Any) -> Lease:
        return self.client.renew_all(leases, **options)

    async def release_all(self, leases: list[tuple[str, int]], **options: Any) -> Lease:
        return self.client.release_all(leases, **options)

    async def check(self, resource: str, token: int, **options: Any) -> Lease:
        return self.client.check(resource, token, **options)

    def lease(self, resource: str, **options: Any) -> BlockingHeld:
        return BlockingHeld(self.client.lease(resource, **options))

    def lease_all(self, resources: list[str], **options: Any) -> BlockingHeld:
        return BlockingHeld(self.client.lease_all(resources, **options))

    async def revoke(self, resource: str, **options: Any) -> Lease:
        return self.client.revoke(resource, **options)

    async def audit(self, **options: Any) -> Page:
        return self.client.audit(**options)

    # Last: the name `list` in this class's body is the method from here on.
    async def list(self, **options: Any) -> Page:
        return self.client.list(**options)


class BlockingHeld:
    """`HeldLease` in the shape of `AsyncHeldLease`."""

    def __init__(self, held: HeldLease) -> None:
        self.held = held

    async def __aenter__(self) -> BlockingHeld:
        self.held.__enter__()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.held.__exit__(*exc)

    @property
    def token(self) -> int:
        return self.held.token

    @property
    def tokens(self) -> dict[str, int]:
        return self.held.tokens

    @property
    def deadline(self) -> float:
        return self.held.deadline

    @property
    def lost(self) -> bool:
        return self.held.lost

    def check(self) -> None:
        self.held.check()

    async def wait_lost(self, timeout: float | None = None) -> bool:
        return self.held.wait_lost(timeout)


AnyClient = Blocking | AsyncClient
#: Makes a client of the test's kind: `make(url, tap=None, **Client's options)`.
Make = Callable[..., AnyClient]


def make_async(url: str, *, tap: Tap | None = None, **options: Any) -> AsyncClient:
    return AsyncClient(url, transport=AsyncTapped(tap) if tap else None, **options)


@pytest.fixture(params=[Blocking, make_async], ids=["sync", "async"])
def make(request: pytest.FixtureRequest) -> Make:
    maker: Make = request.param
    return maker


def test_acquire_get_renew_release(server: str, make: Make) -> None:
    async def main() -> None:
        client = make(server, api_key=API_KEY, tenant=name("t"))
        r = name("r")
        first = await client.acquire(r, holder="a", ttl=30)
        assert first.granted and first.token is not None and first.holder == "a"
        assert first.expires_at is not None and first.expires_at > datetime.now(timezone.utc)
        assert first.rules == () and not first.replayed
        assert (await client.get(r)).holder == "a"
        renewed = await client.renew(r, holder="a", token=first.token, ttl=60)
        assert renewed.granted and renewed.token == first.token
        assert renewed.expires_at is not None and renewed.expires_at > first.expires_at
        assert (await client.release(r, holder="a", token=first.token)).granted
        free = await client.get(r)
        assert (free.granted, free.holder, free.token) == (False, None, None)
        # The next holder's token is larger: what fences the last one's late writes.
        second = await client.acquire(r, holder="b")
        assert second.token is not None and second.token > first.token

    asyncio.run(main())


def test_refusals_are_answers_with_their_rule(server: str, make: Make) -> None:
    async def main() -> None:
        client = make(server, api_key=API_KEY, tenant=name("t"))
        r = name("r")
        held = await client.acquire(r, holder="a")
        assert held.token is not None
        other = await client.acquire(r, holder="b")
        assert (other.granted, other.holder, other.rules) == (False, "a", ("LEASE_HELD",))
        wrong = await client.renew(r, holder="a", token=held.token + 1)
        assert not wrong.granted and "TOKEN_MISMATCH" in wrong.rules

    asyncio.run(main())


def test_errors_are_typed(server: str, make: Make) -> None:
    async def main() -> None:
        client = make(server, api_key=API_KEY, tenant=name("t"))
        with pytest.raises(leasekit.Unauthorized) as unauthorized:
            await make(server, api_key="unknown-key-0123456789", tenant="t").get("r")
        assert (unauthorized.value.status, unauthorized.value.code) == (401, "UNAUTHORIZED")
        with pytest.raises(leasekit.InvalidInput) as invalid:
            await client.acquire("not a valid name", holder="a")
        assert invalid.value.status == 400 and "resource" in invalid.value.message
        r = name("r")
        await client.acquire(r, holder="a", request_id="same-id-1")
        with pytest.raises(leasekit.IdempotencyConflict):
            await client.acquire(r, holder="b", request_id="same-id-1")
        with pytest.raises(leasekit.Unavailable):
            await make("http://127.0.0.1:9", api_key=API_KEY, retries=1, timeout=1).get("r")

    asyncio.run(main())


def test_a_retried_mutation_keeps_its_request_id_and_applies_once(server: str, make: Make) -> None:
    """The first answer is lost on the way back (the transport raises after the server
    answered); the retry carries the same request id and gets the stored answer."""
    async def main() -> None:
        tap = Tap(lose=lambda n: n == 1)
        client = make(server, tap=tap, api_key=API_KEY, tenant=name("t"))
        r = name("r")
        lease = await client.acquire(r, holder="a")
        assert lease.granted and lease.replayed, "the retry got the stored answer"
        assert len(tap.sent) == 2, "one retry"
        assert tap.sent[0].content == tap.sent[1].content, "the same request, request id included"
        assert (await client.get(r)).token == lease.token == 1

    asyncio.run(main())


def test_a_held_lease_renews_and_is_released_on_exit(server: str, make: Make) -> None:
    async def main() -> None:
        client = make(server, api_key=API_KEY, tenant=name("t"))
        r = name("r")
        async with client.lease(r, holder="a", ttl=2) as lease:
            token = lease.token
            first_deadline = lease.deadline
            await asyncio.sleep(3)  # past the TTL: only renewals keep it
            assert not lease.lost
            assert lease.deadline > first_deadline
            now = await client.get(r)
            assert (now.holder, now.token) == ("a", token)
        assert (await client.get(r)).holder is None

    asyncio.run(main())


def test_not_acquired_within_wait(server: str, make: Make) -> None:
    async def main() -> None:
        client = make(server, api_key=API_KEY, tenant=name("t"))
        r = name("r")
        await client.acquire(r, holder="other", ttl=30)
        began = time.monotonic()
        with pytest.raises(leasekit.NotAcquired) as failed:
            async with client.lease(r, holder="a", wait=0.5):
                pytest.fail("entered a lease held by another")
        assert failed.value.holder == "other"
        assert 0.5 <= time.monotonic() - began < 5

    asyncio.run(main())


def test_waiting_gets_the_lease_when_it_frees(server: str, make: Make) -> None:
    async def main() -> None:
        client = make(server, api_key=API_KEY, tenant=name("t"))
        r = name("r")
        await client.acquire(r, holder="other", ttl=1)
        async with client.lease(r, holder="a", wait=5) as lease:
            assert (await client.get(r)).holder == "a" and lease.token == 2

    asyncio.run(main())


def test_waiters_are_served_in_arrival_order_when_it_is_released(server: str, make: Make) -> None:
    async def main() -> None:
        client = make(server, api_key=API_KEY, tenant=name("t"))
        r = name("r")
        first = await client.acquire(r, holder="owner", ttl=30)
        order: list[tuple[str, int]] = []

        async def waiter(holder: str) -> None:
            if isinstance(client, Blocking):  # its lease blocks: wait on a thread, as a user would
                def hold(blocking: Blocking) -> None:
                    with blocking.client.lease(r, holder=holder, ttl=5, wait=15) as lease:
                        order.append((holder, lease.token))
                        time.sleep(0.1)
                return await asyncio.to_thread(hold, client)
            async with client.lease(r, holder=holder, ttl=5, wait=15) as held:
                order.append((holder, held.token))
                await asyncio.sleep(0.1)

        w1 = asyncio.create_task(waiter("w1"))
        await asyncio.sleep(0.5)
        w2 = asyncio.create_task(waiter("w2"))
        await asyncio.sleep(0.5)
        # Both wait in the service's queue, in arrival order.
        assert (await client.acquire(r, holder="w2")).queue_position == 2
        began = time.monotonic()
        assert first.token is not None
        await client.release(r, holder="owner", token=first.token)
        await asyncio.gather(w1, w2)
        assert order == [("w1", 2), ("w2", 3)]
        assert time.monotonic() - began < 5, "handed on at the release, not found by polling"

    asyncio.run(main())


def test_a_refused_renewal_is_a_loss_with_its_rule(server: str, make: Make) -> None:
    async def main() -> None:
        client = make(server, api_key=API_KEY, tenant=name("t"))
        r = name("r")
        async with client.lease(r, holder="a", ttl=2) as lease:
            await client.release(r, holder="a", token=lease.token)  # taken away behind its back
            assert await lease.wait_lost(timeout=3)
            with pytest.raises(leasekit.LeaseLost) as lost:
                lease.check()
            assert lost.value.rule == "NO_HOLD"

    asyncio.run(main())


def test_a_held_lease_is_read_only_inside_its_block(server: str, make: Make) -> None:
    async def main() -> None:
        lease = make(server, api_key=API_KEY, tenant=name("t")).lease(name("r"), holder="a")
        with pytest.raises(RuntimeError, match="inside its"):
            lease.check()
        assert lease.token == 0

    asyncio.run(main())


def test_a_silent_service_loses_the_lease_before_the_server_expires_it(server: str, proxy: SilentProxy,
                                                                       make: Make) -> None:
    async def main() -> None:
        tenant = name("t")
        through_proxy = make(proxy.url, api_key=API_KEY, tenant=tenant, timeout=5)
        direct = make(server, api_key=API_KEY, tenant=tenant)
        r = name("r")
        async with through_proxy.lease(r, holder="a", ttl=3) as lease:
            proxy.silent.set()
            assert await lease.wait_lost(timeout=6), "never judged lost"
            # Judged lost while the server still counts it as ours: the work stopped in time.
            still = await direct.get(r)
            assert still.holder == "a", "the server had expired it before the client knew"
            assert still.expires_at is not None and still.expires_at > datetime.now(timezone.utc)
            await asyncio.sleep(1)
            successor = await direct.acquire(r, holder="b")
            assert successor.granted and successor.token is not None and successor.token > lease.token

    asyncio.run(main())


def test_a_wallet_pays_per_call_and_a_lost_paid_answer_is_charged_once(server: str, make: Make) -> None:
    """No API key: the client answers the 402 with a payment from the wallet (the official x402
    SDK), named with a payment identifier. The paid answer is lost on the way back; the retry
    resends the same payment and gets the answer it bought."""
    from eth_account import Account

    async def main() -> None:
        tap = Tap(lose=lambda n: n == 2)
        wallet = Account.create()
        client = make(server, tap=tap, account=wallet)
        r = name("r")
        lease = await client.acquire(r, holder="a")
        assert lease.granted and lease.replayed and lease.token == 1
        offer, paid, resent = tap.sent
        assert "payment-signature" not in offer.headers
        assert paid.headers["payment-signature"] == resent.headers["payment-signature"], "one payment, sent twice"
        payload = json.loads(base64.b64decode(paid.headers["payment-signature"]))
        assert len(payload["extensions"]["payment-identifier"]["info"]["id"]) >= 16
        assert payload["payload"]["authorization"]["from"].lower() == wallet.address.lower()
        # The wallet is the tenant: an API key's tenant of any name does not see it.
        assert (await client.get(r)).holder == "a"
        assert (await make(server, api_key=API_KEY, tenant=wallet.address.lower()).get(r)).holder is None
        with pytest.raises(ValueError):
            make(server, api_key=API_KEY, account=wallet)

    asyncio.run(main())


def test_a_wallet_holds_a_lease(server: str, make: Make) -> None:
    from eth_account import Account

    async def main() -> None:
        client = make(server, account=Account.create())
        r = name("r")
        async with client.lease(r, holder="a", ttl=2) as lease:
            await asyncio.sleep(2.5)  # past the TTL: renewals, each one paid
            token, lost = lease.token, lease.lost
        assert (token, lost, (await client.get(r)).holder) == (1, False, None)

    asyncio.run(main())


def test_a_paid_call_waits_while_its_first_attempt_is_in_progress(server: str, make: Make) -> None:
    """After a crash the service answers a resent payment 409 PAYMENT_IN_PROGRESS until its
    sweeper closes the first attempt (within a minute). The client waits for it with the same
    payment, rather than giving up after its few quick retries and paying again."""
    from eth_account import Account

    def in_progress_for_5(n: int, request: httpx.Request) -> httpx.Response | None:
        if "payment-signature" in request.headers and 2 <= n <= 6:
            return httpx.Response(409, json={"error": "the first call with this payment has not finished",
                                             "code": "PAYMENT_IN_PROGRESS"})
        return None

    async def main() -> None:
        tap = Tap(answer=in_progress_for_5)
        began = time.monotonic()
        lease = await make(server, tap=tap, account=Account.create(), retries=1).acquire(name("r"), holder="a")
        assert lease.granted and lease.token == 1
        assert time.monotonic() - began >= 4.9, "five answers in progress, waited on a second apart"
        paid = [r.headers["payment-signature"] for r in tap.sent if "payment-signature" in r.headers]
        assert len(paid) == 6 and len(set(paid)) == 1, "one payment, waited on, then answered"

    asyncio.run(main())



def test_a_semaphore_a_set_and_a_check(server: str, make: Make) -> None:
    async def main() -> None:
        client = make(server, api_key=API_KEY, tenant=name("t"))
        pool = name("pool")
        a = await client.acquire(pool, holder="a", limit=2)
        b = await client.acquire(pool, holder="b", limit=2)
        assert (a.token, b.token, b.limit) == (1, 2, 2)
        assert [(p.holder, p.token) for p in b.holders] == [("a", 1), ("b", 2)]
        full = await client.acquire(pool, holder="c", limit=2)
        assert not full.granted and full.rules == ("LEASE_HELD",)
        assert (await client.acquire(pool, holder="c", limit=3)).rules == ("LIMIT_MISMATCH",)
        assert (await client.check(pool, 2, holder="b")).current is True
        assert (await client.check(pool, 2, holder="a")).current is False
        assert (await client.check(pool, 9)).rules == ("TOKEN_NOT_CURRENT",)
        x, y = name("x"), name("y")
        taken = await client.acquire_all([x, y], holder="a")
        assert taken.granted and taken.token is None and taken.leases is not None
        assert [(m.resource, m.token) for m in taken.leases] == [(x, 1), (y, 1)]
        blocked = await client.acquire_all([y, name("z")], holder="b")
        assert not blocked.granted and blocked.rules == ("LEASE_HELD",)
        assert (await client.renew_all([(x, 1), (y, 1)], holder="a", ttl=60)).granted
        assert (await client.release_all([(x, 1), (y, 1)], holder="a")).granted
        assert not (await client.get(x)).granted

    asyncio.run(main())


def test_held_permits_and_a_held_set(server: str, make: Make) -> None:
    async def main() -> None:
        client = make(server, api_key=API_KEY, tenant=name("t"))
        pool = name("pool")
        async with client.lease(pool, holder="a", ttl=2, limit=2) as first:
            async with client.lease(pool, holder="b", ttl=2, limit=2) as second:
                assert (first.token, second.token) == (1, 2)
                with pytest.raises(leasekit.NotAcquired):
                    async with client.lease(pool, holder="c", limit=2):
                        pytest.fail("a third permit of two")
                # Another limit is refused at once, not waited on for the whole `wait`.
                began = time.monotonic()
                with pytest.raises(leasekit.NotAcquired):
                    async with client.lease(pool, holder="c", limit=3, wait=10):
                        pytest.fail("a permit under another limit")
                assert time.monotonic() - began < 5
                await asyncio.sleep(2.5)  # past the TTL: only renewals keep them
                assert not first.lost and not second.lost
                assert len((await client.get(pool)).holders) == 2
        assert (await client.get(pool)).holders == ()
        x, y = name("x"), name("y")
        async with client.lease_all([x, y], holder="a", ttl=2) as held:
            assert held.tokens == {x: 1, y: 1}
            await asyncio.sleep(2.5)
            assert not held.lost
            assert (await client.get(y)).holder == "a"
            with pytest.raises(leasekit.NotAcquired):
                async with client.lease_all([y, name("z")], holder="b"):
                    pytest.fail("a set with a held resource")
        assert not (await client.get(x)).granted and not (await client.get(y)).granted

    asyncio.run(main())


def test_list_revoke_and_audit(server: str, make: Make) -> None:
    async def main() -> None:
        tenant = name("t")
        client = make(server, api_key=API_KEY, tenant=tenant)
        admin = make(server, api_key=ADMIN_KEY, tenant=tenant)
        names = sorted(name("job") for _ in range(3))
        for r in names:
            assert (await client.acquire(r, holder="w", ttl=60)).granted
        first = await client.list(page_size=2)
        assert [m.resource for m in first.leases] == names[:2] and first.next_cursor is not None
        rest = await client.list(page_size=2, cursor=first.next_cursor)
        assert [m.resource for m in rest.leases] == names[2:] and rest.next_cursor is None
        assert [h.holder for h in rest.leases[0].holders] == ["w"]
        assert [m.resource for m in (await client.list(prefix=names[1])).leases] == [names[1]]
        with pytest.raises(leasekit.Forbidden):
            await client.revoke(names[0], reason="no role")
        with pytest.raises(leasekit.Forbidden):
            await client.audit()
        revoked = await admin.revoke(names[0], holder="w", token=1, reason="<b>wedged</b>")
        assert revoked.granted and revoked.revoked is not None and revoked.revoked[0].holder == "w"
        token = revoked.revoked[0].token
        renewed = await client.renew(names[0], holder="w", token=token)
        assert renewed.rules == ("REVOKED",)
        audit = await admin.audit(resource=names[0])
        assert [e.reason for e in audit.entries] == ["<b>wedged</b>"]
        assert audit.entries[0].actor.startswith("key:") and audit.entries[0].ended[0].token == token

    asyncio.run(main())


def test_a_held_lease_that_is_revoked_is_lost_with_revoked(server: str, make: Make) -> None:
    async def main() -> None:
        tenant = name("t")
        client = make(server, api_key=API_KEY, tenant=tenant)
        admin = make(server, api_key=ADMIN_KEY, tenant=tenant)
        r = name("r")
        async with client.lease(r, holder="a", ttl=3) as lease:
            await admin.revoke(r, reason="operator")
            # Learned at the next renewal (a third of the ttl in), not when the lease would lapse.
            assert await lease.wait_lost(timeout=2.5)
            with pytest.raises(leasekit.LeaseLost) as lost:
                lease.check()
            assert lost.value.rule == "REVOKED"

    asyncio.run(main())
