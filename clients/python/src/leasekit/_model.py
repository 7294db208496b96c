"""What the service answers, as types; and the rules a held lease keeps time by."""

from __future__ import annotations

import math
import uuid
from dataclasses import dataclass
from datetime import datetime
from collections.abc import Sequence
from typing import Any

from ._errors import ServiceError


@dataclass(frozen=True)
class Permit:
    """One live permit of a resource: its holder, fencing token and expiry, and the session it
    lives in (its expiry is the session's), if any."""

    holder: str
    token: int
    expires_at: datetime
    session: str | None = None
    #: Its holder's note (a leader's address), or None.
    value: str | None = None


@dataclass(frozen=True)
class Leader:
    """Who leads a resource (holds its one permit): holder, fencing token, value, expiry."""

    holder: str
    token: int
    value: str | None
    expires_at: datetime | None


@dataclass(frozen=True)
class Done:
    """A finished resource's mark (a done release): who finished it, with which token, when,
    what the work produced, and until when nobody is granted it (unless it is reopened)."""

    holder: str
    token: int
    done_at: datetime
    result: str | None
    until: datetime


@dataclass(frozen=True)
class SessionPermit:
    """One live permit of a session."""

    resource: str
    token: int
    limit: int


@dataclass(frozen=True)
class SessionState:
    """A live session as the service answers it: it and every permit in it (`leases`) lapse at
    `expires_at` unless kept alive."""

    id: str
    holder: str
    expires_at: datetime
    leases: tuple[SessionPermit, ...]


@dataclass(frozen=True)
class Waiter:
    """A live place in a resource's queue: its holder, and when it lapses unless they call again."""

    holder: str
    until: datetime


@dataclass(frozen=True)
class Member:
    """One resource of a set as it stands after the call, or of a list page (`holder`, `token`,
    `expires_at`: your permit when you have one, else the live one with the largest token;
    `waiters`: a list page's live places in its queue, in order)."""

    resource: str
    granted: bool
    token: int | None
    holder: str | None
    expires_at: datetime | None
    limit: int
    holders: tuple[Permit, ...]
    waiters: tuple[Waiter, ...] = ()
    #: Its finished mark, if it is finished.
    done: Done | None = None


@dataclass(frozen=True)
class AuditEntry:
    """One revoke, as the audit keeps it (90 days): when, who (`key:<id>` or the wallet), which
    resource (None for a session's revoke, which names its `session`), the permits it ended, and
    why."""

    id: str
    at: datetime
    actor: str
    resource: str | None
    ended: tuple[Permit, ...]
    reason: str
    session: str | None = None
    #: A reopen's entry: the finished mark it ended.
    reopened: Done | None = None


@dataclass(frozen=True)
class Page:
    """A page of `list` (`leases`: live resources by name) or `audit` (`entries`: newest first);
    `next_cursor` continues it (None at the end). List is advisory: a grant shows within about
    2 s; `get` and `check` decide."""

    leases: tuple[Member, ...]
    entries: tuple[AuditEntry, ...]
    next_cursor: str | None


@dataclass(frozen=True)
class Lease:
    """A lease as the service answered it.

    `granted`: acquire/renew: you hold it now; release: it was released; get: someone holds it;
    check: the token is current; a set: every resource of it.
    `token`, `holder`, `expires_at`: your permit when you have one after the call, else the live
    permit with the largest token (None when free, and for a set: see `leases`).
    `rules`: why the call did not do what was asked (e.g. LEASE_HELD, TOKEN_MISMATCH), else empty.
    `replayed`: this is the stored answer of an earlier call with the same request id.
    `limit`, `holders`: how many may hold the resource at once, and the live permits by token.
    `current`: check's answer. `leases`: a set's resources, in request order.
    `queue_position`: an acquire whose wait ended ungranted: your place in the queue (1 = next).
    `revoked`: a revoke's ended permits. `entries`, `next_cursor`: an audit or list page (see `Page`).
    `session`: open, keepalive, close and get of a session: the session after the call (None
    once it has ended, or when unknown). `value`: the shown permit's note. `state_tag`: the
    resource's state, for `watch`; `changed`: a watch's answer, whether it is another state.
    `done`: the resource's finished mark (None when it is not finished); `resource`: the winner of
    an acquire of candidates.
    """

    granted: bool
    token: int | None
    holder: str | None
    expires_at: datetime | None
    rules: tuple[str, ...]
    replayed: bool
    limit: int = 1
    holders: tuple[Permit, ...] = ()
    current: bool | None = None
    leases: tuple[Member, ...] | None = None
    queue_position: int | None = None
    revoked: tuple[Permit, ...] | None = None
    entries: tuple[AuditEntry, ...] | None = None
    next_cursor: str | None = None
    session: SessionState | None = None
    value: str | None = None
    state_tag: str | None = None
    changed: bool | None = None
    #: The resource's finished mark (a done release), None when it is not finished.
    done: Done | None = None
    #: An acquire of candidates: the one granted.
    resource: str | None = None

    def page(self) -> Page:
        """This answer as a list or audit page."""
        return Page(leases=self.leases or (), entries=self.entries or (), next_cursor=self.next_cursor)


