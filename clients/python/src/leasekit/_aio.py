"""The asyncio client, and a lease held by a background task."""

from __future__ import annotations

import asyncio
import time
from types import TracebackType
from typing import Any

import httpx

from ._client import (PATH, RETRY_PAUSE, answer_of, attempt_timeout, credentials, must_pay, pause_before_retry,
                      payment_header)
from ._x402 import PAYMENT_REQUIRED, AsyncPayer
from ._errors import LeasekitError, LeaseLost, NotAcquired, Unavailable
from ._model import Clock, Lease, body, new_request_id


class AsyncClient:
    """`Client` for asyncio: the same calls, awaited (see `Client` for the retry rules)."""

    def __init__(self, url: str, *, api_key: str | None = None, account: Any = None, tenant: str = "default",
                 timeout: float = 10.0, retries: int = 3, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.tenant = tenant
        self.retries = retries
        self.timeout = timeout
        headers = credentials(api_key, account)
        self._payer = AsyncPayer(account) if account is not None else None
        self._http = httpx.AsyncClient(base_url=url.rstrip("/"), headers=headers, timeout=timeout,
                                       transport=transport)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    async def acquire(self, resource: str, *, holder: str, ttl: int = 30, request_id: str | None = None,
                      deadline: float | None = None) -> Lease:
        return await self._call(body("acquire", resource, self.tenant, holder=holder, ttl=ttl,
                                     request_id=request_id or new_request_id()), deadline)

    async def renew(self, resource: str, *, holder: str, token: int, ttl: int = 30,
                    request_id: str | None = None, deadline: float | None = None) -> Lease:
        return await self._call(body("renew", resource, self.tenant, holder=holder, token=token, ttl=ttl,
                                     request_id=request_id or new_request_id()), deadline)

    async def release(self, resource: str, *, holder: str, token: int, request_id: str | None = None,
                      deadline: float | None = None) -> Lease:
        return await self._call(body("release", resource, self.tenant, holder=holder, token=token,
                                     request_id=request_id or new_request_id()), deadline)

    async def get(self, resource: str, *, deadline: float | None = None) -> Lease:
        return await self._call(body("get", resource, self.tenant), deadline)

    def lease(self, resource: str, *, holder: str, ttl: int = 30, wait: float = 0.0) -> AsyncHeldLease:
        """Hold `resource` while an `async with` block runs (see `HeldLease`)."""
        return AsyncHeldLease(self, resource, holder=holder, ttl=ttl, wait=wait)

    async def _call(self, request: dict[str, Any], deadline: float | None) -> Lease:
        attempt, payments = 0, 0
        payment: str | None = None
        while True:
            timeout = attempt_timeout(self.timeout, deadline)
            try:
                response = await self._http.post(PATH, json=request, timeout=timeout,
                                                 headers=payment_header(payment))
                if must_pay(response, self._payer is not None, payments, self.retries):
                    assert self._payer is not None
                    payment, payments = await self._payer.pay(response.headers.get(PAYMENT_REQUIRED)), payments + 1
                    continue
                return answer_of(response)
            except httpx.HTTPError as e:
                error: LeasekitError = Unavailable(f"the service did not answer: {e}")
            except LeasekitError as e:
                error = e
            await asyncio.sleep(pause_before_retry(attempt, self.retries, error, deadline))
            attempt += 1


class AsyncHeldLease:
    """`HeldLease` for asyncio: `async with client.lease(...) as lease:`; `await lease.wait_lost()`."""

    def __init__(self, client: AsyncClient, resource: str, *, holder: str, ttl: int, wait: float) -> None:
        self._client, self.resource, self.holder, self.ttl, self._wait = client, resource, holder, ttl, wait
        self.token = 0
        self._clock: Clock | None = None
        self._changed = asyncio.Event()
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> AsyncHeldLease:
        give_up = time.monotonic() + self._wait
        request_id = new_request_id()
        while True:
            sent = time.monotonic()
            lease = await self._client.acquire(self.resource, holder=self.holder, ttl=self.ttl,
                                               request_id=request_id)
            if lease.granted and lease.token is not None:
                break
            if time.monotonic() >= give_up:
                raise NotAcquired(f"{self.resource} is held by {lease.holder}", holder=lease.holder)
            request_id = new_request_id()
            await asyncio.sleep(min(0.2, max(0.0, give_up - time.monotonic())))
        self.token = lease.token
        clock = Clock(ttl=self.ttl, deadline=0.0)
        clock.deadline = sent + clock.usable
        self._clock = clock
        self._task = asyncio.create_task(self._renew())
        return self

    async def __aexit__(self, kind: type[BaseException] | None, value: BaseException | None,
                        traceback: TracebackType | None) -> None:
        self._stop.set()
        if self._task is not None:
            await self._task

    @property
    def deadline(self) -> float:
        return self._require().deadline

    @property
    def lost(self) -> bool:
        return self._require().judge(time.monotonic())

    def check(self) -> None:
        clock = self._require()
        if clock.judge(time.monotonic()):
            raise LeaseLost(clock.lost_reason or "lost", rule=clock.lost_rule)

    async def wait_lost(self, timeout: float | None = None) -> bool:
        end = None if timeout is None else time.monotonic() + timeout
        clock = self._require()
        while not clock.judge(time.monotonic()):
            now = time.monotonic()
            if end is not None and now >= end:
                return False
            until = clock.deadline if end is None else min(end, clock.deadline)
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), max(0.0, until - now))
            except asyncio.TimeoutError:
                pass
        return True

    def _require(self) -> Clock:
        if self._clock is None:
            raise RuntimeError("the lease is held only inside its `async with` block")
        return self._clock

    async def _stopped_within(self, seconds: float) -> bool:
        try:
            await asyncio.wait_for(self._stop.wait(), max(0.0, seconds))
            return True
        except asyncio.TimeoutError:
            return False

    async def _renew(self) -> None:
        clock = self._require()
        while True:
            deadline = clock.deadline
            if await self._stopped_within(clock.next_renewal() - time.monotonic()):
                return await self._release(deadline)
            while True:
                sent = time.monotonic()
                if clock.judge(sent):
                    self._changed.set()
                    return
                try:
                    lease = await self._client.renew(self.resource, holder=self.holder, token=self.token,
                                                     ttl=self.ttl, deadline=deadline)
                except LeasekitError:
                    if await self._stopped_within(RETRY_PAUSE):
                        return await self._release(deadline)
                    continue
                if lease.granted:
                    clock.granted(sent)
                else:
                    clock.refused(lease.rules[0] if lease.rules else "refused")
                self._changed.set()
                if not lease.granted:
                    return
                break
            if self._stop.is_set():
                return await self._release(clock.deadline)

    async def _release(self, deadline: float) -> None:
        if self._require().judge(time.monotonic()):
            return
        try:
            await self._client.release(self.resource, holder=self.holder, token=self.token, deadline=deadline)
        except LeasekitError:
            pass  # it lapses by itself at its expiry
