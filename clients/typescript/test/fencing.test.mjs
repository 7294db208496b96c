// Fencing at the store (dynamodbPut, s3Put, postgresUpsert), against real stores started here:
// DynamoDB and S3 on moto's server (LEASEKIT_PYTHON runs LEASEKIT_MOTO_SERVER), DynamoDB again
// on `leasekit local-aws` (the embedded store), and PostgreSQL (a throwaway cluster of Debian's).
// For each store: A acquires (token n) and writes, pauses past its lease, B acquires (token n+1)
// and writes, and A's late write is refused with `FenceRefused` naming both tokens while the
// store keeps B's data; then two writers with alternating tokens race a monitor for 10 s (every
// store at once): the stored fence never goes down and the data is always its writer's. A
// semaphore's permit is checked with the service instead. A store this machine lacks is
// skipped, but fails the run when LEASEKIT_REQUIRE_STORES is set (tests/run.sh sets it).

import assert from "node:assert/strict";
import { execFile, spawn } from "node:child_process";
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { after, before, test } from "node:test";
import { promisify } from "node:util";
import { CreateTableCommand, DynamoDBClient, GetItemCommand } from "@aws-sdk/client-dynamodb";
import { CreateBucketCommand, GetObjectCommand, HeadObjectCommand, S3Client } from "@aws-sdk/client-s3";
import pg from "pg";
import { FenceRefused, LeaseClient, dynamodbPut, postgresUpsert, s3Put } from "leasekit";
import { API_KEY, name, serve, sleep } from "./support.mjs";

const run = promisify(execFile);
const RACE_MS = 10_000;

// --- The stores, each started once (at `before`, all at once) and stopped at the end.

class Missing extends Error {}
const stops = [];
const once = (start) => {
  let started;
  return () => (started ??= start());
};

async function freePort() {
  const probe = net.createServer();
  await new Promise((resolve) => probe.listen(0, "127.0.0.1", resolve));
  const { port } = probe.address();
  await new Promise((resolve) => probe.close(resolve));
  return port;
}

async function waitForPort(port, child, what) {
  let exited = null;
  child.once("exit", (code) => (exited = code ?? "a signal"));
  for (let i = 0; i < 200; i++) {
    if (exited !== null) throw new Error(`${what} exited: ${exited}`);
    const open = await new Promise((resolve) => {
      const socket = net.connect(port, "127.0.0.1");
      socket.once("connect", () => socket.end(() => resolve(true)));
      socket.once("error", () => resolve(false));
    });
    if (open) return;
    await sleep(50);
  }
  throw new Error(`${what} did not listen on ${port}`);
}

/** Stop `child` (SIGTERM) and wait for it. */
const stopping = (child) => () =>
  child.exitCode !== null || child.signalCode !== null
    ? Promise.resolve()
    : new Promise((resolve) => {
        child.once("exit", resolve);
        child.kill("SIGTERM");
      });

const leasekit = once(() => serve().then((server) => (stops.push(server.stop), server)));

/** moto's server (single-threaded: tests/moto_server.py), DynamoDB and S3 on one URL. */
const moto = once(async () => {
  const python = process.env.LEASEKIT_PYTHON;
  const script = process.env.LEASEKIT_MOTO_SERVER;
  if (!python || !existsSync(python)) throw new Missing(`no Python with moto: set LEASEKIT_PYTHON (now ${python})`);
  if (!script || !existsSync(script)) throw new Missing(`set LEASEKIT_MOTO_SERVER to tests/moto_server.py (now ${script})`);
  try {
    await run(python, ["-c", "import moto.moto_server.werkzeug_app"]);
  } catch {
    throw new Missing(`${python} has no moto (pip install 'moto[server]')`);
  }
  const port = await freePort();
  const child = spawn(python, [script, String(port)], { stdio: "ignore" });
  stops.push(stopping(child));
  await waitForPort(port, child, "moto");
  return `http://127.0.0.1:${port}`;
});

