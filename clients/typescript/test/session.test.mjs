// withSession: one keepalive keeps every hold in it past their TTL, one signal fires for all of
// them, and returning (or throwing) closes the session, freeing every hold at once.

import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { InvalidInput, LeaseClient, LeaseLost, NotAcquired } from "leasekit";
import { ADMIN_KEY, API_KEY, name, serve, silentProxy, sleep } from "./support.mjs";

let server;
before(async () => {
  server = await serve();
});
after(() => server.stop());

const client = (apiKey = API_KEY) => new LeaseClient({ url: server.url, apiKey, tenant: "sessions" });

test("one keepalive keeps every hold, and returning frees them all", async () => {
  const c = client();
  const [a, pool, x, y, b] = ["a", "pool", "x", "y", "b"].map(name);
  await c.acquire(b, { holder: "agent-2" });
  const id = await c.withSession({ holder: "agent-1", ttl: 2 }, async (session) => {
    assert.equal(await session.acquire(a), 1);
    assert.equal(await session.acquire(pool, { limit: 3 }), 1);
    assert.deepEqual(await session.acquireAll([x, y]), { [x]: 1, [y]: 1 });
    const first = session.deadline;
    await sleep(4000); // two TTLs: only the session's keepalives keep the holds
    assert.equal(session.signal.aborted, false);
    assert.ok(session.deadline > first);
    const now = await c.get(a);
    assert.equal(now.holders[0].session, session.id);
    assert.equal((await c.acquire(x, { holder: "agent-2" })).granted, false);
    await assert.rejects(session.acquire(b), (e) => e instanceof NotAcquired && e.holder === "agent-2");
    assert.equal((await session.release(pool)).granted, true);
    assert.deepEqual(Object.keys(session.tokens).sort(), [a, x, y].sort());
    assert.equal((await c.getSession(session.id)).leases.length, 3);
    return session.id;
  });
  for (const r of [a, x, y, pool]) assert.equal((await c.get(r)).holder, null, `${r} freed on return`);
  assert.equal(await c.getSession(id), null);
});

test("a revoked session is one loss for every hold, and nothing more is sent", async () => {
  const c = client();
  const admin = client(ADMIN_KEY);
  const late = name("late");
  await c.withSession({ holder: "agent-1", ttl: 3 }, async (session) => {
    for (const n of [1, 2, 3]) await session.acquire(name(`job${n}`));
    const revoked = await admin.revokeSession(session.id, { reason: "operator" });
    assert.equal(revoked.revoked.length, 3);
    // Learned at the next keepalive, a third of the TTL in: well before it would lapse.
    const began = performance.now();
    await new Promise((resolve) => session.signal.addEventListener("abort", resolve, { once: true }));
    assert.ok(performance.now() - began < 2500);
    assert.ok(session.signal.reason instanceof LeaseLost && session.signal.reason.rule === "SESSION_EXPIRED");
    await assert.rejects(session.acquire(late), LeaseLost);
  });
  assert.equal((await c.get(late)).holder, null);
});

test("an acquire that finds the session ended fires the signal at once", async () => {
  const c = client();
  const admin = client(ADMIN_KEY);
  // A long TTL: the keepalive would not notice for 20 s.
  await c.withSession({ holder: "agent-1", ttl: 60 }, async (session) => {
    await admin.revokeSession(session.id, { reason: "gone" });
    await assert.rejects(session.acquire(name("job")), (e) => e instanceof LeaseLost && e.rule === "SESSION_EXPIRED");
    assert.equal(session.signal.aborted, true);
    assert.throws(() => session.check(), LeaseLost);
  });
});

test("a session waits in the queue, for as long as asked, and refuses past its limits", async () => {
  const c = client();
  const [r, busy] = [name("r"), name("busy")];
  await c.acquire(r, { holder: "other", ttl: 1 });
  await c.acquire(busy, { holder: "other", ttl: 60 });
  await c.withSession({ holder: "agent-1" }, async (session) => {
    assert.equal(await session.acquire(r, { wait: 5 }), 2, "granted in the session when it freed");
    const began = performance.now();
    await assert.rejects(session.acquire(busy, { wait: 1.5 }), (e) => e instanceof NotAcquired && e.holder === "other");
    const waited = performance.now() - began;
    assert.ok(waited >= 1500 && waited < 5000, String(waited));
    for (let n = 0; n < 255; n++) await session.acquire(`${r}-${n}`);
    await assert.rejects(session.acquire(`${r}-full`), (e) => e instanceof InvalidInput && /256/.test(e.message));
    assert.equal(session.lost, false);
  });
});

test("a throw closes the session too, and the error is the function's", async () => {
  const c = client();
  const r = name("thrown");
  await assert.rejects(
    c.withSession({ holder: "agent-1" }, async (session) => {
      await session.acquire(r);
      throw new RangeError("the job failed");
    }),
    RangeError,
  );
  assert.equal((await c.get(r)).holder, null);
});

test("a session lost to late answers is still closed when the function returns", async () => {
  // The keepalive whose answer came too late was applied, and kept the session (and its holds)
  // another TTL: returning closes it all the same (the attack of 2026-12-05).
  const proxy = await silentProxy(server.url);
  try {
    const c = client();
    const through = new LeaseClient({ url: proxy.url, apiKey: API_KEY, tenant: "sessions", timeoutMs: 60_000 });
    const job = name("late");
    const id = await through.withSession({ holder: "agent-1", ttl: 3 }, async (session) => {
      await session.acquire(job);
      await sleep(1200);
      proxy.answerLate(2400);
      await new Promise((resolve) => session.signal.addEventListener("abort", resolve, { once: true }));
      assert.equal(session.signal.reason.rule, null, "unreachable, not refused");
      proxy.answerLate(0);
      return session.id;
    });
    assert.equal(await c.getSession(id), null, "closed, not kept alive by the late keepalive");
    assert.equal((await c.get(job)).holder, null);
  } finally {
    proxy.close();
  }
});
