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

from conftest import API_KEY, BIN, ROOT
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
    wait_for_port(port, process, "postgres")
    conn = psycopg.connect(f"host=127.0.0.1 port={port} user=postgres dbname=postgres", autocommit=True)
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
    process = subprocess.Popen([BIN, "local-aws", "--addr", "127.0.0.1:0", "--data-dir", data],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert process.stdout is not None
    url = process.stdout.readline().decode().strip()
    assert url.startswith("http://127.0.0.1:"), url
    yield url
    process.terminate()
    process.wait(10)
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
