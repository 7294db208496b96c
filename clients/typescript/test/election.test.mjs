// Leader election: campaign (a waiting acquire with a value), proclaim, resign (return from the
// function), leader and observe (an async generator of watches chained on the state's tag).

import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { LeaseClient, LeaseLost } from "leasekit";
import { ADMIN_KEY, API_KEY, name, serve, sleep } from "./support.mjs";

let server;
before(async () => {
  server = await serve();
});
after(() => server.stop());

const client = (apiKey = API_KEY) => new LeaseClient({ url: server.url, apiKey, tenant: "election" });

/** The next event of `events`, within a second (an observer hears of a change at once). */
async function next(events) {
  let timer;
  const late = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error("no event within 1 s")), 1000);
  });
  try {
    const { value, done } = await Promise.race([events.next(), late]);
    assert.equal(done, false);
    return value === null ? null : [value.holder, value.token, value.value];
  } finally {
    clearTimeout(timer);
  }
}

test("an observer hears every leader and value in order; resigning hands over", async () => {
  const c = client();
  const office = name("office");
  const stop = new AbortController();
  const events = c.observe(office, { signal: stop.signal });
  assert.equal(await next(events), null, "nobody leads yet");
  let bLed;
  const b = new Promise((resolve) => {
    bLed = resolve;
  });
  const aToken = await c.campaign(office, { holder: "a", value: "10.0.0.1:80", ttl: 5 }, async (lease) => {
    assert.deepEqual(await next(events), ["a", lease.token, "10.0.0.1:80"]);
    assert.deepEqual(await c.leader(office), { holder: "a", token: lease.token, value: "10.0.0.1:80", expiresAt: lease.answer.expiresAt });
    // b waits in line meanwhile.
    c.campaign(office, { holder: "b", value: "10.0.0.2:80", ttl: 5 }, async (held) => {
      bLed(held.token);
      await sleep(300);
    });
    await sleep(200);
    const said = await lease.proclaim("10.0.0.1:81");
    assert.equal(said.value, "10.0.0.1:81");
    assert.deepEqual(await next(events), ["a", lease.token, "10.0.0.1:81"]);
    return lease.token;
  });
  const bToken = await b;
  assert.ok(bToken > aToken);
  assert.deepEqual(await next(events), ["b", bToken, "10.0.0.2:80"]);
  assert.equal(await next(events), null, "b resigned");
  stop.abort();
  assert.deepEqual(await events.next(), { value: undefined, done: true });
});

test("a deposed leader's proclaim is refused, and its signal fires", async () => {
  const c = client();
  const admin = client(ADMIN_KEY);
  const office = name("office");
  await c.campaign(office, { holder: "a", value: "one", ttl: 30 }, async (lease) => {
    await admin.revoke(office, { reason: "a wedged leader" });
    await c.acquire(office, { holder: "b", value: "two" });
    await assert.rejects(lease.proclaim("still me"), (e) => e instanceof LeaseLost && e.rule === "REVOKED");
    assert.equal(lease.signal.aborted, true);
    await assert.rejects(lease.proclaim("again"), LeaseLost);
  });
  const now = await c.leader(office);
  assert.deepEqual([now.holder, now.value], ["b", "two"]);
});

test("watch: a lapse is a change; an unchanged watch ends with its wait", async () => {
  const c = client();
  const lapsing = name("lapsing");
  const held = await c.acquire(lapsing, { holder: "a", ttl: 1, value: "v" });
  assert.ok(held.stateTag);
  assert.equal(held.value, "v");
  assert.equal(held.holders[0].value, "v");
  const q = name("quiet");
  const quiet = await c.watch(q, { wait: 1 });
  assert.equal(quiet.changed, true, "no tag sent: at once");
  const unchanged = await c.watch(q, { stateTag: quiet.stateTag, wait: 1 });
  assert.deepEqual([unchanged.changed, unchanged.stateTag], [false, quiet.stateTag]);
  const began = performance.now();
  const lapsed = await c.watch(lapsing, { stateTag: held.stateTag, wait: 10 });
  assert.ok(performance.now() - began < 1800, "woken by the lapse");
  assert.equal(lapsed.changed, true);
  assert.equal(lapsed.holder, null);
});