def _time(value: object) -> datetime | None:
    return datetime.fromisoformat(value.replace("Z", "+00:00")) if isinstance(value, str) else None


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _permits(value: object) -> tuple[Permit, ...]:
    items = value if isinstance(value, list) else []
    return tuple(Permit(holder=str(p.get("holder")), token=_int(p.get("fencingToken")) or 0,
                        expires_at=_time(p.get("expiresAt")) or datetime.min,
                        session=_text_or_none(p.get("session")), value=_text_or_none(p.get("value")))
                 for p in items if isinstance(p, dict))


def _session(value: object) -> SessionState | None:
    if not isinstance(value, dict):
        return None
    items = value.get("leases")
    leases = tuple(SessionPermit(resource=str(p.get("resource")), token=_int(p.get("fencingToken")) or 0,
                                 limit=_int(p.get("limit")) or 1)
                   for p in (items if isinstance(items, list) else []) if isinstance(p, dict))
    return SessionState(id=str(value.get("id")), holder=str(value.get("holder")),
                        expires_at=_time(value.get("expiresAt")) or datetime.min, leases=leases)


def _done(value: object) -> Done | None:
    if not isinstance(value, dict):
        return None
    return Done(holder=str(value.get("holder")), token=_int(value.get("fencingToken")) or 0,
                done_at=_time(value.get("doneAt")) or datetime.min, result=_text_or_none(value.get("result")),
                until=_time(value.get("until")) or datetime.min)


def _members(value: object) -> tuple[Member, ...] | None:
    if not isinstance(value, list):
        return None
    return tuple(Member(resource=str(m.get("resource")), granted=m.get("granted") is True,
                        token=_int(m.get("fencingToken")),
                        holder=m.get("holder") if isinstance(m.get("holder"), str) else None,
                        expires_at=_time(m.get("expiresAt")), limit=_int(m.get("limit")) or 1,
                        holders=_permits(m.get("holders")), waiters=_waiters(m.get("waiters")),
                        done=_done(m.get("done")))
                 for m in value if isinstance(m, dict))


def _waiters(value: object) -> tuple[Waiter, ...]:
    items = value if isinstance(value, list) else []
    return tuple(Waiter(holder=str(w.get("holder")), until=_time(w.get("until")) or datetime.min)
                 for w in items if isinstance(w, dict))


def _entries(value: object) -> tuple[AuditEntry, ...] | None:
    if not isinstance(value, list):
        return None
    return tuple(AuditEntry(id=str(e.get("id")), at=_time(e.get("at")) or datetime.min, actor=str(e.get("actor")),
                            resource=_text_or_none(e.get("resource")), ended=_permits(e.get("ended")),
                            reason=str(e.get("reason")), session=_text_or_none(e.get("session")),
                            reopened=_done(e.get("reopened")))
                 for e in value if isinstance(e, dict))


def _text_or_none(value: object) -> str | None:
    return None if value is None else str(value)


