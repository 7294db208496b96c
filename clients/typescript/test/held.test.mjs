// withLease: held past its TTL by background renewals, released on return or throw, the loss
// signalled before the server's expiry when the service goes silent, and a revoke is a loss.

import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { LeaseClient, LeaseLost, NotAcquired } from "leasekit";
import { ADMIN_KEY, API_KEY, name, serve, silentProxy, sleep } from "./support.mjs";

let server;
before(async () => {
  server = await serve();
});
after(() => server.stop());

const client = (url = server.url, apiKey = API_KEY) => new LeaseClient({ url, apiKey, tenant: "held" });

test("a held lease is renewed past its TTL and released on return", async () => {
  const c = client();
  const r = name("held");
  const out = await c.withLease(r, { holder: "a", ttl: 1 }, async (lease) => {
    assert.equal(lease.token, 1);
    await sleep(2500);
    assert.equal(lease.signal.aborted, false);
    lease.check();
    assert.equal((await c.get(r)).holder, "a", "still held, by renewals");
    return "done";
  });
  assert.equal(out, "done");
  assert.equal((await c.get(r)).holder, null, "released on return");
});

test("released when the function throws, and the error is the function's", async () => {
  const c = client();
  const r = name("throws");
  await assert.rejects(
    c.withLease(r, { holder: "a" }, () => {
      throw new RangeError("the job failed");
    }),
    RangeError,
  );
  assert.equal((await c.get(r)).holder, null);
});

test("not acquired within its wait; acquired by waiting when the holder releases", async () => {
  const c = client();
  const r = name("busy");
  const owner = await c.acquire(r, { holder: "owner" });
  await assert.rejects(c.withLease(r, { holder: "b", wait: 0 }, () => {}), (e) => e instanceof NotAcquired && e.holder === "owner");
  const waited = c.withLease(r, { holder: "b", wait: 10, ttl: 5 }, (lease) => lease.token);
  await sleep(300);
  await c.release(r, { holder: "owner", token: owner.token });
  assert.equal(await waited, 2);
  const pool = name("pool");
  const tokens = await c.withLease(pool, { holder: "p1", limit: 2 }, (a) =>
    c.withLease(pool, { holder: "p2", limit: 2 }, (b) => [a.token, b.token]),
  );
  assert.deepEqual(tokens, [1, 2]);
  const [x, y] = [name("x"), name("y")];
  const set = await c.withLease([x, y], { holder: "s", ttl: 1 }, async (lease) => {
    await sleep(1500);
    return lease.tokens;
  });
  assert.deepEqual(set, { [x]: 1, [y]: 1 });
  assert.equal((await c.get(x)).holder, null);
});

test("a silent service: the loss signal fires at the local deadline, before the server's expiry", async () => {
  const proxy = await silentProxy(server.url);
  try {
    const c = new LeaseClient({ url: proxy.url, apiKey: API_KEY, tenant: "held", timeoutMs: 60_000 });
    const r = name("silent");
    const seen = await c.withLease(r, { holder: "a", ttl: 2 }, async (lease) => {
      const serverExpiry = lease.answer.expiresAt.getTime();
      proxy.goSilent();
      const lostAt = await new Promise((resolve) =>
        lease.signal.addEventListener("abort", () => resolve(Date.now()), { once: true }),
      );
      assert.ok(lease.signal.reason instanceof LeaseLost, String(lease.signal.reason));
      assert.throws(() => lease.check(), LeaseLost);
      return { lostAt, serverExpiry };
    });
    assert.ok(seen.lostAt < seen.serverExpiry, `lost at ${seen.lostAt}, the server's expiry ${seen.serverExpiry}`);
    assert.ok(seen.serverExpiry - seen.lostAt < 1000, "and not long before");
  } finally {
    proxy.close();
  }
});

test("a revoked held lease is lost with REVOKED at its next renewal", async () => {
  const c = client();
  const admin = client(server.url, ADMIN_KEY);
  const r = name("revoked");
  const rule = await c.withLease(r, { holder: "a", ttl: 3 }, async (lease) => {
    await admin.revoke(r, { holder: "a", reason: "operator" });
    await new Promise((resolve) => lease.signal.addEventListener("abort", resolve, { once: true }));
    return lease.signal.reason.rule;
  });
  assert.equal(rule, "REVOKED");
});
