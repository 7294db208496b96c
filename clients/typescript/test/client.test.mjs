// The calls against a real `leasekit serve`: answers, typed errors, safe retries, and the
// coordination ops (semaphores, sets, check, waiting, list, revoke, audit).

import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import {
  Forbidden,
  IdempotencyConflict,
  InvalidInput,
  LeaseClient,
  Unauthorized,
  Unavailable,
} from "leasekit";
import { ADMIN_KEY, API_KEY, name, serve, sleep, tap } from "./support.mjs";

let server;
before(async () => {
  server = await serve();
});
after(() => server.stop());

const client = (options = {}) => new LeaseClient({ url: server.url, apiKey: API_KEY, tenant: "team-a", ...options });

test("acquire, get, renew, release; a refusal is an answer with its rule", async () => {
  const c = client();
  const r = name("job");
  const got = await c.acquire(r, { holder: "a", ttl: 30 });
  assert.equal(got.granted, true);
  assert.equal(got.token, 1);
  assert.equal(got.holder, "a");
  assert.ok(got.expiresAt instanceof Date && got.expiresAt.getTime() > Date.now());
  assert.ok(got.raw._provenance, "the signed answer is kept");
  const held = await c.acquire(r, { holder: "b" });
  assert.equal(held.granted, false);
  assert.deepEqual(held.rules, ["LEASE_HELD"]);
  assert.equal(held.holder, "a");
  assert.equal((await c.get(r)).holder, "a");
  assert.equal((await c.renew(r, { holder: "a", token: 1, ttl: 60 })).granted, true);
  const stale = await c.renew(r, { holder: "a", token: 7 });
  assert.deepEqual(stale.rules, ["TOKEN_MISMATCH"]);
  assert.equal((await c.release(r, { holder: "a", token: 1 })).granted, true);
  assert.equal((await c.get(r)).holder, null);
  assert.equal((await c.acquire(r, { holder: "b" })).token, 2, "a new acquisition, a larger token");
});

test("errors are typed", async () => {
  const r = name("typed");
  await assert.rejects(client({ apiKey: "not-a-key-0123456789" }).get(r), Unauthorized);
  await assert.rejects(client().acquire(r, { holder: "a", ttl: 0 }), (e) => e instanceof InvalidInput && e.status === 400);
  await assert.rejects(client().revoke(r, { reason: "no role" }), Forbidden);
  const c = client();
  await c.acquire(r, { holder: "a", requestId: "ts-same-id-1" });
  await assert.rejects(c.acquire(r, { holder: "b", requestId: "ts-same-id-1" }), IdempotencyConflict);
  const nowhere = new LeaseClient({ url: "http://127.0.0.1:9", apiKey: API_KEY, retries: 1, timeoutMs: 500 });
  await assert.rejects(nowhere.get(r), Unavailable);
  assert.throws(() => new LeaseClient({ url: server.url }), TypeError);
});

test("a mutation whose answer is lost is retried with its request id and applied once", async () => {
  const t = tap({ lose: (n) => n === 1 });
  const c = client({ fetch: t.fetch });
  const r = name("lost");
  const got = await c.acquire(r, { holder: "a" });
  assert.equal(got.granted, true);
  assert.equal(got.replayed, true, "the retry got the stored answer");
  assert.equal(got.token, 1);
  const [first, retry] = t.sent;
  assert.equal(first.body.requestId, retry.body.requestId);
  assert.match(first.body.requestId, /^ts-[0-9a-f]{32}$/);
  const next = await client().acquire(name("other"), { holder: "a" });
  assert.equal(next.replayed, false);
  // Nothing was applied twice: a second holder gets the next token after a release.
  await c.release(r, { holder: "a", token: 1 });
  assert.equal((await c.acquire(r, { holder: "b" })).token, 2);
});

test("a semaphore, a set and a check", async () => {
  const c = client();
  const s = name("pool");
  const a = await c.acquire(s, { holder: "a", limit: 2 });
  const b = await c.acquire(s, { holder: "b", limit: 2 });
  const full = await c.acquire(s, { holder: "c", limit: 2 });
  assert.deepEqual([a.token, b.token, full.granted], [1, 2, false]);
  assert.equal(b.holders.length, 2);
  assert.equal((await c.check(s, 1, { holder: "a" })).current, true);
  assert.equal((await c.check(s, 1, { holder: "b" })).current, false);
  const [x, y] = [name("x"), name("y")];
  const set = await c.acquireAll([x, y], { holder: "a" });
  assert.equal(set.granted, true);
  assert.deepEqual(set.leases.map((m) => [m.resource, m.token]), [[x, 1], [y, 1]]);
  assert.equal((await c.acquireAll([y, name("z")], { holder: "b" })).granted, false, "all or nothing");
  assert.equal((await c.renewAll([[x, 1], [y, 1]], { holder: "a" })).granted, true);
  assert.equal((await c.releaseAll([[x, 1], [y, 1]], { holder: "a" })).granted, true);
  assert.equal((await c.get(x)).holder, null);
});

test("an acquire that waits is granted when the holder releases, first come first served", async () => {
  const c = client();
  const r = name("queue");
  await c.acquire(r, { holder: "owner" });
  const first = c.acquire(r, { holder: "w1", wait: 10 });
  await sleep(200);
  const second = c.acquire(r, { holder: "w2", wait: 10 });
  await sleep(200);
  const short = await c.acquire(r, { holder: "w3", wait: 1 });
  assert.deepEqual([short.granted, short.queuePosition], [false, 3]);
  const released = Date.now();
  await c.release(r, { holder: "owner", token: 1 });
  const w1 = await first;
  assert.deepEqual([w1.granted, w1.token], [true, 2]);
  assert.ok(Date.now() - released < 1000);
  await c.release(r, { holder: "w1", token: 2 });
  assert.equal((await second).token, 3);
});

test("list, revoke with the admin role, audit", async () => {
  const c = client();
  const admin = client({ apiKey: ADMIN_KEY });
  const prefix = name("svc");
  await c.acquire(`${prefix}/a`, { holder: "w1" });
  await c.acquire(`${prefix}/b`, { holder: "w2" });
  let page;
  for (let i = 0; i < 50; i++) {
    page = await c.list({ prefix });
    if (page.leases.length === 2) break;
    await sleep(100);
  }
  assert.deepEqual(page.leases.map((m) => [m.resource, m.holder]), [[`${prefix}/a`, "w1"], [`${prefix}/b`, "w2"]]);
  const half = await c.list({ prefix, pageSize: 1 });
  assert.equal(half.leases.length, 1);
  assert.equal(typeof half.nextCursor, "string");
  const rest = await c.list({ prefix, cursor: half.nextCursor });
  assert.deepEqual(rest.leases.map((m) => m.resource), [`${prefix}/b`]);
  const revoked = await admin.revoke(`${prefix}/a`, { holder: "w1", reason: "wedged" });
  assert.deepEqual(revoked.revoked.map((p) => [p.holder, p.token]), [["w1", 1]]);
  const renewed = await c.renew(`${prefix}/a`, { holder: "w1", token: 1 });
  assert.deepEqual(renewed.rules, ["REVOKED"]);
  const audit = await admin.audit({ resource: `${prefix}/a` });
  assert.deepEqual(audit.entries.map((e) => [e.resource, e.reason]), [[`${prefix}/a`, "wedged"]]);
  assert.match(audit.entries[0].actor, /^key:/);
  await assert.rejects(c.audit(), Forbidden);
});
