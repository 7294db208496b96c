// Caller-chosen text, made fit to show as text. No DOM here: console.js puts the result in
// textContent, never through an HTML parser.

// Caller-chosen text may carry invisible bidi and format controls (U+202E turns the rest of
// a line around, so "evil\u202Egnp.exe" reads as something else): each is shown as its code
// point, and caller text is isolated from its neighbours (console.css), so it reads as what it is.
const CONTROLS = /[\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]/g;

export function shown(text) {
  return String(text).replace(
    CONTROLS,
    (c) => "[U+" + c.codePointAt(0).toString(16).toUpperCase().padStart(4, "0") + "]",
  );
}
