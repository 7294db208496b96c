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

The stores' clients are the caller's (boto3, psycopg 3, redis-py): this module imports none of
them.
"""

from __future__ import annotations

from dataclasses import dataclass
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
    """A `HeldLease` (or a `Permit`) as a `Permit`."""
    if isinstance(held, Permit):
        return held
    return Permit(resource=held.resources[0], token=held.token, holder=held.holder, limit=held.limit,
                  client=held._client)


def _current(permit: Permit) -> bool:
    """Whether the store's fence decides: a lease's token is its own fence (True); a semaphore's
    permit must be current now (the service says so, signed), and then its write is not compared
    with the store's fence, which another live permit's larger token may hold (False)."""
    if permit.limit <= 1:
        return True
    if permit.client is None:
        raise ValueError("a semaphore's permit needs the client that granted it, to check it")
    answer = permit.client.check(permit.resource, permit.token, holder=permit.holder)
    if not answer.current:
        raise FenceRefused(f"permit {permit.token} of {permit.resource} is no longer current: nothing written",
                           token=permit.token, found=None)
    return False


def _refused(where: str, token: int, found: int | None) -> FenceRefused:
    return FenceRefused(f"{where} holds fence {found}, larger than this write's token {token}: nothing written",
                        token=token, found=found)


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
        old = e.response.get("Item", {}).get(fence, {}).get("N")
        raise _refused(f"the item in {table}", permit.token, int(old) if old is not None else None) from None


def postgres_upsert(conn: Any, table: str, key: dict[str, Any], values: dict[str, Any], held: Any, *,
                    fence: str = FENCE) -> None:
    """Insert or update the row of `key` (column -> value) in `table` with `values` and `fence` set
    to the token, unless the stored row's fence is larger: one INSERT ... ON CONFLICT DO UPDATE
    ... WHERE statement. `conn` is a psycopg 3 connection (committed by the caller, or autocommit);
    the key columns need a unique constraint. Table and column names are quoted identifiers."""
    from psycopg import sql

    permit = permit_of(held)
    guarded = _current(permit)
    columns = [*key, *values, fence]
    params = [*key.values(), *values.values(), permit.token]
    updates = [*values, fence]
    statement = sql.SQL(
        "INSERT INTO {table} ({columns}) VALUES ({params}) ON CONFLICT ({key}) DO UPDATE SET {updates} "
        + ("WHERE {table}.{fence} <= EXCLUDED.{fence} " if guarded else "")
        + "RETURNING {fence}"
    ).format(
        table=sql.Identifier(table),
        columns=sql.SQL(", ").join(map(sql.Identifier, columns)),
        params=sql.SQL(", ").join(sql.Placeholder() * len(params)),
        key=sql.SQL(", ").join(map(sql.Identifier, key)),
        updates=sql.SQL(", ").join(sql.SQL("{c} = EXCLUDED.{c}").format(c=sql.Identifier(c)) for c in updates),
        fence=sql.Identifier(fence),
    )
    with conn.cursor() as cur:
        cur.execute(statement, params)
        if cur.fetchone() is not None:
            return
        where = sql.SQL(" AND ").join(sql.SQL("{c} = %s").format(c=sql.Identifier(c)) for c in key)
        cur.execute(sql.SQL("SELECT {fence} FROM {table} WHERE {where}").format(
            fence=sql.Identifier(fence), table=sql.Identifier(table), where=where), list(key.values()))
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
        if guarded and stored is not None and int(stored) > permit.token:
            raise _refused(f"s3://{bucket}/{key}", permit.token, int(stored))
        condition = {"IfMatch": etag} if etag is not None else {"IfNoneMatch": "*"}
        try:
            client.put_object(Bucket=bucket, Key=key, Body=body, Metadata={S3_FENCE: str(permit.token)}, **condition)
            return
        except client.exceptions.ClientError as e:
            if e.response.get("Error", {}).get("Code") not in ("PreconditionFailed", "ConditionalRequestConflict"):
                raise
    raise FenceRefused(f"s3://{bucket}/{key} kept changing: nothing written", token=permit.token, found=None)


#: Set the hash's value and fence unless its fence is larger; answer the larger fence if so.
_REDIS_SCRIPT = """
local f = redis.call('HGET', KEYS[1], ARGV[3])
if ARGV[4] == '1' and f and tonumber(f) > tonumber(ARGV[1]) then return f end
redis.call('HSET', KEYS[1], ARGV[3], ARGV[1], 'value', ARGV[2])
return false
"""


def redis_set(client: Any, key: str, value: str | bytes, held: Any, *, fence: str = FENCE) -> None:
    """Set hash `key`'s `value` field and its `fence` field to the token, unless the stored fence
    is larger: one script, atomic in Redis. `client` is a redis-py client."""
    permit = permit_of(held)
    guarded = _current(permit)
    found = client.eval(_REDIS_SCRIPT, 1, key, permit.token, value, fence, "1" if guarded else "0")
    if found is not None:
        raise _refused(f"redis key {key}", permit.token, int(found))
