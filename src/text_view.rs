//! What `leasekit acquire|renew|release|get|check|revoke|list|audit` print on a terminal: a few
//! lines read at a glance, as `etcdctl -w table` does. The JSON answer goes to pipes and files
//! (and to `--json`), so scripts see no change. Pure: the answer and the time in, text out.

use crate::inert::inert;
use leasekit_core::clock::{Millis, parse_iso8601};
use leasekit_core::lease::Op;
use serde_json::Value;

/// The answer of a call on `resources` (as the command line named them), at `now`.
pub fn answer(op: Op, resources: &[String], answer: &Value, now: Millis) -> String {
    let data = &answer["data"];
    let pass = data["status"] == "pass";
    let named: Vec<String> = resources.iter().map(|r| inert(r)).collect();
    let mut out = match data.get("session") {
        Some(session) => session_lines(op, data, session, pass, now),
        None => format!("{}: {}\n", headline(op, data, pass), named.join(", ")),
    };
    for witness in array(&data["witnesses"]) {
        out += &format!(
            "  {}: {}\n",
            text(&witness["ruleId"]),
            text(&witness["detail"])
        );
    }
    if data.get("session").is_some() {
        // Said above.
    } else if let Some(members) = data["leases"].as_array() {
        let rows = members.iter().map(|m| {
            let permit = [&m["holder"], &m["fencingToken"], &m["expiresAt"]];
            let [holder, token, expires] = permit.map(text);
            vec![text(&m["resource"]), holder, token, left(&expires, now)]
        });
        out += &table(&["RESOURCE", "HOLDER", "TOKEN", "EXPIRES"], rows);
    } else if let Some(revoked) = data["revoked"].as_array() {
        out += &permits(revoked, now);
    } else {
        // The caller's own permit when it has one (else the newest), then a semaphore's all.
        if !data["holder"].is_null() {
            out += &format!("holder   {}\n", text(&data["holder"]));
            out += &format!("token    {}\n", text(&data["fencingToken"]));
            let expires = text(&data["expiresAt"]);
            out += &format!("expires  {expires} ({})\n", left(&expires, now));
        }
        if data["limit"].as_u64().unwrap_or(1) > 1 {
            out += &format!("limit    {}\n", text(&data["limit"]));
            out += &permits(array(&data["holders"]), now);
        }
    }
    if let Some(place) = data["queuePosition"].as_u64() {
        out += &format!("queue    {place} (1 = next)\n");
    }
    if data["replayed"] == true {
        out += "replayed: the answer to the first call with this request id\n";
    }
    out
}

/// A page of `list` or `audit`, and how to ask for the next.
pub fn page(op: Op, answer: &Value, now: Millis) -> String {
    let data = &answer["data"];
    let mut out = if op == Op::Audit {
        let rows = array(&data["entries"]).iter().map(|e| {
            let ended: Vec<String> = array(&e["ended"])
                .iter()
                .map(|p| format!("{} ({})", text(&p["holder"]), text(&p["fencingToken"])))
                .collect();
            let [at, actor, reason] = [&e["at"], &e["actor"], &e["reason"]];
            // A session's revoke names the session; its permits' resources are in `ended`.
            let resource = match &e["resource"] {
                Value::Null => format!("session {}", text(&e["session"])),
                resource => text(resource),
            };
            vec![
                text(at),
                text(actor),
                resource,
                ended.join(", "),
                text(reason),
            ]
        });
        table(&["AT", "ACTOR", "RESOURCE", "ENDED", "REASON"], rows)
    } else {
        let rows = array(&data["leases"])
            .iter()
            .flat_map(|lease| listed(lease, now));
        table(&["RESOURCE", "HOLDER", "TOKEN", "EXPIRES", "WAITING"], rows)
    };
    if let Some(cursor) = data["nextCursor"].as_str() {
        out += &format!("more: --cursor {}\n", inert(cursor));
    }
    out
}

/// An answer about a session (open, keepalive, close, get of a session): what happened, then
/// the session as it stands, its permits in a table.
fn session_lines(op: Op, data: &Value, session: &Value, pass: bool, now: Millis) -> String {
    let said = match (op, pass) {
        (Op::Open, _) => "opened",
        (Op::Keepalive, true) => "kept alive",
        (Op::Keepalive, false) => "not kept alive",
        (Op::Close, true) => "closed",
        (Op::Close, false) => "not closed",
        _ if data["granted"] == true => "open",
        _ => "ended or unknown",
    };
    if session.is_null() {
        return format!("{said}: no live session\n");
    }
    let mut out = format!("{said}: session {}\n", text(&session["id"]));
    out += &format!("holder   {}\n", text(&session["holder"]));
    let expires = text(&session["expiresAt"]);
    out += &format!("expires  {expires} ({})\n", left(&expires, now));
    let rows = array(&session["leases"]).iter().map(|l| {
        vec![
            text(&l["resource"]),
            text(&l["fencingToken"]),
            text(&l["limit"]),
        ]
    });
    out + &table(&["RESOURCE", "TOKEN", "LIMIT"], rows)
}

