// Paying per call from a wallet (viem account) with the official x402 packages: the wallet is
// the tenant; a lost paid answer is charged once; a payment in progress is waited out.

import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { LeaseClient } from "leasekit";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { API_KEY, name, serve, sleep, tap } from "./support.mjs";

let server;
before(async () => {
  server = await serve();
});
after(() => server.stop());

const wallet = () => privateKeyToAccount(generatePrivateKey());

test("a paid acquire whose answer is lost is paid once, and the retry gets what it bought", async () => {
  const account = wallet();
  const t = tap({ lose: (n, request) => "payment-signature" in request.headers && n === 2 });
  const c = new LeaseClient({ url: server.url, wallet: account, fetch: t.fetch });
  const r = name("paid");
  const got = await c.acquire(r, { holder: "a" });
  assert.deepEqual([got.granted, got.replayed, got.token], [true, true, 1]);
  const [offer, paid, resent] = t.sent;
  assert.equal(offer.headers["payment-signature"], undefined);
  assert.equal(paid.headers["payment-signature"], resent.headers["payment-signature"], "one payment, sent twice");
  const payload = JSON.parse(Buffer.from(paid.headers["payment-signature"], "base64").toString());
  assert.ok(payload.extensions["payment-identifier"].info.id.length >= 16);
  assert.equal(payload.payload.authorization.from.toLowerCase(), account.address.toLowerCase());
  // The wallet is the tenant: an API key's tenant of the same name does not see it.
  assert.equal((await c.get(r)).holder, "a");
  const keyed = new LeaseClient({ url: server.url, apiKey: API_KEY, tenant: account.address.toLowerCase() });
  assert.equal((await keyed.get(r)).holder, null);
});

test("a paid call waits while its first attempt is in progress, with the same payment", async () => {
  const inProgress = () =>
    new Response(JSON.stringify({ error: "the first call with this payment has not finished", code: "PAYMENT_IN_PROGRESS" }), {
      status: 409,
      headers: { "content-type": "application/json" },
    });
  const t = tap({ answer: (n, request) => ("payment-signature" in request.headers && n >= 2 && n <= 4 ? inProgress() : undefined) });
  const began = performance.now();
  const c = new LeaseClient({ url: server.url, wallet: wallet(), fetch: t.fetch, retries: 1 });
  const got = await c.acquire(name("progress"), { holder: "a" });
  assert.deepEqual([got.granted, got.token], [true, 1]);
  assert.ok(performance.now() - began >= 2900, "three answers in progress, a second apart");
  const paid = t.sent.map((s) => s.headers["payment-signature"]).filter(Boolean);
  assert.equal(paid.length, 4);
  assert.equal(new Set(paid).size, 1, "one payment, waited on, then answered");
});

test("a wallet holds a lease, every renewal paid", async () => {
  const c = new LeaseClient({ url: server.url, wallet: wallet() });
  const r = name("held");
  const token = await c.withLease(r, { holder: "a", ttl: 1 }, async (lease) => {
    await sleep(1500);
    assert.equal(lease.signal.aborted, false);
    return lease.token;
  });
  assert.equal(token, 1);
  assert.equal((await c.get(r)).holder, null);
});
