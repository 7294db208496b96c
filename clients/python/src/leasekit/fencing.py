"""Fencing at the store: writes that the store itself refuses when they carry a token smaller
than the one it last took (docs/adr/0013-fencing-at-the-store.md).

A fencing token protects only a store that refuses a smaller one. Each helper here makes one
write, atomic in the store (no read-then-write outside it): the store keeps the token that last
wrote beside the data (any other reader can see it) and refuses a write whose token is smaller,
raising `FenceRefused` with both tokens; nothing is written then.

    with client.lease("invoice:INV-1009", holder="worker-1") as held:
        fencing.dynamodb_put(dynamodb, "invoices", {"id": {"S": "INV-1009"}, ...}, held)

Each takes the hold (`HeldLease`, or a `Permit`: resource, token, holder, limit and the client
that granted it). A semaphore's permits are not ordered by who holds now (two live permits have
two tokens, neither stale), so the highest token is no fence there: for a permit of a limit above
1 the helper asks the service first (`check`, signed) and writes only while the permit is
current. That narrows the window to the time between the check and the write, and does not close
it: a permit that lapses in between still writes. Use a lease (limit 1) where a stale write must
never land.

The fence is only as good as the writers that keep it: every write of the data must go through
these helpers. A write or delete that drops the fence (an S3 copy that replaces the metadata, a
delete of the item, row, object or hash) resets it, and any token lands after that. A set's hold
has a token per resource: fence each write with `Permit(resource, held.tokens[resource])`. And
a refusal after the store's client retried on its own (boto3 does, on a 500 or a lost answer) may
follow an earlier attempt of the same write that landed and was then replaced by the larger
token's: the store holds that larger token's write either way.

The stores' clients are the caller's (boto3, psycopg 3, redis-py): this module imports none of
them.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any, Protocol

from ._errors import LeasekitError

#: Where a helper keeps the token that last wrote, unless told otherwise.
FENCE = "fence"
#: The S3 object metadata key that carries it (S3 lower-cases metadata keys).
S3_FENCE = "leasekit-fence"


class FenceRefused(LeasekitError):
    """The store refused a write: its fence (the token that last wrote) is larger than this
    write's token, or (a semaphore's permit) the permit is no longer current. Nothing was
    written."""

    def __init__(self, message: str, *, token: int, found: int | None) -> None:
        super().__init__(message)
        #: The token this write carried.
        self.token = token
        #: The larger token the store holds (None: refused by `check`, the permit is not current).
        self.found = found


class _Checks(Protocol):
    def check(self, resource: str, token: int, *, holder: str | None = None) -> Any: ...


@dataclass(frozen=True)
class Permit:
    """What a fenced write needs of a hold: its token, and for a semaphore's permit (limit > 1)
    the resource, holder and client to ask whether it is still current."""

    resource: str
    token: int
    holder: str | None = None
    limit: int = 1
    client: _Checks | None = None


def permit_of(held: Any) -> Permit:
    """A `HeldLease` (or a `Permit`) as a `Permit`. A set's hold has a token per resource, each
    its own counter's, so it is refused here: pass `Permit(resource, held.tokens[resource])` for
    the resource the write belongs to."""
    if isinstance(held, Permit):
        permit = held
    else:
        if len(held.resources) != 1:
            raise ValueError(f"a set's hold has a token per resource ({', '.join(held.resources)}): fence a "
                             "write with Permit(resource, held.tokens[resource]) of the resource it belongs to")
        permit = Permit(resource=held.resources[0], token=held.token, holder=held.holder, limit=held.limit,
                        client=held._client)
    if isinstance(permit.token, bool) or not isinstance(permit.token, int) or not 1 <= permit.token < 2**63:
        raise ValueError(f"a fencing token is an integer from 1 to 2^63 - 1, not {permit.token!r}")
    return permit


def _current(permit: Permit) -> bool:
    """Whether the store's fence decides: a lease's token is its own fence (True); a semaphore's
    permit must be current now (the service says so, signed), and then its write is not compared
    with the store's fence, which another live permit's larger token may hold (False)."""
    if permit.limit <= 1:
        return True
    if permit.client is None:
        raise ValueError("a semaphore's permit needs the client that granted it, to check it")
    answer = permit.client.check(permit.resource, permit.token, holder=permit.holder)
    if inspect.isawaitable(answer):
        # An AsyncClient's check cannot be awaited in these (synchronous) helpers.
        if inspect.iscoroutine(answer):
            answer.close()  # never to be awaited: closed, so that Python does not warn of it
        raise TypeError("a semaphore's permit held with an AsyncClient: give the helper a Permit whose client is "
                        "a (synchronous) Client, to check it with")
    if not answer.current:
        raise FenceRefused(f"permit {permit.token} of {permit.resource} is no longer current: nothing written",
                           token=permit.token, found=None)
    return False


def _refused(where: str, token: int, found: int | None) -> FenceRefused:
    holds = f"fence {found}, larger" if found is not None else "a larger fence"
    return FenceRefused(f"{where} holds {holds} than this write's token {token}: nothing written",
                        token=token, found=found)


#: A fence as these helpers write it: a base-10 integer, no sign, no leading zero.
_TOKEN = re.compile(r"(0|[1-9][0-9]*)")


def _fence_in(where: str, token: int, value: Any) -> int | None:
    """A stored fence (as text) as an integer, or None when there is none. One that is not a
    plain base-10 integer was not written by these helpers: the write is refused, naming it."""
    if value is None:
        return None
    text = value.decode() if isinstance(value, bytes) else str(value)
    if _TOKEN.fullmatch(text):
        return int(text)
    raise FenceRefused(f"{where} carries a fence that is not a token ({text!r}): nothing written",
                       token=token, found=None)


def _number_in(value: str | None) -> int | None:
    """A fence DynamoDB handed back (a number, in whatever form the store keeps it: 100, 1E+2),
    as an integer; None when it is none or not integral."""
    try:
        number = Decimal(value) if value is not None else None
    except InvalidOperation:
        return None
    return int(number) if number is not None and number.is_finite() and number == number.to_integral_value() else None


def dynamodb_put(client: Any, table: str, item: dict[str, Any], held: Any, *, fence: str = FENCE) -> None:
    """Put `item` (DynamoDB's attribute-value form) into `table` with `fence` set to the token,
    unless the stored item's fence is larger: one conditional PutItem. `client` is a boto3
    DynamoDB client."""
    permit = permit_of(held)
    guarded = _current(permit)
    condition: dict[str, Any] = {
        "ConditionExpression": "attribute_not_exists(#f) OR #f <= :t",
        "ExpressionAttributeNames": {"#f": fence},
        "ExpressionAttributeValues": {":t": {"N": str(permit.token)}},
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    } if guarded else {}
    try:
        client.put_item(TableName=table, Item={**item, fence: {"N": str(permit.token)}}, **condition)
    except client.exceptions.ConditionalCheckFailedException as e:
        # The store compared the numbers: its fence is larger, whatever form it is kept in.
        old = e.response.get("Item", {}).get(fence, {}).get("N")
        raise _refused(f"the item in {table}", permit.token, _number_in(old)) from None


def postgres_upsert(conn: Any, table: str, key: dict[str, Any], values: dict[str, Any], held: Any, *,
                    fence: str = FENCE) -> None:
    """Insert or update the row of `key` (column -> value) in `table` with `values` and `fence` set
    to the token, unless the stored row's fence is larger: one INSERT ... ON CONFLICT DO UPDATE
    ... WHERE statement (a row whose fence is NULL is written, as one without a fence). `conn` is a
    psycopg 3 connection (committed by the caller, or autocommit); the key columns need a unique
    constraint, and the fence column is an integer one (`bigint`: a text column would compare
    "10" below "9"). Table and column names are quoted identifiers (one name each: a
    `schema.table` is not split)."""
    from psycopg import sql

    permit = permit_of(held)
    for name in (table, fence, *key, *values):
        if "\0" in name:
            raise ValueError(f"a PostgreSQL name cannot hold NUL: {name!r}")
    guarded = _current(permit)

    def ident(name: str) -> Any:
        # psycopg reads % in the composed statement as a placeholder's start, quoted names too.
        return sql.Identifier(name.replace("%", "%%"))

    columns = [*key, *values, fence]
    params = [*key.values(), *values.values(), permit.token]
    updates = [*values, fence]
    statement = sql.SQL(
        "INSERT INTO {table} ({columns}) VALUES ({params}) ON CONFLICT ({key}) DO UPDATE SET {updates} "
        + ("WHERE {table}.{fence} IS NULL OR {table}.{fence} <= EXCLUDED.{fence} " if guarded else "")
        + "RETURNING {fence}"
    ).format(
        table=ident(table),
        columns=sql.SQL(", ").join(map(ident, columns)),
        params=sql.SQL(", ").join(sql.Placeholder() * len(params)),
        key=sql.SQL(", ").join(map(ident, key)),
        updates=sql.SQL(", ").join(sql.SQL("{c} = EXCLUDED.{c}").format(c=ident(c)) for c in updates),
        fence=ident(fence),
    )
    with conn.cursor() as cur:
        cur.execute(statement, params)
        if cur.fetchone() is not None:
            return
        where = sql.SQL(" AND ").join(sql.SQL("{c} = %s").format(c=ident(c)) for c in key)
        cur.execute(sql.SQL("SELECT {fence} FROM {table} WHERE {where}").format(
            fence=ident(fence), table=ident(table), where=where), list(key.values()))
        row = cur.fetchone()
    raise _refused(f"the row of {table}", permit.token, row[0] if row else None)


def s3_put(client: Any, bucket: str, key: str, body: bytes, held: Any, *, attempts: int = 5) -> None:
    """Write object `key` with `body` and the token in its metadata (`leasekit-fence`), unless the
    current object carries a larger one. S3 cannot compare numbers: the helper reads the object's
    ETag and fence (HEAD), then writes on condition that the object is still that one (IfMatch on
    the ETag; IfNoneMatch "*" when there was none), so a write in between fails the condition and
    the helper reads again (`attempts` times at most). `client` is a boto3 S3 client.

    The ETag is the MD5 of the bytes, not of the metadata: a newer write that leaves the very
    bytes read (the same content again, or changed and changed back) between the HEAD and the
    PUT does not fail the condition, and this write then lands over it. Put the token in the
    body (so that no two tokens write the same bytes) and that cannot happen
    (docs/adr/0013-fencing-at-the-store.md)."""
    permit = permit_of(held)
    guarded = _current(permit)
    for _ in range(attempts):
        try:
            head = client.head_object(Bucket=bucket, Key=key)
            etag: str | None = head["ETag"]
            stored = head.get("Metadata", {}).get(S3_FENCE)
        except client.exceptions.ClientError as e:
            if e.response.get("Error", {}).get("Code") not in ("404", "NoSuchKey", "NotFound"):
                raise
            etag, stored = None, None
        found = _fence_in(f"s3://{bucket}/{key}", permit.token, stored) if guarded else None
        if found is not None and found > permit.token:
            raise _refused(f"s3://{bucket}/{key}", permit.token, found)
        condition = {"IfMatch": etag} if etag is not None else {"IfNoneMatch": "*"}
        try:
            client.put_object(Bucket=bucket, Key=key, Body=body, Metadata={S3_FENCE: str(permit.token)}, **condition)
            return
        except client.exceptions.ClientError as e:
            if e.response.get("Error", {}).get("Code") not in ("PreconditionFailed", "ConditionalRequestConflict"):
                raise
    raise FenceRefused(f"s3://{bucket}/{key} kept changing: nothing written", token=permit.token, found=None)


#: Set the hash's value and fence unless its fence is larger; answer the larger fence if so (or
#: the stored one, marked, when it is not a token). Lua's numbers are doubles, exact only below
#: 2^53: the fences are compared as the decimal strings they are, by length and then by digits.
_REDIS_SCRIPT = """
local f = redis.call('HGET', KEYS[1], ARGV[3])
if ARGV[4] == '1' and f then
  if not string.match(f, '^0$') and not string.match(f, '^[1-9][0-9]*$') then return {f} end
  local t = ARGV[1]
  if #f > #t or (#f == #t and f > t) then return f end
end
redis.call('HSET', KEYS[1], ARGV[3], ARGV[1], 'value', ARGV[2])
return false
"""


def redis_set(client: Any, key: str, value: str | bytes, held: Any, *, fence: str = FENCE) -> None:
    """Set hash `key`'s `value` field and its `fence` field to the token, unless the stored fence
    is larger: one script, atomic in Redis. `client` is a redis-py client."""
    permit = permit_of(held)
    guarded = _current(permit)
    found = client.eval(_REDIS_SCRIPT, 1, key, str(permit.token), value, fence, "1" if guarded else "0")
    if isinstance(found, list):  # a stored fence that is not a token
        raise FenceRefused(f"redis key {key} carries a fence that is not a token ({found[0]!r}): nothing written",
                           token=permit.token, found=None)
    if found is not None:
        raise _refused(f"redis key {key}", permit.token, _fence_in(f"redis key {key}", permit.token, found))