/// What happened, in a word or two.
fn headline(op: Op, data: &Value, pass: bool) -> &'static str {
    match (op, pass) {
        (Op::Acquire | Op::Renew, true) => "granted",
        (Op::Acquire | Op::Renew, false) => "not granted",
        (Op::Release, true) => "released",
        (Op::Release, false) => "not released",
        (Op::Watch, _) if data["changed"] == false => "unchanged",
        (Op::Check, true) => "current",
        (Op::Check, false) => "not current",
        (Op::Revoke, true) => "revoked",
        (Op::Revoke, false) => "nothing revoked",
        _ if data["granted"] == true => "held",
        _ => "free",
    }
}

/// A listed resource's rows: one a permit (or one with none, for a queue alone), its waiting
/// callers counted on the first.
fn listed(lease: &Value, now: Millis) -> Vec<Vec<String>> {
    let resource = text(&lease["resource"]);
    let waiting = array(&lease["waiters"]).len().to_string();
    let holders = array(&lease["holders"]);
    if holders.is_empty() {
        return vec![vec![resource, "-".into(), "-".into(), "-".into(), waiting]];
    }
    holders
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let (name, queue) = match i {
                0 => (resource.clone(), waiting.clone()),
                _ => (String::new(), String::new()),
            };
            let expires = left(&text(&p["expiresAt"]), now);
            vec![
                name,
                text(&p["holder"]),
                text(&p["fencingToken"]),
                expires,
                queue,
            ]
        })
        .collect()
}

fn permits(permits: &[Value], now: Millis) -> String {
    let rows = permits.iter().map(|p| {
        let expires = left(&text(&p["expiresAt"]), now);
        vec![text(&p["holder"]), text(&p["fencingToken"]), expires]
    });
    table(&["HOLDER", "TOKEN", "EXPIRES"], rows)
}

/// Columns padded to their widest cell; `(none)` for no rows.
fn table(header: &[&str], rows: impl IntoIterator<Item = Vec<String>>) -> String {
    let rows: Vec<Vec<String>> = rows.into_iter().collect();
    if rows.is_empty() {
        return "(none)\n".into();
    }
    let head: Vec<String> = header.iter().map(|h| (*h).to_owned()).collect();
    let mut widths: Vec<usize> = head.iter().map(|h| h.chars().count()).collect();
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    std::iter::once(&head)
        .chain(&rows)
        .map(|row| {
            let cells = row.iter().zip(&widths);
            let line: Vec<String> = cells.map(|(c, w)| format!("{c:<w$}")).collect();
            line.join("  ").trim_end().to_owned() + "\n"
        })
        .collect()
}

/// `in 1 h 29 min` until an ISO time, `expired` after it, the text itself if it is no time.
fn left(iso: &str, now: Millis) -> String {
    match parse_iso8601(iso) {
        Some(at) if at > now => format!("in {}", duration((at - now) / 1000)),
        Some(_) => "expired".into(),
        // Already shown text (see `text`): as it is.
        None => iso.to_owned(),
    }
}

/// Whole seconds as a person reads them, as the console shows them: `42 s`, `4 min 12 s`,
/// `1 h 29 min`, `2 d 3 h` (the two largest units; the smaller left out when 0).
fn duration(seconds: i64) -> String {
    const UNITS: [(&str, i64); 4] = [("d", 86_400), ("h", 3_600), ("min", 60), ("s", 1)];
    let Some(first) = UNITS.iter().position(|&(_, size)| seconds >= size) else {
        return "0 s".into();
    };
    let (name, size) = UNITS[first];
    let mut text = format!("{} {name}", seconds / size);
    if let Some(&(small_name, small_size)) = UNITS.get(first + 1) {
        let small = seconds % size / small_size;
        if small > 0 {
            text += &format!(" {small} {small_name}");
        }
    }
    text
}

/// A field as shown: a string as it is (but for what a terminal would act on), `-` for null,
/// anything else as JSON.
fn text(value: &Value) -> String {
    match value {
        Value::String(s) => inert(s),
        Value::Null => "-".into(),
        // JSON escapes C0 controls only: a hostile server's number-that-is-not could carry more.
        other => inert(&other.to_string()),
    }
}

fn array(value: &Value) -> &[Value] {
    value.as_array().map_or(&[], Vec::as_slice)
}