/** `leasekit local-aws`: DynamoDB's JSON protocol over the embedded store. */
const localAws = once(async () => {
  const dir = mkdtempSync(join(tmpdir(), "leasekit-ts-aws-"));
  const child = spawn(process.env.LEASEKIT_BIN, ["local-aws", "--addr", "127.0.0.1:0", "--data-dir", dir], {
    stdio: ["ignore", "pipe", "inherit"],
    env: { ...process.env, RUST_LOG: "error" },
  });
  const stop = stopping(child);
  stops.push(async () => {
    await stop();
    rmSync(dir, { recursive: true, force: true });
  });
  const url = await new Promise((resolve, reject) => {
    child.once("exit", (code) => reject(new Error(`leasekit local-aws exited: ${code}`)));
    createInterface({ input: child.stdout }).once("line", (line) => resolve(line.trim()));
  });
  if (!url.startsWith("http://127.0.0.1:")) throw new Error(`no URL: ${url}`);
  return url;
});

/** Debian's PostgreSQL, its newest major version here. */
const PG_BIN = (() => {
  const root = "/usr/lib/postgresql";
  const versions = existsSync(root) ? readdirSync(root).filter((v) => /^\d+$/.test(v)) : [];
  const newest = versions.sort((a, b) => Number(b) - Number(a))[0] ?? "15";
  return `${root}/${newest}/bin`;
})();

/** A throwaway cluster on a free port; a pg.Pool to it. */
const postgres = once(async () => {
  if (!existsSync(`${PG_BIN}/initdb`)) throw new Missing("PostgreSQL is not installed (apt-get install postgresql)");
  const data = mkdtempSync(join(tmpdir(), "pg-"));
  const port = await freePort();
  // initdb refuses to run as root: the cluster runs as nobody when this test is root (setpriv
  // execs the server itself, so that terminating the process ends it).
  const asNobody = process.getuid() === 0 ? ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--"] : [];
  if (asNobody.length > 0) {
    const uid = Number((await run("id", ["-u", "nobody"])).stdout.trim());
    chownSync(data, uid, -1);
  }
  const command = (argv) => (asNobody.length > 0 ? [asNobody[0], [...asNobody.slice(1), ...argv]] : [argv[0], argv.slice(1)]);
  await run(...command([`${PG_BIN}/initdb`, "-D", data, "-A", "trust", "-U", "postgres"]));
  const child = spawn(...command([`${PG_BIN}/postgres`, "-D", data, "-p", String(port), "-k", data, "-h", "127.0.0.1"]), {
    stdio: "ignore",
  });
  const stop = stopping(child);
  const pool = new pg.Pool({ host: "127.0.0.1", port, user: "postgres", database: "postgres", max: 4 });
  stops.push(async () => {
    await pool.end();
    await stop();
    rmSync(data, { recursive: true, force: true });
  });
  await waitForPort(port, child, "postgres");
  // The port opens before the server takes queries ("the database system is starting up"), so
  // readiness is a query that succeeds, not an open port.
  for (let deadline = Date.now() + 60_000; ; await sleep(100)) {
    try {
      await pool.query("SELECT 1");
      return pool;
    } catch (error) {
      if (Date.now() > deadline) throw error;
    }
  }
});

before(() => {
  // Start them all at once; a store that fails says so in its tests.
  for (const start of [leasekit, moto, localAws, postgres]) start().catch(() => {});
});
after(async () => {
  for (const stop of stops.reverse()) await stop();
});

/** The store `start` gives, or null (the test skipped) when this machine lacks it. */
async function need(t, start) {
  try {
    return await start();
  } catch (error) {
    if (!(error instanceof Missing)) throw error;
    if (process.env.LEASEKIT_REQUIRE_STORES) throw new Error(`${error.message} (LEASEKIT_REQUIRE_STORES is set)`);
    t.skip(error.message);
    return null;
  }
}

const aws = (Client, url, extra = {}) => {
  const client = new Client({
    endpoint: url,
    region: "us-east-1",
    credentials: { accessKeyId: "test", secretAccessKey: "test" },
    ...extra,
  });
  stops.push(async () => client.destroy());
  return client;
};

// --- Each store as the tests use it: `write(key, permit)` a fenced write of `key` whose data
// records the token that wrote it; `read(key)`: { fence, by (the data's writer), raw } as
// stored, or null; `broken`: a write the store fails for its own reasons (no such table).

