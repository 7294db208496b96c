// pad(), formatTime() and countdownText(). Run: node --test shared/console/test/
import { test, afterEach } from "node:test";
import assert from "node:assert/strict";

import { countdownText, durationText, formatTime, pad } from "../time.js";

// formatTime shows this browser's local time: each test picks its zone (Node reads TZ anew when
// it is set), and the zone is put back after it.
const zone = process.env.TZ;
afterEach(() => {
  if (zone === undefined) delete process.env.TZ;
  else process.env.TZ = zone;
});

test("pad: two digits at least", () => {
  assert.equal(pad(0), "00");
  assert.equal(pad(7), "07");
  assert.equal(pad(10), "10");
  assert.equal(pad(59), "59");
  assert.equal(pad(123), "123");
});

test("formatTime: date and time, zero-padded, in UTC", () => {
  process.env.TZ = "UTC";
  assert.equal(formatTime("2026-12-03T10:00:00Z"), "2026-12-03 10:00:00");
  assert.equal(formatTime("2026-02-03T04:05:06.789Z"), "2026-02-03 04:05:06");
  assert.equal(formatTime("2026-12-31T23:59:59.999Z"), "2026-12-31 23:59:59");
});

test("formatTime: the local time of the browser's zone, across midnight and the year", () => {
  process.env.TZ = "Asia/Kolkata"; // +05:30
  assert.equal(formatTime("2026-12-03T10:00:00Z"), "2026-12-03 15:30:00");
  process.env.TZ = "America/New_York"; // -05:00 in winter
  assert.equal(formatTime("2026-01-01T03:04:05Z"), "2025-12-31 22:04:05");
});

test("formatTime: what is not a time is shown as it came", () => {
  process.env.TZ = "UTC";
  assert.equal(formatTime("not a time"), "not a time");
  assert.equal(formatTime(""), "");
  assert.equal(formatTime(undefined), "undefined"); // a missing field
  const hostile = "<img src=x onerror=alert(1)>";
  assert.equal(formatTime(hostile), hostile);
});

test("countdownText: whole seconds left, rounded down", () => {
  const now = 1_800_000_000_000;
  assert.deepEqual(countdownText(now + 60_000, now), { text: "1 min", soon: false, expired: false, known: true });
  assert.equal(countdownText(now + 59_999, now).text, "59 s");
  assert.equal(countdownText(now + 3_600_000, now).text, "1 h");
  assert.equal(countdownText(now + 5_363_000, now).text, "1 h 29 min");
});

test("countdownText: the prefix goes before the seconds, and a missing one adds nothing", () => {
  const now = 1_800_000_000_000;
  assert.equal(countdownText(now + 42_000, now, "place kept ").text, "place kept 42 s");
  assert.equal(countdownText(now + 42_000, now, undefined).text, "42 s");
  assert.equal(countdownText(now + 42_000, now, null).text, "42 s");
  assert.equal(countdownText(now + 42_000, now, "").text, "42 s");
});

test("countdownText: soon in the last 10 s, not before", () => {
  const now = 0;
  assert.equal(countdownText(11_000, now).soon, false);
  assert.deepEqual(countdownText(10_999, now), { text: "10 s", soon: true, expired: false, known: true });
  assert.deepEqual(countdownText(1_000, now), { text: "1 s", soon: true, expired: false, known: true });
});

test("countdownText: under a second left is expired, and so is every time past", () => {
  const now = 1_800_000_000_000;
  const expired = { text: "expired", soon: false, expired: true, known: true };
  assert.deepEqual(countdownText(now + 999, now), expired);
  assert.deepEqual(countdownText(now, now), expired);
  assert.deepEqual(countdownText(now - 1, now), expired);
  assert.deepEqual(countdownText(now - 86_400_000, now), expired);
  assert.equal(countdownText(now - 5_000, now, "place kept ").text, "expired", "no prefix once over");
});

test("countdownText: counting down past zero never shows a negative or a rising number", () => {
  const at = 1_800_000_000_000;
  let last = Infinity;
  let over = false;
  for (let now = at - 15_000; now <= at + 15_000; now += 250) {
    const { text, expired } = countdownText(at, now);
    assert.ok(!text.includes("-"), text);
    if (over) assert.equal(text, "expired", "expired stays expired");
    if (expired) over = true;
    else {
      const seconds = Number(text.split(" ")[0]);
      assert.ok(seconds >= 1 && seconds <= last, `${seconds} after ${last}`);
      last = seconds;
    }
  }
  assert.ok(over);
});

test("countdownText: a missing or broken time shows ? and is neither soon nor expired", () => {
  const unknown = { text: "?", soon: false, expired: false, known: false };
  assert.deepEqual(countdownText(NaN, 0), unknown);
  assert.deepEqual(countdownText(Date.parse(undefined), 0), unknown);
  assert.deepEqual(countdownText(Date.parse("soon"), 0, "place kept "), unknown);
  assert.deepEqual(countdownText(Infinity, 0), unknown);
});

test("durationText: the two largest units, as a person reads them", () => {
  assert.equal(durationText(0), "0 s");
  assert.equal(durationText(1), "1 s");
  assert.equal(durationText(59), "59 s");
  assert.equal(durationText(60), "1 min");
  assert.equal(durationText(61), "1 min 1 s");
  assert.equal(durationText(1763), "29 min 23 s");
  assert.equal(durationText(3599), "59 min 59 s");
  assert.equal(durationText(3600), "1 h");
  assert.equal(durationText(3659), "1 h", "seconds are not shown past an hour");
  assert.equal(durationText(5363), "1 h 29 min");
  assert.equal(durationText(86400 * 7 + 3600 * 5), "7 d 5 h");
});
