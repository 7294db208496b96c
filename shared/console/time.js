// Times as the console shows them. No DOM here.

export function pad(n) {
  return String(n).padStart(2, "0");
}

// 2026-12-03 10:00:00 (this browser's time zone); the ISO time goes in title/datetime.
export function formatTime(iso) {
  const t = new Date(iso);
  if (Number.isNaN(t.getTime())) return String(iso);
  return (
    t.getFullYear() + "-" + pad(t.getMonth() + 1) + "-" + pad(t.getDate()) + " " +
    pad(t.getHours()) + ":" + pad(t.getMinutes()) + ":" + pad(t.getSeconds())
  );
}

// Whole seconds as a person reads them: "42 s", "4 min 12 s", "1 h 29 min", "2 d 3 h" (the two
// largest units, the smaller left out when it is 0). Raw seconds past a minute ("1763 s") had to
// be worked out.
export function durationText(seconds) {
  const units = [["d", 86400], ["h", 3600], ["min", 60], ["s", 1]];
  const first = units.findIndex(([, size]) => seconds >= size);
  if (first < 0) return "0 s";
  const [bigName, bigSize] = units[first];
  const big = Math.floor(seconds / bigSize);
  const next = units[first + 1];
  if (!next) return big + " " + bigName;
  const small = Math.floor((seconds % bigSize) / next[1]);
  return big + " " + bigName + (small > 0 ? " " + small + " " + next[0] : "");
}

// What a countdown to `at` (ms since the epoch; NaN when the time was missing or not a time)
// shows at `now`: the time left after `prefix` (durationText), or "expired" once none is; `soon`
// in the last 10 s. An unknown time shows "?" and is neither (`known` false: its looks stay as
// they are).
export function countdownText(at, now, prefix) {
  if (!Number.isFinite(at)) return { text: "?", soon: false, expired: false, known: false };
  const seconds = Math.floor((at - now) / 1000);
  return {
    text: seconds > 0 ? (prefix || "") + durationText(seconds) : "expired",
    soon: seconds > 0 && seconds <= 10,
    expired: seconds <= 0,
    known: true,
  };
}