def lease_from(answer: object) -> Lease:
    """Read the `data` of a lease answer; a body of another shape is the service's error."""
    data = answer.get("data") if isinstance(answer, dict) else None
    # A page (list, audit) is about no one resource: it has no `granted` and no permit fields.
    page = isinstance(data, dict) and data.get("op") in ("list", "audit")
    if not isinstance(data, dict) or not (page or isinstance(data.get("granted"), bool)):
        raise ServiceError("the service's answer is not a lease answer", status=200)
    expires = data.get("expiresAt")
    token = data.get("fencingToken")
    holder = data.get("holder")
    witnesses = data.get("witnesses") or []
    current = data.get("current")
    return Lease(
        granted=data.get("granted") is True,
        token=_int(token),
        holder=holder if isinstance(holder, str) else None,
        expires_at=_time(expires),
        rules=tuple(str(w.get("ruleId")) for w in witnesses if isinstance(w, dict)),
        replayed=data.get("replayed") is True,
        limit=_int(data.get("limit")) or 1,
        holders=_permits(data.get("holders")),
        current=current if isinstance(current, bool) else None,
        leases=_members(data.get("leases")),
        queue_position=_int(data.get("queuePosition")),
        revoked=_permits(data["revoked"]) if isinstance(data.get("revoked"), list) else None,
        entries=_entries(data.get("entries")),
        next_cursor=data.get("nextCursor") if isinstance(data.get("nextCursor"), str) else None,
        session=_session(data.get("session")),
        value=_text_or_none(data.get("value")),
        state_tag=_text_or_none(data.get("stateTag")),
        changed=data.get("changed") if isinstance(data.get("changed"), bool) else None,
        done=_done(data.get("done")),
        resource=_text_or_none(data.get("resource")),
    )


def leader_of(lease: Lease) -> Leader | None:
    """The leader a get or watch answer shows (None when nobody holds the resource)."""
    if lease.holder is None or lease.token is None:
        return None
    return Leader(holder=lease.holder, token=lease.token, value=lease.value, expires_at=lease.expires_at)


def set_leases(leases: Sequence[tuple[str, int]]) -> list[dict[str, Any]]:
    """A set's `leases` as sent: each (resource, token)."""
    return [{"resource": resource, "token": token} for resource, token in leases]


def new_request_id() -> str:
    """A request id for one mutation, kept across that mutation's retries."""
    return f"py-{uuid.uuid4().hex}"


def body(op: str, resource: str | None, tenant: str | None, **fields: Any) -> dict[str, Any]:
    """A lease request body: the fields that are set, under the API's names (a set names no
    `resource`, but `resources` or `leases`)."""
    names = {"ttl": "ttlSeconds", "request_id": "requestId", "wait": "waitSeconds", "page_size": "pageSize",
             "state_tag": "stateTag", "keep_done": "keepDoneSeconds"}
    out: dict[str, Any] = {"op": op} if resource is None else {"op": op, "resource": resource}
    if tenant is not None:
        out["tenantId"] = tenant
    for name, value in fields.items():
        if value is not None:
            out[names.get(name, name)] = value
    return out


def safety_margin(ttl: float) -> float:
    """The part of a lease a held lease does not count on: 1% of the TTL plus 250 ms.

    The local deadline is the send time of the last granted acquire or renew plus the TTL minus
    this margin, on this process's monotonic clock: the server started its TTL later than the
    send, so the offsets of the two clocks cancel; the margin covers their rates (1%, ten times
    the worst NTP slew plus quartz drift) and a loaded host's late timers (250 ms). The same rule
    as the Rust client's guard.
    """
    return ttl / 100 + 0.25


@dataclass
class Clock:
    """A held lease's time: its local deadline, and whether (and why) it was lost. A new clock
    starts at its first grant: `clock.granted(sent)`."""

    ttl: int
    deadline: float = -math.inf
    lost_rule: str | None = None
    lost_reason: str | None = None

    @property
    def usable(self) -> float:
        return self.ttl - safety_margin(self.ttl)

    def granted(self, sent: float) -> None:
        """An acquire or renewal sent at `sent` was granted (a loss already judged stays final)."""
        if self.lost_reason is None:
            self.deadline = max(self.deadline, sent + self.usable)

    def next_renewal(self) -> float:
        """When to renew: a third of the way to the deadline, two thirds left for retries."""
        return self.deadline - self.usable + self.usable / 3

    def judge(self, now: float) -> bool:
        """Record the loss if the deadline has passed; whether the lease is lost."""
        if self.lost_reason is None and now >= self.deadline:
            self.lost_reason = "no renewal got through before the local deadline"
        return self.lost_reason is not None

    def refused(self, rule: str) -> None:
        if self.lost_reason is None:
            self.lost_rule = rule
            self.lost_reason = f"a renewal was refused ({rule})"
