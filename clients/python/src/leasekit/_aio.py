"""The asyncio client, and a lease held by a background task: the I/O that the machines in
`_core` ask for, done with httpx.AsyncClient and asyncio."""

from __future__ import annotations

import math
import asyncio
import time
from contextlib import nullcontext
from types import TracebackType
from collections.abc import AsyncIterator, Sequence
from typing import Any

import httpx

from ._core import (PATH, Acquire, Hold, Outcome, Pause, Pay, Release, Renew, Renewal, Send,
                    SessionHold, Settings, Wait, unanswered)
from ._errors import InvalidInput, LeasekitError
from ._model import Leader, Lease, Page, SessionState, body, leader_of, new_request_id, set_leases
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

    async def acquire(self, resource: str, *, holder: str, ttl: int = 30, limit: int | None = None,
                      wait: int = 0, value: str | None = None, request_id: str | None = None, deadline: float | None = None) -> Lease:
        """Acquire `resource` for `ttl` seconds; `granted` says whether you hold it now. With
        `limit` (1-64), one of that many permits (a semaphore), each with its own token. With
        `wait` (0-20 s), see `Client.acquire`: the service's first-come-first-served wait."""
        return await self._call(body("acquire", resource, self.tenant, holder=holder, ttl=ttl, limit=limit,
                                     wait=wait or None, value=value, request_id=request_id or new_request_id()), deadline)

    async def acquire_all(self, resources: Sequence[str], *, holder: str, ttl: int = 30, limit: int | None = None,
                          request_id: str | None = None, deadline: float | None = None) -> Lease:
        """Acquire every one of `resources` (2-50) or none of them, in one transaction; `leases`
        has each one's token."""
        return await self._call(body("acquire", None, self.tenant, resources=list(resources), holder=holder, ttl=ttl,
                               limit=limit, request_id=request_id or new_request_id()), deadline)

    async def renew_all(self, leases: Sequence[tuple[str, int]], *, holder: str, ttl: int = 30,
                        request_id: str | None = None, deadline: float | None = None) -> Lease:
        """Renew a whole set, each (resource, token): all or none."""
        return await self._call(body("renew", None, self.tenant, leases=set_leases(leases), holder=holder, ttl=ttl,
                               request_id=request_id or new_request_id()), deadline)

    async def release_all(self, leases: Sequence[tuple[str, int]], *, holder: str, request_id: str | None = None,
                          deadline: float | None = None) -> Lease:
        """Release a whole set, each (resource, token): all or none."""
        return await self._call(body("release", None, self.tenant, leases=set_leases(leases), holder=holder,
                               request_id=request_id or new_request_id()), deadline)

    async def check(self, resource: str, token: int, *, holder: str | None = None,
                    deadline: float | None = None) -> Lease:
        """Whether `token` (of `holder`, if given) is a live permit of `resource`: `current`. The
        fence for a store that cannot keep its own highest token, and the only one for a
        semaphore (its permits' tokens are not ordered by who holds now)."""
        return await self._call(body("check", resource, self.tenant, token=token, holder=holder), deadline)

    async def renew(self, resource: str, *, holder: str, token: int, ttl: int = 30,
                    value: str | None = None, request_id: str | None = None, deadline: float | None = None) -> Lease:
        return await self._call(body("renew", resource, self.tenant, holder=holder, token=token, ttl=ttl,
                                     value=value, request_id=request_id or new_request_id()), deadline)

    async def release(self, resource: str, *, holder: str, token: int, done: bool = False, result: str | None = None,
                      keep_done: int | None = None, request_id: str | None = None,
                      deadline: float | None = None) -> Lease:
        """Release a lease you hold. With `done`, the resource is finished: nobody is granted it
        for `keep_done` seconds (default a week) unless someone reopens it, and every acquire is
        told who finished it and `result` (0-1024 bytes); `done` in the answer is the mark."""
        return await self._call(body("release", resource, self.tenant, holder=holder, token=token,
                               done=True if done else None, result=result, keep_done=keep_done,
                               request_id=request_id or new_request_id()), deadline)

    async def reopen(self, resource: str, *, reason: str, holder: str | None = None, token: int | None = None,
                     request_id: str | None = None, deadline: float | None = None) -> Lease:
        """End `resource`'s finished mark early, with `reason` kept in the audit: as its finisher
        (`holder` and the `token` it finished with) or, naming none, with an admin key or the
        paying wallet (else `Forbidden`). The next grant's token continues from the counter."""
        return await self._call(body("reopen", resource, self.tenant, holder=holder, token=token, reason=reason,
                               request_id=request_id or new_request_id()), deadline)

    async def revoke(self, resource: str, *, reason: str, holder: str | None = None, token: int | None = None,
               request_id: str | None = None, deadline: float | None = None) -> Lease:
        """End `holder`'s permit of `resource` (every permit when None) at once, with `reason`
        (1-200 characters) kept in the audit; with `token`, only the permit with that token (a
        newer one of the same holder is left alone). An API key with the admin role, or a paying
        wallet in its own tenant (else `Forbidden`). `revoked` lists what it ended; not granted
        (NO_HOLD) when nothing was live. The revoked holder's next renew fails with REVOKED."""
        return await self._call(body("revoke", resource, self.tenant, holder=holder, token=token, reason=reason,
                               request_id=request_id or new_request_id()), deadline)

    async def revoke_session(self, session: str, *, reason: str, request_id: str | None = None,
                       deadline: float | None = None) -> Lease:
        """End `session` and every permit in it at once, with `reason` kept in the audit (the
        callers `revoke` allows). `revoked` lists the permits it ended; not granted
        (SESSION_EXPIRED) when it had ended already."""
        return await self._call(body("revoke", None, self.tenant, session=session, reason=reason,
                               request_id=request_id or new_request_id()), deadline)

    async def get_session(self, session: str, *, deadline: float | None = None) -> SessionState | None:
        """`session` as it stands (its live permits in `leases`); None once it has ended."""
        return (await self._call(body("get", None, self.tenant, session=session), deadline)).session

    async def list(self, *, prefix: str | None = None, cursor: str | None = None, page_size: int | None = None,
             deadline: float | None = None) -> Page:
        """A page of your tenant's resources with a live permit or waiter, by name (advisory:
        a grant shows within about 2 s). Pass `next_cursor` back as `cursor` for the next page."""
        answer = await self._call(body("list", None, self.tenant, prefix=prefix, cursor=cursor,
                                  page_size=page_size), deadline)
        return answer.page()

    async def audit(self, *, resource: str | None = None, cursor: str | None = None, page_size: int | None = None,
              deadline: float | None = None) -> Page:
        """A page of the revoke audit, newest first (`entries`): an admin key's or wallet's."""
        answer = await self._call(body("audit", resource, self.tenant, cursor=cursor, page_size=page_size),
                             deadline)
        return answer.page()

    async def get(self, resource: str, *, deadline: float | None = None) -> Lease:
        return await self._call(body("get", resource, self.tenant), deadline)

    async def watch(self, resource: str, *, state_tag: str | None = None, wait: int = 20,
                    deadline: float | None = None) -> Lease:
        """`resource` once its state is no longer the one `state_tag` names (at once without one,
        `changed` true), or when `wait` seconds (0-20) have passed (`changed` false)."""
        return await self._call(body("watch", resource, self.tenant, state_tag=state_tag, wait=wait), deadline)

    async def leader(self, resource: str, *, deadline: float | None = None) -> Leader | None:
        """Who leads `resource` now: its holder, token and value (None when nobody does)."""
        return leader_of(await self._call(body("get", resource, self.tenant), deadline))

    async def observe(self, resource: str, *, wait: int = 20) -> AsyncIterator[Leader | None]:
        """The leader of `resource` as it stands, then each time it changes (a new leader, a new
        value, or nobody: None), from watches chained on the state's tag. Every leader it yields
        held a live permit when its answer was made (a lapse is a change: it never yields one
        whose permit lapsed), and it never skips the last change. Runs until you stop iterating."""
        tag: str | None = None
        while True:
            answer = await self.watch(resource, state_tag=tag, wait=wait)
            if answer.changed:
                yield leader_of(answer)
            tag = answer.state_tag

    def campaign(self, resource: str, *, holder: str, value: str, ttl: int = 30,
                 wait: float = math.inf) -> AsyncHeldLease:
        """Lead `resource` while a `async with` block runs: wait (up to `wait` seconds,
        by default until elected) in its queue, then hold it with `value` (your address), renewed
        in the background; `proclaim(value)` changes the value while you lead; leaving the block
        resigns. `lost` says when you may no longer be the leader."""
        return AsyncHeldLease(self, (resource,), holder=holder, ttl=ttl, wait=wait, limit=1, value=value)

    def lease(self, resource: str, *, holder: str, ttl: int = 30, wait: float = 0.0,
              limit: int = 1) -> AsyncHeldLease:
        """Hold `resource` (one of `limit` permits) while an `async with` block runs (see `HeldLease`)."""
        return AsyncHeldLease(self, (resource,), holder=holder, ttl=ttl, wait=wait, limit=limit)

    def claim_next(self, candidates: Sequence[str], *, holder: str, ttl: int = 30) -> AsyncHeldLease:
        """Hold the first of `candidates` (2-50 distinct names, in the order given) that can be
        granted now while an `async with` block runs: not held to its limit, not finished, nobody
        waiting ahead (`resource` and `token` name the one won). `NotAcquired` when none is free
        now; `Finished` when every one is finished. Finish it with `finish(result)`."""
        return AsyncHeldLease(self, tuple(candidates), holder=holder, ttl=ttl, wait=0.0, limit=1, candidates=True)

    def lease_all(self, resources: Sequence[str], *, holder: str, ttl: int = 30, wait: float = 0.0,
                  limit: int = 1) -> AsyncHeldLease:
        """Hold every one of `resources` (2-50) while an `async with` block runs: taken together,
        renewed together in the background, released together; one `lost` for the whole set
        (`tokens` has each one's token)."""
        return AsyncHeldLease(self, tuple(resources), holder=holder, ttl=ttl, wait=wait, limit=limit)

    def session(self, *, holder: str, ttl: int = 30) -> AsyncHeldSession:
        """`Client.session` for asyncio: `async with client.session(holder=...) as session:`."""
        return AsyncHeldSession(self, holder=holder, ttl=ttl)

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

    def __init__(self, client: AsyncClient, resources: tuple[str, ...], *, holder: str, ttl: int, wait: float,
                 limit: int, value: str | None = None, candidates: bool = False) -> None:
        super().__init__(client, resources, holder=holder, ttl=ttl, wait=wait, limit=limit, value=value,
                         guard=nullcontext(), candidates=candidates)
        self._changed = asyncio.Event()
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> AsyncHeldLease:
        acquisition = self._acquisition()
        outcome: Outcome = None
        while not isinstance(step := acquisition.next(outcome), Renewal):
            outcome = await self._do(step)
        self._held(acquisition, step)
        self._task = asyncio.create_task(self._renew(step))
        return self

    async def __aexit__(self, kind: type[BaseException] | None, value: BaseException | None,
                        traceback: TracebackType | None) -> None:
        self._stop.set()
        if self._task is not None:
            await self._task
        ending = self._renewal.ending_after_loss() if self._renewal is not None else None
        if ending is not None:
            await self._do(ending)

    def _lost_now(self) -> None:
        self._changed.set()

    async def proclaim(self, value: str) -> Lease:
        """Change the value while you lead (a renew with it); `LeaseLost` when the token is no
        longer a live permit's: someone else leads, or nobody."""
        answer = await self._client.renew(self.resource, holder=self.holder, token=self.token, ttl=self.ttl,
                                          value=value)
        return self._proclaimed(value, answer)

    async def finish(self, result: str | None = None, *, keep: int | None = None) -> Lease:
        """`HeldLease.finish` for asyncio: release with done, `result` shown to every acquire."""
        self._finishing(result, keep)
        self._stop.set()
        if self._task is not None:
            await self._task
        if self._release_refused():
            try:
                await self._client.release(self.resources[0], holder=self.holder, token=self.token)
            except LeasekitError:
                pass  # it lapses by itself
        return self._finished()

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
            try:
                return await self._client._call(self._request(step), None)
            except InvalidInput as e:
                if step.wait == 0:
                    raise
                return e
        try:
            outcome: Outcome = await self._client._call(self._request(step), self._deadline(step))
        except LeasekitError as e:
            outcome = e
        if isinstance(step, Release):
            self._ended = outcome
        return outcome


