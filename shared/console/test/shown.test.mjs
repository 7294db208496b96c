// shown(): caller text as the console shows it. Run: node --test shared/console/test/
import { test } from "node:test";
import assert from "node:assert/strict";

import { mixesScripts, shown } from "../shown.js";

// What draws nothing or draws as something else: shown as its code point, and only these. Each
// category by its own expression, apart from shown.js's one.
const HIDDEN_BY = [
  /\p{Cc}/u, // controls
  /\p{Cf}/u, // format: bidi controls, soft hyphen, zero-width characters, tags
  /\p{Zl}/u,
  /\p{Zp}/u,
  /\p{Default_Ignorable_Code_Point}/u, // the combining grapheme joiner, variation selectors...
  /[^\u0020\P{Zs}]/u, // spaces but the space
  /[^\u002d\P{Pd}]/u, // dashes but the hyphen-minus
];

function hidden(cp) {
  const c = String.fromCodePoint(cp);
  return HIDDEN_BY.some((re) => re.test(c));
}

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
  for (const text of ["", "deploy:prod", "runner-a", "Ünïcödé ☃ 日本語", "wörker-7", "a b", "x-y"]) {
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

test("every bidi and format control is replaced, as [U+XXXX] with four upper-case hex digits", () => {
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

test("exactly what draws nothing or as something else changes: every code point of the BMP", () => {
  const changed = [];
  for (let cp = 0; cp <= 0xffff; cp++) {
    if (cp >= 0xd800 && cp <= 0xdfff) continue; // lone surrogates: not text
    const c = String.fromCodePoint(cp);
    const expected = hidden(cp) ? "[U+" + hex(cp) + "]" : c;
    if (shown(c) !== expected) changed.push(hex(cp));
  }
  assert.deepEqual(changed, []);
  // Named ones: hair space, hyphen, narrow no-break space, U+2065, paragraph separator, soft
  // hyphen, tab, line feed, non-breaking hyphen, combining grapheme joiner, a tag character.
  for (const [c, cp] of [["\u200a", "200A"], ["\u2010", "2010"], ["\u202f", "202F"], ["\u2065", "2065"],
    ["\u2029", "2029"], ["\u00ad", "00AD"], ["\t", "0009"], ["\n", "000A"], ["\u2011", "2011"],
    ["\u034f", "034F"], ["\u{E0020}", "E0020"]]) {
    assert.equal(shown(c), "[U+" + cp + "]", cp);
  }
  assert.equal(shown("🚀 runner 𝒳"), "🚀 runner 𝒳");
});

test("the seven names the attack of 2026-12-05 saw drawn alike are shown apart", () => {
  const names = [
    "worker-7",
    "work\u00ader-7", // a soft hyphen
    "worker-7\u{E0020}\u{E0041}", // tag characters
    "w\u03bfrker-7", // a Greek omicron
    "worker\u034f-7", // a combining grapheme joiner
    "worker-7\u2028", // a line separator
    "worker\u20117", // a non-breaking hyphen
    "worker\u00a0-7", // a no-break space
  ];
  const seen = names.map(shown);
  assert.equal(new Set(seen).size, names.length, JSON.stringify(seen));
  assert.equal(seen[0], "worker-7");
  assert.equal(seen[3], "w\u03bfrker-7 [mixed scripts]");
  assert.equal(seen[6], "worker[U+2011]7");
});

test("letters of scripts no one language mixes are marked; the mixes a language writes are not", () => {
  assert.equal(mixesScripts("w\u03bfrker"), true, "Latin with a Greek omicron");
  assert.equal(mixesScripts("p\u0430ypal"), true, "Latin with a Cyrillic a");
  assert.equal(mixesScripts("\u03b1\u0430"), true, "Greek with Cyrillic");
  assert.equal(mixesScripts("runner 日本語 ひらがな カタカナ"), false, "Japanese with Latin");
  assert.equal(mixesScripts("서버 server 漢字"), false, "Korean with Latin and Han");
  assert.equal(mixesScripts("注音 ㄅㄆ"), false, "Chinese with Bopomofo");
  assert.equal(mixesScripts("ελληνικά"), false, "Greek alone");
  assert.equal(mixesScripts("worker-7 #42 ☃ 🚀"), false, "digits, punctuation and symbols are of no script");
  assert.equal(mixesScripts("ελληνικά 日本"), true, "Greek with Han");
  assert.equal(shown("p\u0430ypal"), "p\u0430ypal [mixed scripts]");
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
  for (const text of ["a\u202eb\ufeffc", "w\u03bfrker\u2011"]) {
    const once = shown(text);
    assert.equal(shown(once), once, text);
  }
});