async function dynamodbStore(url) {
  const ddb = aws(DynamoDBClient, url);
  const table = name("docs");
  await ddb.send(
    new CreateTableCommand({
      TableName: table,
      KeySchema: [{ AttributeName: "id", KeyType: "HASH" }],
      AttributeDefinitions: [{ AttributeName: "id", AttributeType: "S" }],
      BillingMode: "PAY_PER_REQUEST",
    }),
  );
  const put = (into, key, permit) => dynamodbPut(ddb, into, { id: { S: key }, by: { N: String(permit.token) } }, permit);
  return {
    ddb,
    table,
    write: (key, permit) => put(table, key, permit),
    read: async (key) => {
      const { Item } = await ddb.send(new GetItemCommand({ TableName: table, Key: { id: { S: key } }, ConsistentRead: true }));
      return Item ? { fence: Number(Item.fence.N), by: Number(Item.by.N), raw: Item } : null;
    },
    broken: {
      write: (permit) => put(`${table}-missing`, "doc", permit),
      error: (e) => e.name === "ResourceNotFoundException",
    },
  };
}

async function s3Store(url) {
  const s3 = aws(S3Client, url, { forcePathStyle: true });
  const bucket = name("bucket").toLowerCase();
  await s3.send(new CreateBucketCommand({ Bucket: bucket }));
  // The helper's HEAD and PUT are two requests: each answer is heard up to 4 ms late, at random,
  // so that racing writers' requests interleave in every order (moto answers them in turn).
  // `conflicts` counts the PUTs whose condition failed (the helper then read again).
  let conflicts = 0;
  const late = {
    send: async (command) => {
      try {
        return await s3.send(command);
      } catch (error) {
        if (error.name === "PreconditionFailed" || error.name === "ConditionalRequestConflict") conflicts++;
        throw error;
      } finally {
        await sleep(Math.random() * 4);
      }
    },
  };
  return {
    s3,
    bucket,
    get conflicts() {
      return conflicts;
    },
    write: (key, permit) => s3Put(late, bucket, key, `by ${permit.token}`, permit),
    read: async (key) => {
      let object;
      try {
        object = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: key }));
      } catch (error) {
        if (error.name === "NoSuchKey") return null;
        throw error;
      }
      const body = await object.Body.transformToString();
      const fence = Number(object.Metadata["leasekit-fence"]);
      return { fence, by: Number(body.replace(/^by /, "")), raw: { body, metadata: object.Metadata, etag: object.ETag } };
    },
    broken: {
      write: (permit) => s3Put(s3, `${bucket}-missing`, "doc", "by nobody", permit),
      error: (e) => e.name === "NoSuchBucket",
    },
  };
}

/** A quoted identifier, as the helper quotes it: the table's name has quotes and a space in it. */
const quoted = (identifier) => `"${identifier.replaceAll('"', '""')}"`;

async function postgresStore(pool) {
  const table = `fenced "docs" ${name("t")}`;
  await pool.query(`CREATE TABLE ${quoted(table)} (id text PRIMARY KEY, body text, fence bigint NOT NULL)`);
  return {
    write: (key, permit) => postgresUpsert(pool, table, { id: key }, { body: `by ${permit.token}` }, permit),
    read: async (key) => {
      const { rows } = await pool.query(`SELECT id, body, fence FROM ${quoted(table)} WHERE id = $1`, [key]);
      const row = rows[0];
      return row ? { fence: Number(row.fence), by: Number(row.body.replace(/^by /, "")), raw: row } : null;
    },
    broken: {
      write: (permit) => postgresUpsert(pool, `${table} missing`, { id: "doc" }, { body: "x" }, permit),
      error: (e) => e.code === "42P01", // undefined_table
    },
  };
}

const STORES = [
  { label: "DynamoDB on moto", open: async (t) => (await need(t, moto)) && dynamodbStore(await moto()) },
  { label: "DynamoDB on leasekit local-aws", open: async (t) => (await need(t, localAws)) && dynamodbStore(await localAws()) },
  { label: "S3 on moto", open: async (t) => (await need(t, moto)) && s3Store(await moto()) },
  { label: "PostgreSQL", open: async (t) => (await need(t, postgres)) && postgresStore(await postgres()) },
];

const leaseClient = async () => new LeaseClient({ url: (await leasekit()).url, apiKey: API_KEY, tenant: name("fence") });

// --- A holder paused past its lease.

