"""The asyncio client, and a lease held by a background task: the I/O that the machines in
`_core` ask for, done with httpx.AsyncClient and asyncio."""

from __future__ import annotations

import asyncio
from contextlib import nullcontext
from types import TracebackType
from typing import Any

import httpx

from ._core import (PATH, Acquire, Acquisition, Hold, Outcome, Pause, Pay, Release, Renew, Renewal, Send,
                    Settings, Wait, unanswered)
from ._errors import LeasekitError
from ._model import Lease, body, new_request_id
from ._x402 import AsyncPayer


async def set_within(event: asyncio.Event, seconds: float) -> bool:
    """Whether `event` is set within `seconds` (at once if it is set already: `wait_for` with no
    time left would time out first)."""
    if event.is_set():
        return True
    try:
        await asyncio.wait_for(event.wait(), seconds)
        return True
    except asyncio.TimeoutError:
        return False


class AsyncClient(Settings):
    """`Client` for asyncio: the same calls, awaited (see `Client` for the retry rules)."""

    def __init__(self, url: str, *, api_key: str | None = None, account: Any = None, tenant: str = "default",
                 timeout: float = 10.0, retries: int = 3, transport: httpx.AsyncBaseTransport | None = None) -> None:
        super().__init__(url, api_key=api_key, account=account, tenant=tenant, timeout=timeout, retries=retries)
        self._payer = AsyncPayer(account) if account is not None else None
        self._http = httpx.AsyncClient(base_url=self._url, headers=self._headers, timeout=timeout,
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
        call = self._new_call(request, deadline)
        outcome: httpx.Response | str | LeasekitError | None = None
        while not isinstance(step := call.next(outcome), Lease):
            outcome = await self._do(step)
        return step

    async def _do(self, step: Send | Pay | Pause) -> httpx.Response | str | LeasekitError | None:
        if isinstance(step, Pause):
            await asyncio.sleep(step.seconds)
            return None
        try:
            if isinstance(step, Pay):
                assert self._payer is not None, "only a paying call pays"
                return await self._payer.pay(step.offer)
            return await self._http.post(PATH, json=step.body, timeout=step.timeout, headers=step.headers)
        except httpx.HTTPError as e:
            return unanswered(e)


class AsyncHeldLease(Hold[AsyncClient]):
    """`HeldLease` for asyncio: `async with client.lease(...) as lease:`; `await lease.wait_lost()`."""

    _block = "`async with` block"

    def __init__(self, client: AsyncClient, resource: str, *, holder: str, ttl: int, wait: float) -> None:
        super().__init__(client, resource, holder=holder, ttl=ttl, wait=wait, guard=nullcontext())
        self._changed = asyncio.Event()
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> AsyncHeldLease:
        acquisition = Acquisition(self.resource, self.ttl, self._wait)
        outcome: Outcome = None
        while not isinstance(step := acquisition.next(outcome), Renewal):
            outcome = await self._do(step)
        self.token, self._renewal = step.token, step
        self._task = asyncio.create_task(self._renew(step))
        return self

    async def __aexit__(self, kind: type[BaseException] | None, value: BaseException | None,
                        traceback: TracebackType | None) -> None:
        self._stop.set()
        if self._task is not None:
            await self._task

    async def wait_lost(self, timeout: float | None = None) -> bool:
        renewal = self._require()
        for seconds in renewal.waits(timeout):
            self._changed.clear()
            await set_within(self._changed, seconds)
        return renewal.lost

    async def _renew(self, renewal: Renewal) -> None:
        outcome: Outcome = None
        while (step := renewal.next(outcome)) is not None:
            self._changed.set()
            outcome = await self._do(step)
        self._changed.set()

    async def _do(self, step: Acquire | Pause | Wait | Renew | Release) -> Outcome:
        if isinstance(step, Pause):
            await asyncio.sleep(step.seconds)
            return None
        if isinstance(step, Wait):
            return await set_within(self._stop, step.seconds)
        if isinstance(step, Acquire):
            return await self._client.acquire(self.resource, holder=self.holder, ttl=self.ttl,
                                              request_id=step.request_id)
        try:
            if isinstance(step, Renew):
                return await self._client.renew(self.resource, holder=self.holder, token=self.token, ttl=self.ttl,
                                                deadline=step.deadline)
            return await self._client.release(self.resource, holder=self.holder, token=self.token,
                                              deadline=step.deadline)
        except LeasekitError as e:
            return e