#[cfg(test)]
mod tests {
    use super::*;
    use leasekit_core::clock::iso8601;
    use serde_json::json;

    const NOW: Millis = 1_795_946_400_000;

    fn at(seconds: i64) -> String {
        iso8601(NOW + seconds * 1000)
    }

    #[test]
    fn a_session_shows_its_end_and_its_permits_and_an_ended_one_says_so() {
        let session = json!({"id": "u2cnhkxbmzdl3udt4lig42sabu", "holder": "agent-1",
            "expiresAt": at(90), "leases": [{"resource": "deploy:prod", "fencingToken": 7, "limit": 1}]});
        let answer = json!({"data": {"status": "pass", "op": "keepalive", "granted": true,
            "session": session, "witnesses": []}});
        let text = super::answer(Op::Keepalive, &[], &answer, NOW);
        assert_eq!(
            text,
            format!(
                "kept alive: session u2cnhkxbmzdl3udt4lig42sabu\nholder   agent-1\nexpires  {} (in 1 min 30 s)\n{}",
                at(90),
                "RESOURCE     TOKEN  LIMIT\ndeploy:prod  7      1\n"
            )
        );
        let ended = json!({"data": {"status": "fail", "op": "keepalive", "granted": false, "session": null,
            "witnesses": [{"ruleId": "SESSION_EXPIRED", "detail": "the session has ended"}]}});
        let text = super::answer(Op::Keepalive, &[], &ended, NOW);
        assert_eq!(
            text,
            "not kept alive: no live session\n  SESSION_EXPIRED: the session has ended\n"
        );
    }

    #[test]
    fn what_a_terminal_would_act_on_is_written_out() {
        let hostile = "\u{1b}]0;pwned\u{7}\u{1b}[31mw1\nholder   admin\r\u{202e}txt.exe\u{9b}2J\\";
        let answer = json!({"data": {"status": "pass", "op": "get", "granted": true, "holder": hostile,
            "fencingToken": 1, "expiresAt": at(30), "limit": 1, "holders": [], "witnesses": []}});
        let text = super::answer(Op::Get, &["r".into()], &answer, NOW);
        assert!(
            !text.chars().any(|c| c.is_control() && c != '\n'),
            "{text:?}"
        );
        assert_eq!(text.lines().count(), 4, "{text}");
        assert!(text.contains(r"holder   \u{1b}]0;pwned\u{7}\u{1b}[31mw1\u{a}holder   admin\u{d}\u{202e}txt.exe\u{9b}2J\\"), "{text}");
        let audit = json!({"data": {"op": "audit", "entries": [{"at": "t", "actor": "key:k", "resource": "r",
            "ended": [{"holder": "\u{1b}[2J", "fencingToken": 1}], "reason": "why\u{1b}[8m"}]}});
        assert!(!page(Op::Audit, &audit, NOW).contains('\u{1b}'));
    }

    /// A server the CLI is pointed at may put anything anywhere: a cursor, a token that is
    /// not a number, a rule that is not a string (the attack of the third session of
    /// 2026-12-05 found those printed raw).
    #[test]
    fn what_a_hostile_server_sends_is_shown_inert_too() {
        let evil = "\u{1b}[2J\u{9b}31m\u{202e}\u{2028}x";
        let list = json!({"data": {"op": "list", "nextCursor": evil, "leases": [
            {"resource": evil, "holders": [{"holder": "a", "fencingToken": evil, "expiresAt": evil}], "waiters": []}]}});
        let answer = json!({"data": {"status": "fail", "op": "get", "granted": true, "holder": "a",
            "fencingToken": [evil], "expiresAt": evil, "limit": {"x": evil}, "holders": [],
            "witnesses": [{"ruleId": [evil], "detail": {"d": evil}}]}});
        for shown in [
            page(Op::List, &list, NOW),
            super::answer(Op::Get, &[evil.to_owned()], &answer, NOW),
        ] {
            let acting =
                |c: char| (c.is_control() && c != '\n') || matches!(c, '\u{202e}' | '\u{2028}');
            assert!(!shown.chars().any(acting), "{shown:?}");
        }
    }

    #[test]
    fn durations_read_as_the_console_shows_them() {
        let cases = [
            (0, "0 s"),
            (42, "42 s"),
            (60, "1 min"),
            (252, "4 min 12 s"),
            (5_340, "1 h 29 min"),
            (3_600, "1 h"),
            (183_600, "2 d 3 h"),
        ];
        for (seconds, text) in cases {
            assert_eq!(duration(seconds), text, "{seconds}");
        }
    }