for (const { label, open } of STORES) {
  test(`${label}: a holder paused past its lease is refused, naming both tokens, and its successor's data is kept`, async (t) => {
    const store = await open(t);
    if (!store) return;
    const client = await leaseClient();
    const resource = name("doc");
    const a = await client.acquire(resource, { holder: "A", ttl: 1 });
    assert.ok(a.granted && a.token !== null);
    const aPermit = { resource, token: a.token };
    await store.write("doc", aPermit);
    assert.deepEqual(await store.read("doc").then(({ fence, by }) => ({ fence, by })), { fence: a.token, by: a.token });
    await sleep(1300); // A is paused past its lease
    await client.withLease(resource, { holder: "B", ttl: 30 }, async (b) => {
      assert.equal(b.token, a.token + 1);
      await store.write("doc", b); // a HeldLease is a permit too
      await store.write("doc", b); // equal tokens write: B's own retry
      const before = await store.read("doc");
      assert.deepEqual({ fence: before.fence, by: before.by }, { fence: b.token, by: b.token });
      await assert.rejects(store.write("doc", aPermit), (error) => {
        assert.ok(error instanceof FenceRefused, String(error));
        assert.deepEqual({ token: error.token, found: error.found }, { token: a.token, found: b.token });
        assert.match(error.message, new RegExp(`fence ${b.token}, larger than this write's token ${a.token}: nothing written`));
        return true;
      });
      assert.deepEqual(await store.read("doc"), before, "nothing written: the store holds B's data exactly");
    });
    // The store's own errors are the caller's, unchanged.
    await assert.rejects(store.broken.write({ resource, token: a.token + 1 }), store.broken.error);
  });
}

test("PostgreSQL: a name holding NUL, or a key of no column, is refused before anything is sent", async (t) => {
  const pool = await need(t, postgres);
  if (!pool) return;
  await assert.rejects(postgresUpsert(pool, "docs\0", { id: "x" }, {}, { resource: "r", token: 1 }), TypeError);
  await assert.rejects(postgresUpsert(pool, "docs", {}, {}, { resource: "r", token: 1 }), TypeError);
});

test("S3 on moto: a write between the helper's HEAD and its PUT fails the condition, and it reads again", async (t) => {
  const url = await need(t, moto);
  if (!url) return;
  const { s3, bucket, read } = await s3Store(url);
  const put = (client, token, options) => s3Put(client, bucket, "doc", `by ${token}`, { resource: "doc", token }, options);
  // A client through which the helper's requests go: after each HEAD, the next of `tokens`
  // writes (directly) before the helper hears the answer.
  const sent = [];
  const writingBetween = (tokens) => ({
    send: async (command) => {
      sent.push(command.constructor.name.replace(/ObjectCommand$/, ""));
      const answer = await s3.send(command);
      if (command instanceof HeadObjectCommand && tokens.length > 0) await put(s3, tokens.shift());
      return answer;
    },
  });
  const stored = () => read("doc").then(({ fence, by }) => ({ fence, by }));
  await put(s3, 3);
  // 4 writes in between: 5's PUT fails its condition, and 5 is still the larger once read again.
  await put(writingBetween([4]), 5);
  assert.deepEqual(sent, ["Head", "Put", "Head", "Put"]);
  assert.deepEqual(await stored(), { fence: 5, by: 5 });
  // 7 writes in between: read again, 6 is refused, naming 7.
  await assert.rejects(put(writingBetween([7]), 6), (e) => e instanceof FenceRefused && e.token === 6 && e.found === 7);
  assert.deepEqual(await stored(), { fence: 7, by: 7 });
  // Smaller tokens than ours write in between every time: after `attempts` reads, refused with no
  // fence found, and nothing of ours written.
  sent.length = 0;
  await assert.rejects(
    put(writingBetween([8, 9, 10]), 100, { attempts: 3 }),
    (e) => e instanceof FenceRefused && e.found === null && /kept changing: nothing written/.test(e.message),
  );
  assert.deepEqual(sent, ["Head", "Put", "Head", "Put", "Head", "Put"]);
  assert.deepEqual(await stored(), { fence: 10, by: 10 });
});

// --- Two writers with alternating tokens, and a monitor.

/**
 * Two writers take tokens from one counter for `RACE_MS`, each alternating between the next
 * token and one well below the latest (token - 7), and interleave at each await (so both can
 * hold a fresh token at once, and the later one may land first); a monitor reads the stored
 * fence and data all the while. The fence never goes down, the data is always the writer's
 * whose token is the fence, a write that succeeded is seen (fence >= its token), and every
 * refusal names a larger fence (or none). What it counted.
 */
