"""Leader election from Python against a real `leasekit serve`: campaign (a waiting acquire with
a value), proclaim (a renew with a new value, refused once no longer the leader), resign (leaving
the block), leader, and observe (watches chained on the state's tag), blocking and asyncio."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

import leasekit
from leasekit import AsyncClient, Client, Leader

from conftest import ADMIN_KEY, API_KEY
from test_client import name


def test_values_and_watch_through_the_blocking_client(server: str) -> None:
    client = Client(server, api_key=API_KEY, tenant=name("t"))
    r = name("r")
    first = client.watch(r)
    assert first.changed is True and first.holder is None and first.state_tag
    taken = client.acquire(r, holder="n1", value="10.0.0.1")
    assert taken.value == "10.0.0.1" and taken.holders[0].value == "10.0.0.1"
    kept = client.renew(r, holder="n1", token=1)
    assert kept.value == "10.0.0.1" and kept.state_tag == taken.state_tag
    began = time.monotonic()
    same = client.watch(r, state_tag=kept.state_tag, wait=1)
    assert same.changed is False and time.monotonic() - began >= 0.9
    assert client.leader(r) == Leader(holder="n1", token=1, value="10.0.0.1", expires_at=kept.expires_at)


def test_an_observer_sees_every_leader_in_order_and_a_deposed_leader_cannot_proclaim(server: str) -> None:
    tenant = name("t")
    client = Client(server, api_key=API_KEY, tenant=tenant)
    admin = Client(server, api_key=ADMIN_KEY, tenant=tenant)
    r = name("leader")
    seen: list[Leader | None] = []

    def observe() -> None:
        for leader in Client(server, api_key=API_KEY, tenant=tenant).observe(r, wait=2):
            seen.append(leader)
            if len(seen) == 5:
                return

    observer = threading.Thread(target=observe, daemon=True)
    observer.start()
    time.sleep(0.3)
    with client.campaign(r, holder="c1", value="a", ttl=5) as one:
        time.sleep(0.3)
        assert one.proclaim("a2").value == "a2"
        time.sleep(0.3)
    time.sleep(0.3)
    # Resigned: c2 is next.
    with client.campaign(r, holder="c2", value="b", ttl=5) as two:
        time.sleep(0.3)
        admin.revoke(r, reason="deposed")
        assert not two.lost, "nobody told it yet: its next renewal is a third of the TTL away"
        with pytest.raises(leasekit.LeaseLost):
            two.proclaim("b2")
        # The refusal is the loss, at once (it waited for the next renewal: the attack of
        # 2026-12-06), and the value stays the last one the service took.
        assert two.lost and two.wait_lost(0)
        with pytest.raises(leasekit.LeaseLost):
            two.check()
        assert two.value == "b"
    observer.join(10)
    summary = [(s.holder, s.token, s.value) if s else None for s in seen]
    assert summary == [None, ("c1", 1, "a"), ("c1", 1, "a2"), None, ("c2", 2, "b")], summary


def test_the_asyncio_client_campaigns_and_observes(server: str) -> None:
    async def main() -> None:
        tenant = name("t")
        client = AsyncClient(server, api_key=API_KEY, tenant=tenant)
        r = name("leader")
        seen: list[Leader | None] = []

        async def observe() -> None:
            async for leader in client.observe(r, wait=2):
                seen.append(leader)
                if len(seen) == 3:
                    return

        watching = asyncio.ensure_future(observe())
        await asyncio.sleep(0.3)
        async with client.campaign(r, holder="c1", value="a", ttl=5) as held:
            await asyncio.sleep(0.3)
            assert (await held.proclaim("a2")).value == "a2"
            await asyncio.wait_for(watching, 10)
            await AsyncClient(server, api_key=ADMIN_KEY, tenant=tenant).revoke(r, reason="deposed")
            with pytest.raises(leasekit.LeaseLost):
                await held.proclaim("a3")
            assert held.lost and await held.wait_lost(0) and held.value == "a2"
        assert [(s.holder, s.value) if s else None for s in seen] == [None, ("c1", "a"), ("c1", "a2")]
        assert await client.leader(r) is None

    asyncio.run(main())