class AsyncHeldSession(SessionHold[AsyncClient], AsyncHeldLease):
    """`HeldSession` for asyncio: `await session.acquire(...)`; `await session.wait_lost()` in
    any number of tasks."""

    def __init__(self, client: AsyncClient, *, holder: str, ttl: int) -> None:
        AsyncHeldLease.__init__(self, client, (), holder=holder, ttl=ttl, wait=0.0, limit=1)

    async def __aenter__(self) -> AsyncHeldSession:
        await AsyncHeldLease.__aenter__(self)
        return self

    async def acquire(self, resource: str, *, limit: int = 1, wait: float = 0.0) -> int:
        """See `HeldSession.acquire`."""
        return (await self._acquire((resource,), limit, wait))[resource]

    async def acquire_all(self, resources: Sequence[str]) -> dict[str, int]:
        """See `HeldSession.acquire_all`."""
        return await self._acquire(tuple(resources), 1, 0.0)

    async def release(self, resource: str) -> Lease:
        """See `HeldSession.release`."""
        answer = await self._client.release(resource, holder=self.holder, token=self.tokens[resource])
        return self._released(resource, answer)

    async def _acquire(self, resources: tuple[str, ...], limit: int, wait: float) -> dict[str, int]:
        give_up = time.monotonic() + wait
        while True:
            request = self._acquire_request(resources, limit, give_up)
            answer = await self._client._call(request, None)
            tokens = self._acquired(resources, request, answer, give_up)
            if isinstance(tokens, dict):
                return tokens
            await asyncio.sleep(tokens)

