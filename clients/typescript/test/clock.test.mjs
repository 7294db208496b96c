// The local-deadline rule, from the table of cases the Rust and Python clients read too.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { Clock, safetyMarginMs } from "leasekit";

const table = JSON.parse(readFileSync(new URL("./deadlines.json", import.meta.url), "utf8"));

test("every case of the shared table: deadline exact, first renewal to the ms", () => {
  assert.ok(table.cases.length >= 20);
  for (const c of table.cases) {
    const clock = new Clock(c.ttlSeconds);
    clock.granted(c.sentMs);
    assert.equal(clock.deadline, c.deadlineMs, JSON.stringify(c));
    assert.equal(Math.floor(clock.nextRenewal()), c.renewAtMs, JSON.stringify(c));
  }
  assert.equal(safetyMarginMs(30), 550);
});

test("a loss is final: a late grant does not move the deadline back", () => {
  const clock = new Clock(10);
  clock.granted(0);
  assert.equal(clock.judge(9_649), false);
  assert.equal(clock.judge(9_650), true);
  clock.granted(9_000);
  assert.equal(clock.judge(9_651), true);
  const refused = new Clock(10);
  refused.granted(0);
  refused.refused("REVOKED");
  assert.equal(refused.judge(1), true);
  assert.equal(refused.lostRule, "REVOKED");
});
