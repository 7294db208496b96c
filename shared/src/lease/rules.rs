//! Every rule a lease answer's witness may name, once, with what it means to the caller: the
//! answer schema (`shared/schemas/lease-answer.json`, and so `/openapi.json` and the MCP tools'
//! output schema) lists exactly these, and the tests below hold the schema and the code to them.
//! The 400s a request's shape earns (`NOT_TAKEN`, `ONE_SET`...) are errors, not answers.

/// (rule id, what it means), in the order the schema lists them.
pub const RULES: [(&str, &str); 15] = [
    (
        "LEASE_HELD",
        "Another holder has the lease, or every permit of the semaphore is held: try again after one lapses or is released, or wait for it (waitSeconds).",
    ),
    (
        "WAITERS_AHEAD",
        "Callers waiting before you are served first: wait with waitSeconds to keep a place in the queue.",
    ),
    (
        "QUEUE_FULL",
        "The resource has as many waiters as it keeps (64): try again later.",
    ),
    (
        "LIMIT_MISMATCH",
        "The resource's live permits were granted under another limit: state the same limit.",
    ),
    (
        "TOKEN_EXHAUSTED",
        "The resource has issued every fencing token below 2^53: use another name.",
    ),
    (
        "NOT_HOLDER",
        "Another holder has this lease or session: only its holder may renew or release it, or keep alive, close or acquire in the session.",
    ),
    (
        "TOKEN_MISMATCH",
        "The token is not the live lease's token: yours was replaced by a newer acquisition.",
    ),
    (
        "LEASE_EXPIRED",
        "Your lease lapsed: acquire it again for a new token.",
    ),
    (
        "NO_HOLD",
        "You hold no live permit here with this token (a release's every refusal, with the reason in its detail; a revoke that finds nothing to end).",
    ),
    (
        "REVOKED",
        "An operator revoked this permit (see op audit): acquire again for a new token.",
    ),
    (
        "TOKEN_NOT_CURRENT",
        "check: no live permit of this resource has this token (and holder, when given).",
    ),
    (
        "SESSION_EXPIRED",
        "The session has ended (closed, revoked or lapsed) or is unknown: its permits are free; open a new one.",
    ),
    (
        "SESSION_FULL",
        "The session holds 256 permits, its most: release one, or open another session.",
    ),
    (
        "DONE",
        "The resource is finished (release with done): its actual says who finished it, with which token, when, and its result. It is granted again only after keepDoneSeconds or a reopen.",
    ),
    (
        "NOT_DONE",
        "reopen: the resource is not finished, or not by the holder and token named.",
    ),
];

#[cfg(test)]
mod tests {
    use super::RULES;
    use serde_json::Value;

    /// The answer schema's `ruleId` is one of the table's, each with its meaning.
    #[test]
    fn the_answer_schema_lists_every_rule_with_its_meaning() {
        let schema: Value = serde_json::from_str(crate::schema::LEASE_ANSWER_JSON).unwrap();
        let witnesses = &schema["properties"]["data"]["properties"]["witnesses"];
        let rule = &witnesses["items"]["properties"]["ruleId"];
        let listed: Vec<(&str, &str)> = rule["oneOf"]
            .as_array()
            .expect("ruleId is one of the rules")
            .iter()
            .map(|r| {
                (
                    r["const"].as_str().unwrap(),
                    r["description"].as_str().unwrap(),
                )
            })
            .collect();
        assert_eq!(listed, RULES);
    }

    /// Every rule the lease code can cite is in the table: read from the source, so a new rule
    /// without its row fails here (and its answer would fail the schema).
    #[test]
    fn every_rule_the_code_cites_is_in_the_table() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lease");
        let files = [
            "decide.rs",
            "decide/semaphore.rs",
            "decide/queue.rs",
            "answer.rs",
            "session.rs",
        ];
        let mut cited = std::collections::BTreeSet::new();
        for file in files {
            let code = std::fs::read_to_string(dir.join(file)).unwrap();
            let code = code.split("#[cfg(test)]").next().unwrap_or_default();
            for part in code.split("Witness::new(").skip(1) {
                let id: String = part
                    .trim_start()
                    .trim_start_matches('"')
                    .chars()
                    .take_while(|c| c.is_ascii_uppercase() || *c == '_')
                    .collect();
                cited.insert(id);
            }
        }
        let known: std::collections::BTreeSet<String> =
            RULES.iter().map(|(id, _)| (*id).to_owned()).collect();
        assert_eq!(cited, known);
    }
}
