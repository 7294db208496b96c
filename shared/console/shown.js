// Caller-chosen text, made fit to show as text. No DOM here: console.js puts the result in
// textContent, never through an HTML parser.
//
// Two texts that read alike must look different, so that a holder named to pass for another is
// seen for what it is (the attacks of 2026-12-03 and 2026-12-05):
// - Every character that draws nothing, or draws as something else, is shown as its code point:
//   controls (Cc), format characters (Cf: bidi controls, the soft hyphen, zero-width
//   characters, the tag block U+E0000-E007F), line and paragraph separators (Zl, Zp), the other
//   default-ignorable code points (the combining grapheme joiner, variation selectors, Hangul
//   fillers), spaces other than U+0020 (Zs) and dashes other than U+002D (Pd: the non-breaking
//   hyphen draws as "-"). "evil\u202Egnp.exe" is shown "evil[U+202E]gnp.exe".
// - Text whose letters mix scripts (a Greek omicron in a Latin name) is marked " [mixed scripts]",
//   unless the mix is one a language writes with (Latin with Han and kana, Han and Bopomofo, or
//   Han and Hangul: Unicode's "highly restrictive" level, UTS #39).
// Caller text is also isolated from its neighbours (console.css).

const HIDDEN =
  /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Default_Ignorable_Code_Point}]|(?![ ])\p{Zs}|(?![-])\p{Pd}/gu;

// The scripts a letter may be of, by name; any other script counts as itself ("Other:<c>").
const SCRIPTS = [
  "Latin", "Greek", "Cyrillic", "Armenian", "Hebrew", "Arabic", "Georgian", "Cherokee",
  "Devanagari", "Bengali", "Thai", "Han", "Hiragana", "Katakana", "Bopomofo", "Hangul",
].map((name) => [name, new RegExp(`\\p{Script=${name}}`, "u")]);

// Mixes that one language writes with (UTS #39, highly restrictive), each with Latin allowed.
const ALLOWED_MIXES = [
  ["Latin", "Han", "Hiragana", "Katakana"],
  ["Latin", "Han", "Bopomofo"],
  ["Latin", "Han", "Hangul"],
].map((names) => new Set(names));

function codePoint(c) {
  return "[U+" + c.codePointAt(0).toString(16).toUpperCase().padStart(4, "0") + "]";
}

// The scripts of the letters of `text` (marks, digits, punctuation and letters common to all
// scripts, such as mathematical ones, belong to none).
export function scriptsOf(text) {
  const found = new Set();
  for (const c of String(text)) {
    if (!/\p{L}/u.test(c) || /[\p{Script=Common}\p{Script=Inherited}]/u.test(c)) continue;
    const script = SCRIPTS.find(([, re]) => re.test(c));
    found.add(script ? script[0] : "Other:" + c);
  }
  return found;
}

// Whether the letters of `text` mix scripts in a way no single language writes.
export function mixesScripts(text) {
  const scripts = scriptsOf(text);
  if (scripts.size <= 1) return false;
  return !ALLOWED_MIXES.some((allowed) => [...scripts].every((s) => allowed.has(s)));
}

export const MIXED = " [mixed scripts]";

export function shown(text) {
  const string = String(text);
  const out = string.replace(HIDDEN, codePoint);
  return mixesScripts(string) && !out.endsWith(MIXED) ? out + MIXED : out;
}