async function race(store) {
  const key = "race";
  const stop = performance.now() + RACE_MS;
  // refused: a larger fence named; changing: S3's object kept changing (no fence named).
  const counts = { written: 0, refused: 0, changing: 0, reads: 0, highest: 0 };
  let latest = 0;
  let running = true;
  let writers = 2;
  const writer = async () => {
    let stale = false;
    try {
      while (running && performance.now() < stop) {
        // Each writer alternates: the next token, then one well below the latest.
        const next = ++latest;
        const token = stale ? Math.max(1, next - 7) : next;
        stale = !stale;
        try {
          await store.write(key, { resource: key, token });
          counts.written++;
          counts.highest = Math.max(counts.highest, token);
          const seen = await store.read(key);
          assert.ok(seen.fence >= token, `wrote ${token}, then read fence ${seen.fence}`);
        } catch (error) {
          if (!(error instanceof FenceRefused)) throw error;
          assert.equal(error.token, token);
          assert.ok(error.found === null || error.found > token, `refused ${token} naming ${error.found}`);
          counts[error.found === null ? "changing" : "refused"]++;
        }
      }
    } finally {
      if (--writers === 0) running = false;
    }
  };
  const monitor = async () => {
    let last = 0;
    while (running) {
      const seen = await store.read(key);
      if (seen === null) continue;
      assert.ok(seen.fence >= last, `the fence went down: ${last}, then ${seen.fence}`);
      assert.equal(seen.by, seen.fence, "the data is the writer's whose token is the fence");
      last = seen.fence;
      counts.reads++;
    }
  };
  const results = await Promise.allSettled(
    [writer(), writer(), monitor()].map((loop) =>
      loop.catch((error) => {
        running = false;
        throw error;
      }),
    ),
  );
  const failed = results.find((r) => r.status === "rejected");
  if (failed) throw failed.reason;
  const final = await store.read(key);
  assert.equal(final.fence, counts.highest, "the fence is the highest token written");
  assert.equal(final.by, counts.highest);
  return counts;
}

test(`races: two writers with alternating tokens and a monitor, ${RACE_MS / 1000} s, every store at once`, { concurrency: true }, async (t) => {
  await Promise.all(
    STORES.map(({ label, open }) =>
      t.test(label, async (t) => {
        const store = await open(t);
        if (!store) return;
        const counts = await race(store);
        t.diagnostic(
          `${counts.written} writes, ${counts.refused} refused (a larger fence), ${counts.changing} refused (kept changing), ` +
            `${counts.reads} monitor reads` +
            (store.conflicts === undefined ? "" : `, ${store.conflicts} conditional PUTs failed and read again`),
        );
        assert.ok(counts.written >= 25, `only ${counts.written} writes`);
        assert.ok(counts.refused > 0, "no write was refused");
      }),
    ),
  );
});

// --- A semaphore's permit.

test("a semaphore's permit writes only while current: checked with the service, not fenced", async (t) => {
  if (!(await need(t, moto))) return;
  const client = await leaseClient();
  const store = await dynamodbStore(await moto());
  const pool = name("pool");
  const item = (extra = {}) => ({ id: { S: "a" }, ...extra });
  let aPermit;
  await client.withLease(pool, { holder: "A", ttl: 30, limit: 2 }, (a) =>
    client.withLease(pool, { holder: "B", ttl: 30, limit: 2 }, async (b) => {
      assert.deepEqual([a.token, b.token, a.limit], [1, 2, 2]);
      await dynamodbPut(store.ddb, store.table, item(), b); // token 2
      await dynamodbPut(store.ddb, store.table, item(), a); // token 1, yet current: written
      const { Item } = await store.ddb.send(new GetItemCommand({ TableName: store.table, Key: item(), ConsistentRead: true }));
      assert.equal(Item.fence.N, "1", "not compared with the store's fence (2)");
      aPermit = { resource: pool, token: a.token, holder: "A", limit: 2, client };
      await dynamodbPut(store.ddb, store.table, item(), aPermit); // and as a FencePermit
    }),
  );
  // Both released: A's permit is no longer current.
  await assert.rejects(dynamodbPut(store.ddb, store.table, item({ late: { S: "yes" } }), aPermit), (error) => {
    assert.ok(error instanceof FenceRefused, String(error));
    assert.deepEqual({ token: error.token, found: error.found }, { token: 1, found: null });
    assert.match(error.message, /no longer current: nothing written/);
    return true;
  });
  const { Item } = await store.ddb.send(new GetItemCommand({ TableName: store.table, Key: item(), ConsistentRead: true }));
  assert.equal(Item.late, undefined, "nothing written");
  // Without the client that granted it, a permit cannot be checked.
  await assert.rejects(dynamodbPut(store.ddb, store.table, item(), { resource: pool, token: 1, limit: 2 }), TypeError);
});

