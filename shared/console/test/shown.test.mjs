// shown(): caller text as the console shows it. Run: node --test shared/console/test/
import { test } from "node:test";
import assert from "node:assert/strict";

import { shown } from "../shown.js";

// The invisible bidi and format controls shown as their code points, and only these.
const CONTROLS = [
  0x061c,
  ...range(0x200b, 0x200f),
  ...range(0x202a, 0x202e),
  ...range(0x2060, 0x2064),
  ...range(0x2066, 0x2069),
  0xfeff,
];

function range(from, to) {
  return Array.from({ length: to - from + 1 }, (_, i) => from + i);
}

function hex(cp) {
  return cp.toString(16).toUpperCase().padStart(4, "0");
}

test("plain text is left as it is", () => {
  for (const text of ["", "deploy:prod", "runner-a", "Ünïcödé ☃ 日本語", "tab\there", "line\nbreak"]) {
    assert.equal(shown(text), text);
  }
});

test("markup stays text: shown() neither escapes nor strips it", () => {
  const hostile = '<img src=x onerror="window.__pwned=1"><script>alert(1)</script>&amp;';
  assert.equal(shown(hostile), hostile);
});

test("a right-to-left override is shown as its code point", () => {
  assert.equal(shown("invoice\u202egnp.exe"), "invoice[U+202E]gnp.exe");
});

test("every control of the set is replaced, as [U+XXXX] with four upper-case hex digits", () => {
  for (const cp of CONTROLS) {
    assert.equal(shown("a" + String.fromCodePoint(cp) + "b"), "a[U+" + hex(cp) + "]b", hex(cp));
  }
  assert.equal(shown("\u061c"), "[U+061C]", "padded to four digits");
  assert.equal(shown("\ufeff"), "[U+FEFF]", "upper case");
});

test("every control in a text is replaced, not only the first", () => {
  assert.equal(shown("\u202ea\u2066b\u2069\u202e"), "[U+202E]a[U+2066]b[U+2069][U+202E]");
  // The same text twice in a row (a global regex keeps state between calls if misused).
  assert.equal(shown("x\u200by"), "x[U+200B]y");
  assert.equal(shown("x\u200by"), "x[U+200B]y");
});

test("nothing outside the set changes: every other code point of the BMP, and astral ones", () => {
  const set = new Set(CONTROLS);
  const changed = [];
  for (let cp = 0; cp <= 0xffff; cp++) {
    if (cp >= 0xd800 && cp <= 0xdfff) continue; // lone surrogates: not text
    const c = String.fromCodePoint(cp);
    if ((shown(c) !== c) !== set.has(cp)) changed.push(hex(cp));
  }
  assert.deepEqual(changed, []);
  // The neighbours of each range, by name: hair space, hyphen, narrow no-break space, U+2065.
  for (const c of ["\u200a", "\u2010", "\u202f", "\u2065", "\u2029", "\u00ad"]) assert.equal(shown(c), c);
  assert.equal(shown("🚀 runner 𝒳"), "🚀 runner 𝒳");
});

test("what is not a string is shown as String() of it", () => {
  assert.equal(shown(42), "42");
  assert.equal(shown(0), "0");
  assert.equal(shown(null), "null");
  assert.equal(shown(undefined), "undefined");
  assert.equal(shown(false), "false");
  assert.equal(shown({}), "[object Object]");
  assert.equal(shown(["a\u202e", "b"]), "a[U+202E],b");
});

test("long text is shown whole, its controls replaced", () => {
  const long = "x".repeat(100_000) + "\u202e" + "y".repeat(100_000);
  const out = shown(long);
  assert.equal(out.length, 200_000 + "[U+202E]".length);
  assert.ok(out.startsWith("x".repeat(100_000) + "[U+202E]y"));
});

test("showing shown text again changes nothing", () => {
  const once = shown("a\u202eb\ufeffc");
  assert.equal(shown(once), once);
});
