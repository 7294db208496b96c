"""Finished work and claim-next from Python against a real `leasekit serve` (docs/adr/0012),
with the blocking client and the asyncio one: `finish(result)` ends a held block with the mark,
a later hold raises `Finished` naming who did it, `claim_next` takes the first free task of a
list, the finisher reopens one that must be done again, and a hold lost before it finishes
marks nothing."""

from __future__ import annotations

import asyncio
import threading

import pytest

from leasekit import AsyncClient, Client, Finished, LeaseLost, NotAcquired

from conftest import ADMIN_KEY, API_KEY
from test_client import name


def test_finish_marks_the_task_and_the_next_hold_is_told_who_did_it(server: str) -> None:
    client = Client(server, api_key=API_KEY, tenant=name("t"))
    task = name("task")
    with client.lease(task, holder="w1", ttl=30) as held:
        token = held.token
        finished = held.finish("sent INV-1009")
    assert finished.granted and finished.done is not None
    assert (finished.done.holder, finished.done.token, finished.done.result) == ("w1", token, "sent INV-1009")
    with pytest.raises(Finished) as told:
        with client.lease(task, holder="w2", ttl=30, wait=5):
            pass
    assert told.value.done is not None and told.value.done.holder == "w1"
    assert told.value.done.result == "sent INV-1009"
    assert isinstance(told.value, NotAcquired), "code that catches NotAcquired keeps working"
    assert client.get(task).done is not None
    # The finisher reopens it; the next hold's token continues from the counter.
    reopened = client.reopen(task, reason="the invoice bounced", holder="w1", token=token)
    assert reopened.granted and reopened.done is None
    with client.lease(task, holder="w2", ttl=30) as again:
        assert again.token == token + 1
    audit = Client(server, api_key=ADMIN_KEY, tenant=client.tenant).audit(resource=task)
    assert audit.entries[0].reopened is not None and audit.entries[0].reopened.holder == "w1"


def test_a_hold_lost_before_it_finishes_marks_nothing(server: str) -> None:
    client = Client(server, api_key=API_KEY, tenant=name("t"))
    admin = Client(server, api_key=ADMIN_KEY, tenant=client.tenant)
    task = name("task")
    with client.lease(task, holder="w1", ttl=2) as held:
        admin.revoke(task, reason="stuck", holder="w1")
        assert held.wait_lost(5)
        with pytest.raises(LeaseLost):
            held.finish("too late")
    assert client.get(task).done is None


def test_claim_next_hands_each_task_out_once_across_threads(server: str) -> None:
    tenant = name("t")
    tasks = [f"{name('q')}-{i}" for i in range(10)]
    done: list[str] = []
    lock = threading.Lock()

    def worker(w: int) -> None:
        client = Client(server, api_key=API_KEY, tenant=tenant)
        while True:
            try:
                with client.claim_next(tasks, holder=f"w{w}", ttl=30) as task:
                    with lock:
                        done.append(task.resource)
                    task.finish(f"w{w}")
            except Finished:
                return
            except NotAcquired:
                continue

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted(done) == sorted(tasks), "every task done once"


def test_async_claim_next_and_finish(server: str) -> None:
    async def main() -> None:
        async with AsyncClient(server, api_key=API_KEY, tenant=name("t")) as client:
            a, b = name("a"), name("b")
            first = await client.acquire(a, holder="other", ttl=60)
            assert first.granted
            async with client.claim_next([a, b], holder="me", ttl=30) as task:
                assert (task.resource, task.token) == (b, 1)
                finished = await task.finish("ok")
            assert finished.done is not None and finished.done.holder == "me"
            with pytest.raises(NotAcquired) as refused:
                async with client.claim_next([a, b], holder="me", ttl=30):
                    pass
            assert not isinstance(refused.value, Finished), "a is held, not finished"
            await client.release(a, holder="other", token=1, done=True, result="theirs")
            with pytest.raises(Finished):
                async with client.claim_next([a, b], holder="me", ttl=30):
                    pass
            got = await client.get(a)
            assert got.done is not None and got.done.result == "theirs"

    asyncio.run(main())


def test_a_refused_finish_releases_the_permit_and_a_long_result_is_refused_first(server: str) -> None:
    client = Client(server, api_key=API_KEY, tenant=name("t"))
    pool = name("pool")
    with client.lease(pool, holder="a", ttl=30, limit=2) as a, client.lease(pool, holder="b", ttl=30, limit=2) as b:
        with pytest.raises(ValueError):
            a.finish("é" * 513)  # 1026 bytes: refused before anything is sent
        assert not a.lost
        assert a.finish("a's result").done is not None
        # b's finish would replace a's mark: refused (DONE), and b's permit released plainly.
        with pytest.raises(LeaseLost) as lost:
            b.finish("b's result")
        assert lost.value.rule == "DONE"
    got = client.get(pool)
    assert got.holders == () and got.done is not None and got.done.holder == "a"
