"""Fencing at the store from Python (`leasekit.fencing`), against real stores started here:
DynamoDB and S3 on moto's server, DynamoDB on the embedded store (`leasekit local-aws`),
PostgreSQL (a throwaway cluster: Debian's initdb and pg_ctl), Redis (Debian's redis-server).
For each store: A acquires (token n) and writes, pauses past its lease, B acquires (token n+1)
and writes, and A's late write is refused with `FenceRefused` naming both tokens while the store
keeps B's data; two writers with alternating tokens race for 10 s while a reader watches: the
stored fence never goes down, and no write below it lands. A semaphore's permit is checked with
the service instead."""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, NoReturn

import pytest

from leasekit import Client
from leasekit.fencing import FenceRefused, Permit, dynamodb_put, postgres_upsert, redis_set, s3_put

from conftest import API_KEY, ROOT, running
from test_client import name

# Debian's PostgreSQL (its newest major version here).
PG_BIN = max(glob.glob("/usr/lib/postgresql/*/bin"), default="/usr/lib/postgresql/15/bin",
             key=lambda p: int(p.split("/")[4]) if p.split("/")[4].isdigit() else 0)


def missing(why: str) -> NoReturn:
    """A store this machine lacks: skipped, but a failure under tests/run.sh (which installs them
    and sets LEASEKIT_REQUIRE_STORES), so that CI never passes without the stores it tests."""
    if os.environ.get("LEASEKIT_REQUIRE_STORES"):
        pytest.fail(why)
    pytest.skip(why)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def wait_for_port(port: int, process: subprocess.Popen[bytes], what: str) -> None:
    for _ in range(200):
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited: {process.returncode}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError(f"{what} did not listen on {port}")