    #[test]
    fn a_grant_shows_the_permit_and_the_time_left() {
        let answer = json!({"data": {"status": "pass", "op": "acquire", "granted": true, "holder": "w1",
            "fencingToken": 7, "expiresAt": at(5_340), "limit": 1, "holders": [], "replayed": false, "witnesses": []}});
        let text = super::answer(Op::Acquire, &["deploy:prod".into()], &answer, NOW);
        let expires = at(5_340);
        assert_eq!(
            text,
            format!(
                "granted: deploy:prod\nholder   w1\ntoken    7\nexpires  {expires} (in 1 h 29 min)\n"
            )
        );
    }

    #[test]
    fn a_refusal_names_its_rule_and_who_holds_it() {
        let answer = json!({"data": {"status": "fail", "op": "acquire", "granted": false, "holder": "w2",
            "fencingToken": 3, "expiresAt": at(-1), "limit": 1, "holders": [], "queuePosition": 2, "replayed": true,
            "witnesses": [{"ruleId": "LEASE_HELD", "detail": "held by another holder"}]}});
        let text = super::answer(Op::Acquire, &["r".into()], &answer, NOW);
        assert!(
            text.starts_with("not granted: r\n  LEASE_HELD: held by another holder\nholder   w2\n"),
            "{text}"
        );
        assert!(
            text.contains("(expired)\nqueue    2 (1 = next)\nreplayed"),
            "{text}"
        );
    }

    #[test]
    fn permits_and_sets_are_tables() {
        let semaphore = json!({"data": {"status": "pass", "op": "get", "granted": true, "limit": 3,
            "holder": "a", "fencingToken": 1, "expiresAt": at(30),
            "holders": [{"holder": "a", "fencingToken": 1, "expiresAt": at(30)},
                        {"holder": "longer-name", "fencingToken": 12, "expiresAt": at(90)}], "witnesses": []}});
        assert_eq!(
            super::answer(Op::Get, &["pool".into()], &semaphore, NOW),
            format!(
                "held: pool\nholder   a\ntoken    1\nexpires  {} (in 30 s)\nlimit    3\nHOLDER       TOKEN  EXPIRES\na            1      in 30 s\nlonger-name  12     in 1 min 30 s\n",
                at(30)
            )
        );
        let set = json!({"data": {"status": "fail", "op": "acquire", "granted": false, "witnesses": [],
            "leases": [{"resource": "a", "holder": "me", "fencingToken": 4, "expiresAt": at(10)},
                       {"resource": "b", "holder": null, "fencingToken": null, "expiresAt": null}]}});
        assert_eq!(
            super::answer(Op::Acquire, &["a".into(), "b".into()], &set, NOW),
            "not granted: a, b\nRESOURCE  HOLDER  TOKEN  EXPIRES\na         me      4      in 10 s\nb         -       -      -\n"
        );
        let free = json!({"data": {"status": "pass", "op": "get", "granted": false, "holder": null, "limit": 1, "witnesses": []}});
        assert_eq!(
            super::answer(Op::Get, &["x".into()], &free, NOW),
            "free: x\n"
        );
    }

    #[test]
    fn pages_list_each_permit_and_say_how_to_go_on() {
        let list = json!({"data": {"status": "pass", "op": "list", "nextCursor": "abc", "leases": [
            {"resource": "pool", "holders": [{"holder": "a", "fencingToken": 1, "expiresAt": at(30)},
                                             {"holder": "b", "fencingToken": 2, "expiresAt": at(40)}],
             "waiters": [{"holder": "c", "until": at(30)}]},
            {"resource": "queue-only", "holders": [], "waiters": [{"holder": "d", "until": at(30)}]}]}});
        assert_eq!(
            page(Op::List, &list, NOW),
            "RESOURCE    HOLDER  TOKEN  EXPIRES  WAITING\npool        a       1      in 30 s  1\n            b       2      in 40 s\nqueue-only  -       -      -        1\nmore: --cursor abc\n"
        );
        let audit = json!({"data": {"status": "pass", "op": "audit", "nextCursor": null, "entries": [
            {"at": "2026-12-05T10:00:00.000Z", "actor": "key:k1", "resource": "r",
             "ended": [{"holder": "w", "fencingToken": 9, "expiresAt": at(1)}], "reason": "stuck"}]}});
        assert_eq!(
            page(Op::Audit, &audit, NOW),
            "AT                        ACTOR   RESOURCE  ENDED  REASON\n2026-12-05T10:00:00.000Z  key:k1  r         w (9)  stuck\n"
        );
        let empty =
            json!({"data": {"status": "pass", "op": "list", "leases": [], "nextCursor": null}});
        assert_eq!(page(Op::List, &empty, NOW), "(none)\n");
    }
}
