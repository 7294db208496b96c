// examples/typescript runs as written, against the installed package.

import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { after, before, test } from "node:test";
import { promisify } from "node:util";
import { API_KEY, serve } from "./support.mjs";

const run = promisify(execFile);
let server;
before(async () => {
  server = await serve();
});
after(() => server.stop());

const example = (file) =>
  run(process.execPath, [new URL(`./examples/${file}`, import.meta.url).pathname], {
    env: { ...process.env, LEASEKIT_URL: server.url, LEASEKIT_API_KEY: API_KEY },
    timeout: 60_000,
  });

test("hold-a-lease.mjs", async () => {
  const { stdout } = await example("hold-a-lease.mjs");
  assert.match(stdout, /step 2 under fencing token 1/);
  assert.match(stdout, /released: true/);
});

test("pay-per-call.mjs", async () => {
  const { stdout } = await example("pay-per-call.mjs");
  assert.match(stdout, /granted: true, fencing token 1, paid by 0x[0-9a-fA-F]{40}/);
  assert.match(stdout, /released: true/);
});

test("session.mjs", async () => {
  const { stdout } = await example("session.mjs");
  assert.match(stdout, /holds 3 tasks, tokens 1, 1, 1/);
  assert.match(stdout, /under fencing token 1/);
  assert.match(stdout, /held by agent-1/);
  assert.match(stdout, /closed: every task free again: true/);
});

test("work-queue.mjs", async () => {
  const { stdout } = await example("work-queue.mjs");
  assert.match(stdout, /6 tasks, each done once: true/);
  assert.match(stdout, /is finished: fixed by agent-/);
});
