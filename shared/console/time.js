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

// What a countdown to `at` (ms since the epoch; NaN when the time was missing or not a time)
// shows at `now`: whole seconds left after `prefix`, or "expired" once none is; `soon` in the
// last 10 s. An unknown time shows "?" and is neither (`known` false: its looks stay as they are).
export function countdownText(at, now, prefix) {
  if (!Number.isFinite(at)) return { text: "?", soon: false, expired: false, known: false };
  const seconds = Math.floor((at - now) / 1000);
  return {
    text: seconds > 0 ? (prefix || "") + seconds + " s" : "expired",
    soon: seconds > 0 && seconds <= 10,
    expired: seconds <= 0,
    known: true,
  };
}
