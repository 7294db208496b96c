"""What the service answers, as types; and the rules a held lease keeps time by."""

from __future__ import annotations

import math
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ._errors import ServiceError


@dataclass(frozen=True)
class Lease:
    """A lease as the service answered it.

    `granted`: acquire/renew: you hold it now; release: it was released; get: someone holds it.
    `token`, `holder`, `expires_at`: the lease as it stands after the call (None when free).
    `rules`: why the call did not do what was asked (e.g. LEASE_HELD, TOKEN_MISMATCH), else empty.
    `replayed`: this is the stored answer of an earlier call with the same request id.
    """

    granted: bool
    token: int | None
    holder: str | None
    expires_at: datetime | None
    rules: tuple[str, ...]
    replayed: bool


def lease_from(answer: object) -> Lease:
    """Read the `data` of a lease answer; a body of another shape is the service's error."""
    data = answer.get("data") if isinstance(answer, dict) else None
    if not isinstance(data, dict) or not isinstance(data.get("granted"), bool):
        raise ServiceError("the service's answer is not a lease answer", status=200)
    expires = data.get("expiresAt")
    token = data.get("fencingToken")
    holder = data.get("holder")
    witnesses = data.get("witnesses") or []
    return Lease(
        granted=data["granted"],
        token=token if isinstance(token, int) else None,
        holder=holder if isinstance(holder, str) else None,
        expires_at=datetime.fromisoformat(expires.replace("Z", "+00:00")) if isinstance(expires, str) else None,
        rules=tuple(str(w.get("ruleId")) for w in witnesses if isinstance(w, dict)),
        replayed=data.get("replayed") is True,
    )


def new_request_id() -> str:
    """A request id for one mutation, kept across that mutation's retries."""
    return f"py-{uuid.uuid4().hex}"


def body(op: str, resource: str, tenant: str | None, **fields: Any) -> dict[str, Any]:
    """A lease request body: the fields that are set, under the API's names."""
    names = {"ttl": "ttlSeconds", "request_id": "requestId"}
    out: dict[str, Any] = {"op": op, "resource": resource}
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
