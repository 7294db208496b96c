"""Sessions from Python against a real `leasekit serve`, with the blocking client and the asyncio
one: one keepalive keeps every hold in the session past its TTL, one loss covers all of them,
and leaving the block closes the session, freeing every hold at once."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

import leasekit
from leasekit import AsyncClient, AsyncHeldSession, HeldSession

from conftest import ADMIN_KEY, API_KEY, SilentProxy
from test_client import Blocking, Make, make, name  # noqa: F401 (`make`: the fixture, sync and async)


class BlockingSession:
    """`HeldSession` in the shape of `AsyncHeldSession` (its calls made on the test's thread,
    `wait_lost` on a worker thread so that other tasks run meanwhile)."""

    def __init__(self, held: HeldSession) -> None:
        self.held = held

    async def __aenter__(self) -> BlockingSession:
        self.held.__enter__()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.held.__exit__(*exc)

    def __getattr__(self, attribute: str) -> Any:
        return getattr(self.held, attribute)

    async def acquire(self, resource: str, **options: Any) -> int:
        return self.held.acquire(resource, **options)

    async def acquire_all(self, resources: list[str]) -> dict[str, int]:
        return self.held.acquire_all(resources)

    async def release(self, resource: str) -> leasekit.Lease:
        return self.held.release(resource)

    async def wait_lost(self, timeout: float | None = None) -> bool:
        return await asyncio.to_thread(self.held.wait_lost, timeout)


def session(client: Any, **options: Any) -> BlockingSession | AsyncHeldSession:
    if isinstance(client, Blocking):
        return BlockingSession(client.client.session(**options))
    assert isinstance(client, AsyncClient)
    return client.session(**options)


async def revoke_session(admin: Any, session_id: str) -> leasekit.Lease:
    if isinstance(admin, Blocking):
        return admin.client.revoke_session(session_id, reason="operator")
    answer: leasekit.Lease = await admin.revoke_session(session_id, reason="operator")
    return answer


def test_one_keepalive_keeps_every_hold_and_leaving_frees_them_all(server: str, make: Make) -> None:
    async def main() -> None:
        client = make(server, api_key=API_KEY, tenant=name("t"))
        a, pool, x, y = (name(n) for n in ("a", "pool", "x", "y"))
        async with session(client, holder="agent-1", ttl=2) as held:
            assert await held.acquire(a) == 1
            assert await held.acquire(pool, limit=3) == 1
            assert await held.acquire_all([x, y]) == {x: 1, y: 1}
            assert held.tokens == {a: 1, pool: 1, x: 1, y: 1}
            first = held.deadline
            await asyncio.sleep(4)  # two TTLs: only the session's keepalives keep the holds
            assert not held.lost and held.deadline > first
            now = await client.get(a)
            assert now.holder == "agent-1" and now.holders[0].session == held.id
            assert not (await client.acquire(x, holder="agent-2")).granted
            assert await held.acquire(x) == 1, "the holder's own acquire again: the same permit"
            b = name("b")
            await client.acquire(b, holder="agent-2")
            with pytest.raises(leasekit.NotAcquired) as taken:
                await held.acquire(b)
            assert taken.value.holder == "agent-2"
            await held.release(pool)
            assert pool not in held.tokens and (await client.get(pool)).holder is None
        for resource in (a, x, y):
            assert (await client.get(resource)).holder is None, f"{resource} freed on exit"

    asyncio.run(main())


def test_a_revoked_session_is_one_loss_for_every_hold(server: str, make: Make) -> None:
    async def main() -> None:
        tenant = name("t")
        client = make(server, api_key=API_KEY, tenant=tenant)
        admin = make(server, api_key=ADMIN_KEY, tenant=tenant)
        async with session(client, holder="agent-1", ttl=3) as held:
            for n in range(3):
                await held.acquire(name(f"job{n}"))
            revoked = await revoke_session(admin, held.id)
            assert revoked.revoked is not None and len(revoked.revoked) == 3
            # Learned at the next keepalive, a third of the TTL in: well before it would lapse.
            assert await held.wait_lost(timeout=2.5)
            with pytest.raises(leasekit.LeaseLost) as lost:
                held.check()
            assert lost.value.rule == "SESSION_EXPIRED"
            r = name("late")
            with pytest.raises(leasekit.LeaseLost):
                await held.acquire(r)
            assert (await client.get(r)).holder is None, "nothing is sent once the session is lost"

    asyncio.run(main())


def test_an_acquire_that_finds_the_session_ended_is_the_loss_at_once(server: str, make: Make) -> None:
    async def main() -> None:
        tenant = name("t")
        client = make(server, api_key=API_KEY, tenant=tenant)
        admin = make(server, api_key=ADMIN_KEY, tenant=tenant)
        # A long TTL: the keepalive would not notice for 20 s.
        async with session(client, holder="agent-1", ttl=60) as held:
            waiting = asyncio.ensure_future(held.wait_lost(timeout=10))
            await asyncio.sleep(0.1)
            await revoke_session(admin, held.id)
            began = time.monotonic()
            with pytest.raises(leasekit.LeaseLost) as lost:
                await held.acquire(name("job"))
            assert lost.value.rule == "SESSION_EXPIRED" and held.lost
            assert await waiting and time.monotonic() - began < 1, "every waiter woke with it"

    asyncio.run(main())


def test_a_session_waits_in_the_queue_and_refuses_past_its_limits(server: str, make: Make) -> None:
    async def main() -> None:
        client = make(server, api_key=API_KEY, tenant=name("t"))
        r, busy = name("r"), name("busy")
        await client.acquire(r, holder="other", ttl=1)
        await client.acquire(busy, holder="other", ttl=60)
        async with session(client, holder="agent-1", ttl=30) as held:
            assert await held.acquire(r, wait=5) == 2, "granted in the session when it freed"
            began = time.monotonic()
            with pytest.raises(leasekit.NotAcquired) as taken:
                await held.acquire(busy, wait=1.5)
            assert taken.value.holder == "other" and 1.5 <= time.monotonic() - began < 5
            for n in range(255):
                await held.acquire(f"{r}-{n}")
            with pytest.raises(leasekit.InvalidInput, match="256"):
                await held.acquire(f"{r}-full")
            assert not held.lost

    asyncio.run(main())


def test_a_session_lost_to_late_answers_is_closed_when_the_block_is_left(server: str, proxy: SilentProxy,
                                                                         make: Make) -> None:
    """The keepalive whose answer came too late was applied, and kept the session (and every
    hold in it) for another TTL; leaving the block closes it all the same (the attack of
    2026-12-05: it stayed live, its holds held)."""
    async def main() -> None:
        tenant = name("t")
        direct = make(server, api_key=API_KEY, tenant=tenant)
        through = make(proxy.url, api_key=API_KEY, tenant=tenant)
        job = name("job")
        async with session(through, holder="agent-1", ttl=3) as held:
            await held.acquire(job)
            await asyncio.sleep(1.2)
            proxy.answers_late = 2.4
            assert await held.wait_lost(timeout=10)
            with pytest.raises(leasekit.LeaseLost) as lost:
                held.check()
            assert lost.value.rule is None, "unreachable, not refused"
            proxy.answers_late = 0.0
            session_id = held.id
        getter = direct.client if isinstance(direct, Blocking) else direct
        state = getter.get_session(session_id)
        if asyncio.iscoroutine(state):
            state = await state
        assert state is None, "closed, not kept alive by the late keepalive"
        assert (await direct.get(job)).holder is None

    asyncio.run(main())