// --- What the attack on the helpers found (issue #46), each refused or written as promised now.

test("a set's hold is refused: each resource has its own counter, so each write names its own token", async (t) => {
  if (!(await need(t, moto))) return;
  const client = await leaseClient();
  const store = await dynamodbStore(await moto());
  const [a, b] = [name("a"), name("b")];
  for (let i = 0; i < 3; i++) {
    // a's counter ahead of b's
    const taken = await client.acquire(a, { holder: "X" });
    await client.release(a, { holder: "X", token: taken.token });
  }
  await client.withLease([a, b], { holder: "X" }, async (held) => {
    assert.ok(held.tokens[a] > held.tokens[b]);
    await assert.rejects(store.write(b, held), /a set's hold has a token per resource/);
    assert.equal(await store.read(b), null, "nothing written");
    await store.write(b, { resource: b, token: held.tokens[b] });
  });
  const y = await client.acquire(b, { holder: "Y" });
  await store.write(b, { resource: b, token: y.token }); // b's next holder writes
});

test("PostgreSQL: a row whose fence is NULL (a column just added) is written, then fenced", async (t) => {
  const pool = await need(t, postgres);
  if (!pool) return;
  const table = name("legacy");
  await pool.query(`CREATE TABLE ${quoted(table)} (id text PRIMARY KEY, body text)`);
  await pool.query(`INSERT INTO ${quoted(table)} VALUES ('doc', 'before')`);
  await pool.query(`ALTER TABLE ${quoted(table)} ADD COLUMN fence bigint`);
  await postgresUpsert(pool, table, { id: "doc" }, { body: "fenced" }, { resource: "r", token: 7 });
  await assert.rejects(postgresUpsert(pool, table, { id: "doc" }, { body: "stale" }, { resource: "r", token: 6 }), (error) => {
    assert.ok(error instanceof FenceRefused, String(error));
    assert.deepEqual({ token: error.token, found: error.found }, { token: 6, found: 7 });
    return true;
  });
  const { rows } = await pool.query(`SELECT body, fence FROM ${quoted(table)}`);
  assert.deepEqual(rows, [{ body: "fenced", fence: "7" }]);
});

test("a stored fence that is not a token refuses with FenceRefused (found null), nothing written", async (t) => {
  const url = await need(t, moto);
  if (!url) return;
  const { s3, bucket } = await s3Store(url);
  const { PutObjectCommand } = await import("@aws-sdk/client-s3");
  for (const odd of ["abc", "1e3", "0x10", "12.0", "0b11", ""]) {
    await s3.send(new PutObjectCommand({ Bucket: bucket, Key: "doc", Body: "theirs", Metadata: { "leasekit-fence": odd } }));
    await assert.rejects(s3Put(s3, bucket, "doc", "mine", { resource: "r", token: 5000 }), (error) => {
      assert.ok(error instanceof FenceRefused, `${JSON.stringify(odd)}: ${error}`);
      assert.equal(error.found, null);
      return true;
    });
    const object = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: "doc" }));
    assert.equal(await object.Body.transformToString(), "theirs");
  }
  // A token above the largest safe integer (another client's) is larger than any this one holds.
  await s3.send(new PutObjectCommand({ Bucket: bucket, Key: "doc", Body: "theirs", Metadata: { "leasekit-fence": "9007199254740993" } }));
  await assert.rejects(s3Put(s3, bucket, "doc", "mine", { resource: "r", token: 2 ** 52 }), FenceRefused);
  // DynamoDB compares the numbers itself; a fence kept as 1E+2 is named as 100.
  const { ddb, table } = await dynamodbStore(url);
  const { PutItemCommand } = await import("@aws-sdk/client-dynamodb");
  await ddb.send(new PutItemCommand({ TableName: table, Item: { id: { S: "doc" }, fence: { N: "1E+2" } } }));
  await assert.rejects(dynamodbPut(ddb, table, { id: { S: "doc" } }, { resource: "r", token: 99 }), (error) => {
    assert.ok(error instanceof FenceRefused, String(error));
    assert.equal(error.found, 100);
    return true;
  });
});
