// Finished work and claim-next (docs/adr/0012): `lease.finish(result)` ends the work with the
// mark, a later hold throws `Finished` naming who did it, `claimNext` takes the first free task
// of a list, the finisher reopens one that must be done again, and a hold lost before it
// finishes marks nothing.

import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { Finished, LeaseClient, LeaseLost, NotAcquired } from "leasekit";
import { ADMIN_KEY, API_KEY, name, serve } from "./support.mjs";

let server;
before(async () => {
  server = await serve();
});
after(() => server.stop());

const client = (apiKey = API_KEY) => new LeaseClient({ url: server.url, apiKey, tenant: "work" });

test("finish marks the task, the next hold is told who did it, the finisher reopens it", async () => {
  const c = client();
  const task = name("task");
  const { token, finished } = await c.withLease(task, { holder: "w1" }, async (lease) => ({
    token: lease.token,
    finished: await lease.finish("sent INV-1009"),
  }));
  assert.equal(finished.done.holder, "w1");
  assert.equal(finished.done.token, token);
  assert.equal(finished.done.result, "sent INV-1009");
  const told = await c.withLease(task, { holder: "w2", wait: 5 }, () => "ran").catch((e) => e);
  assert.ok(told instanceof Finished, String(told));
  assert.ok(told instanceof NotAcquired);
  assert.equal(told.done.holder, "w1");
  assert.equal((await c.get(task)).done.result, "sent INV-1009");
  const reopened = await c.reopen(task, { reason: "the invoice bounced", holder: "w1", token });
  assert.equal(reopened.granted, true);
  assert.equal(reopened.done, null);
  const again = await c.withLease(task, { holder: "w2" }, (lease) => lease.token);
  assert.equal(again, token + 1);
  const audit = await client(ADMIN_KEY).audit({ resource: task });
  assert.equal(audit.entries[0].reopened.holder, "w1");
});

test("a hold lost before it finishes marks nothing", async () => {
  const c = client();
  const task = name("task");
  await c.withLease(task, { holder: "w1", ttl: 2 }, async (lease) => {
    await client(ADMIN_KEY).revoke(task, { reason: "stuck", holder: "w1" });
    await new Promise((resolve) => lease.signal.addEventListener("abort", resolve, { once: true }));
    await assert.rejects(lease.finish("too late"), LeaseLost);
  });
  assert.equal((await c.get(task)).done, null);
});

test("workers claim each task of a list once", async () => {
  const tasks = Array.from({ length: 8 }, (_, i) => name(`q${i}`));
  const done = [];
  const worker = async (w) => {
    const c = client();
    for (;;) {
      try {
        await c.claimNext(tasks, { holder: `w${w}` }, async (lease) => {
          done.push(lease.resources[0]);
          await lease.finish(`w${w}`);
        });
      } catch (e) {
        if (e instanceof Finished) return;
        if (!(e instanceof NotAcquired)) throw e;
      }
    }
  };
  await Promise.all([0, 1, 2, 3].map(worker));
  assert.deepEqual([...done].sort(), [...tasks].sort());
});

test("claimNext skips a held candidate, and release with done finishes one", async () => {
  const c = client();
  const [a, b] = [name("a"), name("b")];
  await c.acquire(a, { holder: "other", ttl: 60 });
  const refused = await c.claimNext([a, b], { holder: "me" }, async (lease) => {
    assert.deepEqual([lease.resources[0], lease.token], [b, 1]);
    // Both held now: another claim gets neither, and neither is finished.
    return c.claimNext([a, b], { holder: "you" }, () => "ran").catch((e) => e);
  });
  assert.ok(refused instanceof NotAcquired && !(refused instanceof Finished), String(refused));
  const released = await c.release(a, { holder: "other", token: 1, done: true, result: "theirs" });
  assert.equal(released.done.result, "theirs");
});

test("a refused finish releases the permit plainly", async () => {
  const c = client();
  const pool = name("pool");
  await c.withLease(pool, { holder: "a", limit: 2 }, async (a) => {
    await c.withLease(pool, { holder: "b", limit: 2 }, async (b) => {
      await a.finish("a's result");
      // b's finish would replace a's mark: refused (DONE), and b's permit released plainly.
      await assert.rejects(b.finish("b's result"), (e) => e instanceof LeaseLost && e.rule === "DONE");
    });
  });
  const got = await c.get(pool);
  assert.deepEqual(got.holders, []);
  assert.equal(got.done.holder, "a");
});