@pytest.fixture(scope="module")
def moto_url() -> Iterator[str]:
    try:
        import boto3  # noqa: F401
    except ImportError:
        missing("boto3 is not installed (pip install 'leasekit[fencing]')")
    port = free_port()
    process = subprocess.Popen([sys.executable, os.path.join(ROOT, "tests", "moto_server.py"), str(port)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for_port(port, process, "moto")
    yield f"http://127.0.0.1:{port}"
    process.terminate()
    process.wait(10)


def aws(service: str, url: str) -> Any:
    import boto3

    return boto3.client(service, endpoint_url=url, region_name="us-east-1", aws_access_key_id="test",
                        aws_secret_access_key="test")


@pytest.fixture(scope="module")
def postgres() -> Iterator[Any]:
    try:
        import psycopg
    except ImportError:
        missing("psycopg is not installed (pip install 'leasekit[fencing]')")
    if not os.path.exists(os.path.join(PG_BIN, "initdb")):
        missing("PostgreSQL is not installed (apt-get install postgresql)")
    data = tempfile.mkdtemp(prefix="pg-")
    port = free_port()
    # initdb refuses to run as root: the cluster runs as nobody when this test is root (setpriv
    # execs the server itself, so that terminating the process ends it).
    as_nobody = (["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--"]
                 if os.geteuid() == 0 else [])
    if as_nobody:
        shutil.chown(data, user="nobody")
    subprocess.run([*as_nobody, f"{PG_BIN}/initdb", "-D", data, "-A", "trust", "-U", "postgres"], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    process = subprocess.Popen([*as_nobody, f"{PG_BIN}/postgres", "-D", data, "-p", str(port), "-k", data,
                                "-h", "127.0.0.1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # The port opens before the server takes queries ("the database system is starting up"), so
    # readiness is a connection that succeeds, not an open port.
    deadline = time.monotonic() + 60
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"postgres exited: {process.returncode}")
        try:
            conn = psycopg.connect(f"host=127.0.0.1 port={port} user=postgres dbname=postgres", autocommit=True,
                                   connect_timeout=5)
            break
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
    yield conn
    conn.close()
    process.terminate()
    process.wait(10)
    shutil.rmtree(data, ignore_errors=True)


@pytest.fixture(scope="module")
def redis_client() -> Iterator[Any]:
    try:
        import redis
    except ImportError:
        missing("redis is not installed (pip install 'leasekit[fencing]')")
    binary = shutil.which("redis-server")
    if binary is None:
        missing("redis-server is not installed (apt-get install redis-server)")
    port = free_port()
    process = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for_port(port, process, "redis")
    yield redis.Redis(host="127.0.0.1", port=port)
    process.terminate()
    process.wait(10)


def paused_past_the_lease(server: str, write: Callable[[Any], None], stored: Callable[[], Any]) -> None:
    """A writes under its lease, pauses past it; B acquires the next token and writes; A's late
    write is refused naming both tokens, and the store keeps B's data."""
    client = Client(server, api_key=API_KEY, tenant=name("fence"))
    resource = name("doc")
    a = client.acquire(resource, holder="A", ttl=1)
    assert a.granted and a.token is not None
    a_permit = Permit(resource=resource, token=a.token)
    write(a_permit)
    time.sleep(1.3)  # A is paused past its lease
    b = client.acquire(resource, holder="B", ttl=30)
    assert b.granted and b.token == a.token + 1
    write(Permit(resource=resource, token=b.token))
    before = stored()
    with pytest.raises(FenceRefused) as refused:
        write(a_permit)
    assert (refused.value.token, refused.value.found) == (a.token, b.token)
    assert stored() == before, "nothing written"


#: How long the writers race.
RACE_SECONDS = 10


def race(write: Callable[[int], None], read: Callable[[], tuple[int, int] | None]) -> None:
    """Two writers with alternating tokens (every other one well below the latest) for
    RACE_SECONDS, and a reader. `write(token)` makes a fenced write whose data is the token;
    `read()` answers the stored (fence, data) in one request. The fence the reader sees never goes
    down, the data is always the write of the token the fence holds, a write that lands is never
    below the stored fence, and every refusal names a larger one."""
    tokens = iter(range(1, 10**9))
    lock = threading.Lock()
    counts = {"landed": 0, "refused": 0, "reads": 0}
    failures: list[BaseException] = []
    stop = time.monotonic() + RACE_SECONDS

    def guarded(body: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                body()
            except BaseException as e:  # noqa: BLE001 - handed to the test's thread
                failures.append(e)
        return run

    def writer() -> None:
        while time.monotonic() < stop and not failures:
            with lock:
                n = next(tokens)
            token = n if n % 2 else max(1, n - 7)
            try:
                write(token)
            except FenceRefused as e:
                assert e.found is None or e.found > token, f"{token} refused by {e.found}"
                with lock:
                    counts["refused"] += 1
                continue
            stored = read()
            assert stored is not None and stored[0] >= token, f"token {token} landed below fence {stored}"
            with lock:
                counts["landed"] += 1

    def reader() -> None:
        last = 0
        while time.monotonic() < stop and not failures:
            stored = read()
            if stored is None:
                continue
            fence, data = stored
            assert fence >= last, f"the fence went down: {last} then {fence}"
            assert data == fence, f"the data ({data}) is not the write of the fence's token ({fence})"
            last = fence
            counts["reads"] += 1

    threads = [threading.Thread(target=guarded(f)) for f in (writer, writer, reader)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if failures:
        raise failures[0]
    assert counts["landed"] > 10 and counts["refused"] > 10 and counts["reads"] > 10, counts
    print(f"race: {counts}")


@pytest.fixture(scope="module")
def local_aws() -> Iterator[str]:
    """`leasekit local-aws`: DynamoDB on the embedded store, in a data dir of its own."""
    data = tempfile.mkdtemp(prefix="local-aws-")
    yield from running("local-aws", "--addr", "127.0.0.1:0", "--data-dir", data)
    shutil.rmtree(data, ignore_errors=True)


@pytest.fixture(params=["moto", "local-aws"])
def dynamodb_url(request: pytest.FixtureRequest) -> str:
    """DynamoDB on moto's server, and on the embedded store (`leasekit local-aws`)."""
    url: str = request.getfixturevalue("moto_url" if request.param == "moto" else "local_aws")
    return url


def create_table(ddb: Any, table: str) -> None:
    ddb.create_table(TableName=table, KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
                     AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
                     BillingMode="PAY_PER_REQUEST")


def test_dynamodb(server: str, dynamodb_url: str) -> None:
    ddb = aws("dynamodb", dynamodb_url)
    table = name("docs")
    create_table(ddb, table)

    def item() -> Any:
        return ddb.get_item(TableName=table, Key={"id": {"S": "doc"}}, ConsistentRead=True).get("Item")

    def write(permit: Permit) -> None:
        dynamodb_put(ddb, table, {"id": {"S": "doc"}, "by": {"N": str(permit.token)}}, permit)

    paused_past_the_lease(server, write, item)
    assert item()["fence"]["N"] == item()["by"]["N"], "the fence is stored beside the data"

    def read() -> tuple[int, int] | None:
        got = ddb.get_item(TableName=table, Key={"id": {"S": "race"}}, ConsistentRead=True).get("Item")
        return None if got is None else (int(got["fence"]["N"]), int(got["by"]["N"]))

    race(lambda t: dynamodb_put(ddb, table, {"id": {"S": "race"}, "by": {"N": str(t)}}, Permit("race", t)), read)


def test_s3(server: str, moto_url: str) -> None:
    s3 = aws("s3", moto_url)
    bucket = name("bucket").lower()
    s3.create_bucket(Bucket=bucket)

    def body() -> bytes:
        got: bytes = s3.get_object(Bucket=bucket, Key="doc")["Body"].read()
        return got

    paused_past_the_lease(server, lambda p: s3_put(s3, bucket, "doc", f"by {p.token}".encode(), p), body)

    def read() -> tuple[int, int] | None:
        try:
            got = s3.get_object(Bucket=bucket, Key="race")
        except s3.exceptions.NoSuchKey:
            return None
        return int(got["Metadata"]["leasekit-fence"]), int(got["Body"].read())

    race(lambda t: s3_put(s3, bucket, "race", str(t).encode(), Permit("race", t)), read)


def test_postgres(server: str, postgres: Any) -> None:
    table = name("docs").replace("-", "_")
    postgres.execute(f'CREATE TABLE "{table}" (id text PRIMARY KEY, body text, fence bigint NOT NULL)')

    def row() -> Any:
        return postgres.execute(f'SELECT body, fence FROM "{table}" WHERE id = %s', ["doc"]).fetchone()

    paused_past_the_lease(
        server, lambda p: postgres_upsert(postgres, table, {"id": "doc"}, {"body": f"by {p.token}"}, p), row)

    def read() -> tuple[int, int] | None:
        got = postgres.execute(f'SELECT fence, body FROM "{table}" WHERE id = %s', ["race"]).fetchone()
        return None if got is None else (int(got[0]), int(got[1]))

    race(lambda t: postgres_upsert(postgres, table, {"id": "race"}, {"body": str(t)}, Permit("race", t)), read)


def test_redis(server: str, redis_client: Any) -> None:
    key = name("doc")
    paused_past_the_lease(server, lambda p: redis_set(redis_client, key, f"by {p.token}", p),
                          lambda: redis_client.hgetall(key))

    def read() -> tuple[int, int] | None:
        fence, value = redis_client.hmget(key + ":race", ["fence", "value"])
        return None if fence is None else (int(fence), int(value))

    race(lambda t: redis_set(redis_client, key + ":race", str(t), Permit("race", t)), read)


def test_a_semaphores_permit_writes_only_while_current(server: str, moto_url: str) -> None:
    """Two live permits have two tokens, neither stale: the helper asks `check` instead, and
    refuses (found None) once the permit is not current, nothing written."""
    client = Client(server, api_key=API_KEY, tenant=name("fence"))
    ddb = aws("dynamodb", moto_url)
    table = name("pool")
    create_table(ddb, table)
    pool = name("pool")
    with client.lease(pool, holder="A", ttl=30, limit=2) as a, client.lease(pool, holder="B", ttl=30, limit=2) as b:
        dynamodb_put(ddb, table, {"id": {"S": "a"}}, b)  # token 2
        dynamodb_put(ddb, table, {"id": {"S": "a"}}, a)  # token 1, yet current: written
        a_permit = Permit(pool, a.token, holder="A", limit=2, client=client)
    with pytest.raises(FenceRefused) as refused:
        dynamodb_put(ddb, table, {"id": {"S": "a"}, "late": {"S": "yes"}}, a_permit)
    assert refused.value.found is None
    assert "late" not in ddb.get_item(TableName=table, Key={"id": {"S": "a"}})["Item"]


# What the attack on the helpers found (issue #46), each refused or written as promised now.


def test_a_sets_hold_is_refused_and_each_resource_fenced_with_its_own_token(server: str, moto_url: str) -> None:
    """A set's hold has a token per resource, each its own counter's: fencing with the first
    one's locked the second resource's row to a token its holders had not reached."""
    client = Client(server, api_key=API_KEY, tenant=name("fence"))
    ddb = aws("dynamodb", moto_url)
    table = name("sets")
    create_table(ddb, table)
    a, b = name("a"), name("b")
    for _ in range(3):  # a's counter ahead of b's
        taken = client.acquire(a, holder="X").token
        assert taken is not None
        client.release(a, holder="X", token=taken)
    with client.lease_all([a, b], holder="X") as held:
        assert held.tokens[a] > held.tokens[b]
        with pytest.raises(ValueError, match="a set's hold has a token per resource"):
            dynamodb_put(ddb, table, {"id": {"S": b}}, held)
        assert "Item" not in ddb.get_item(TableName=table, Key={"id": {"S": b}}), "nothing written"
        dynamodb_put(ddb, table, {"id": {"S": b}}, Permit(b, held.tokens[b]))
    y = client.acquire(b, holder="Y").token
    assert y is not None
    dynamodb_put(ddb, table, {"id": {"S": b}}, Permit(b, y))  # b's next holder writes


def test_tokens_are_positive_integers() -> None:
    for token in (0, -1, 2**63, True, 1.5):
        with pytest.raises(ValueError, match="a fencing token is an integer"):
            redis_set(None, "k", "v", Permit("r", token))  # type: ignore[arg-type]


def test_redis_compares_tokens_past_2_to_the_53_exactly(redis_client: Any) -> None:
    """Lua's numbers are doubles: 2^53 + 1 and 2^53 were one number there, and the fence went
    down."""
    key = name("big")
    redis_set(redis_client, key, "newer", Permit("r", 2**53 + 1))
    with pytest.raises(FenceRefused) as refused:
        redis_set(redis_client, key, "older", Permit("r", 2**53))
    assert (refused.value.token, refused.value.found) == (2**53, 2**53 + 1)
    redis_set(redis_client, key, "newest", Permit("r", 2**62))
    with pytest.raises(FenceRefused):
        redis_set(redis_client, key, "older", Permit("r", 2**62 - 1))
    assert redis_client.hgetall(key) == {b"fence": str(2**62).encode(), b"value": b"newest"}


def test_a_stored_fence_that_is_not_a_token_refuses_with_the_typed_error(redis_client: Any, moto_url: str) -> None:
    """Not a ValueError, TypeError or a store's error: FenceRefused, found None, nothing written."""
    key = name("odd")
    for odd in ("1e3", "0x10", "abc", "012"):
        redis_client.hset(key, mapping={"fence": odd, "value": "theirs"})
        with pytest.raises(FenceRefused, match="not a token") as refused:
            redis_set(redis_client, key, "mine", Permit("r", 5))
        assert refused.value.found is None
        assert redis_client.hget(key, "value") == b"theirs"
    s3 = aws("s3", moto_url)
    bucket = name("odd").lower()
    s3.create_bucket(Bucket=bucket)
    for odd in ("abc", "1e3", "12.0", "1_000", ""):
        s3.put_object(Bucket=bucket, Key="doc", Body=b"theirs", Metadata={"leasekit-fence": odd})
        with pytest.raises(FenceRefused, match="not a token"):
            s3_put(s3, bucket, "doc", b"mine", Permit("r", 5000))
        assert s3.get_object(Bucket=bucket, Key="doc")["Body"].read() == b"theirs"
    # DynamoDB compares the numbers itself; a fence kept as 1E+2 is named as 100.
    ddb = aws("dynamodb", moto_url)
    table = name("odd")
    create_table(ddb, table)
    ddb.put_item(TableName=table, Item={"id": {"S": "doc"}, "fence": {"N": "1E+2"}})
    with pytest.raises(FenceRefused) as refused:
        dynamodb_put(ddb, table, {"id": {"S": "doc"}}, Permit("r", 99))
    assert refused.value.found == 100
    ddb.put_item(TableName=table, Item={"id": {"S": "doc"}, "fence": {"N": "100.5"}})
    with pytest.raises(FenceRefused) as refused:
        dynamodb_put(ddb, table, {"id": {"S": "doc"}}, Permit("r", 100))
    assert refused.value.found is None


def test_postgres_writes_a_null_fence_and_quotes_every_name(postgres: Any) -> None:
    """A fence column added by a migration starts NULL: such a row was never writable. Names
    with % were read as placeholders, and a NUL cut a name short."""
    table = name("legacy").replace("-", "_") + "%x"
    postgres.execute(f'CREATE TABLE "{table}" (id text PRIMARY KEY, body text)')
    postgres.execute(f'INSERT INTO "{table}" VALUES (\'doc\', \'before\')')
    postgres.execute(f'ALTER TABLE "{table}" ADD COLUMN fence bigint')
    postgres_upsert(postgres, table, {"id": "doc"}, {"body": "fenced"}, Permit("r", 7))
    assert postgres.execute(f'SELECT body, fence FROM "{table}"').fetchall() == [("fenced", 7)]
    with pytest.raises(FenceRefused) as refused:
        postgres_upsert(postgres, table, {"id": "doc"}, {"body": "stale"}, Permit("r", 6))
    assert refused.value.found == 7
    for bad in (table + "\0_archive", "fence\0x"):
        with pytest.raises(ValueError, match="NUL"):
            postgres_upsert(postgres, bad if bad.startswith(table) else table, {"id": "doc"}, {"body": "x"},
                            Permit("r", 8), fence="fence" if bad.startswith(table) else bad)
    assert postgres.execute(f'SELECT body, fence FROM "{table}"').fetchall() == [("fenced", 7)]


def test_an_async_clients_permit_is_refused_plainly(moto_url: str) -> None:
    """Its check is a coroutine these synchronous helpers cannot await: a TypeError saying what
    to pass, rather than an AttributeError from inside; nothing written."""
    from leasekit import AsyncClient

    ddb = aws("dynamodb", moto_url)
    table = name("async")
    create_table(ddb, table)
    permit = Permit("pool", 3, holder="A", limit=2, client=AsyncClient("http://127.0.0.1:9", api_key=API_KEY))
    with pytest.raises(TypeError, match="AsyncClient"):
        dynamodb_put(ddb, table, {"id": {"S": "doc"}}, permit)
    assert "Item" not in ddb.get_item(TableName=table, Key={"id": {"S": "doc"}})
