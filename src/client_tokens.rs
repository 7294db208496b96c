//! DynamoDB's `ClientRequestToken` idempotency for `TransactWriteItems`, kept by the embedded
//! store instead of by dynoxide: a transaction sent again under its token (the SDK's retry after
//! a lost answer) is answered as the first was, not run twice; the same token with other items
//! is refused as DynamoDB refuses it.
//!
//! Why here. dynoxide keeps its tokens for DynamoDB's whole 10-minute window and evicts them by
//! walking every token it holds on each transaction that carries one. The SDK sends a token with
//! every transaction, and every lease call with a requestId is one: at 16 clients its CPU per
//! call doubled within 30 s, and the server's throughput fell from 1,478 to 635 calls/s, until
//! the tokens expired (the attack of 2026-12-05; BENCHMARKS.md). Here tokens leave in the order
//! they came, so each call evicts only what expired: constant work per call.
//!
//! The window is shorter than DynamoDB's: the SDK retries a call within its own timeouts
//! (seconds), so a token outlives any retry of it by far at a minute; and the window is bounded
//! in count too, so that memory stays bounded under any load (some 200 bytes a token).

use std::collections::{HashMap, VecDeque};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::time::{Duration, Instant};

/// How long a token is remembered.
pub const WINDOW: Duration = Duration::from_secs(60);

/// Tokens remembered at most; the oldest go first.
pub const MAX_TOKENS: usize = 100_000;

/// A status and a JSON body, as the engine answers.
pub type Answer = (u16, String);

/// The tokens of the last [`WINDOW`], each with its request's hash and its answer.
#[derive(Default)]
pub struct ClientTokens {
    answers: HashMap<String, (u64, Answer)>,
    /// When each token came, oldest first.
    order: VecDeque<(Instant, String)>,
}

impl ClientTokens {
    /// Answer the `TransactWriteItems` request `body` at `now`: a token seen in the window is
    /// answered as before (or refused, if its items differ); else `execute` runs the request
    /// without its token (dynoxide must not keep it), and a success is remembered.
    pub fn run(
        &mut self,
        body: &str,
        now: Instant,
        execute: impl FnOnce(&str) -> Answer,
    ) -> Answer {
        self.evict(now);
        let Some((token, rest)) = token_of(body) else {
            return execute(body);
        };
        let hash = hash_of(&rest);
        match self.answers.get(&token) {
            Some((first, answer)) if *first == hash => return answer.clone(),
            Some(_) => return mismatch(),
            None => {}
        }
        let answer = execute(&rest);
        if answer.0 == 200 {
            if self.order.len() >= MAX_TOKENS
                && let Some((_, oldest)) = self.order.pop_front()
            {
                self.answers.remove(&oldest);
            }
            self.answers.insert(token.clone(), (hash, answer.clone()));
            self.order.push_back((now, token));
        }
        answer
    }

    /// Forget the tokens that came a whole window before `now`.
    fn evict(&mut self, now: Instant) {
        while let Some((at, _)) = self.order.front() {
            if now.duration_since(*at) < WINDOW {
                break;
            }
            if let Some((_, token)) = self.order.pop_front() {
                self.answers.remove(&token);
            }
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.answers.len()
    }
}

/// The request's token, and the request without it. `None`: it carries none (or is not a JSON
/// object, which dynoxide refuses itself).
fn token_of(body: &str) -> Option<(String, String)> {
    let mut request: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(body).ok()?;
    let token = match request.remove("ClientRequestToken")? {
        serde_json::Value::String(token) => token,
        _ => return None,
    };
    Some((token, serde_json::Value::Object(request).to_string()))
}

fn hash_of(rest: &str) -> u64 {
    let mut hasher = DefaultHasher::new();
    rest.hash(&mut hasher);
    hasher.finish()
}

/// DynamoDB's answer to a token reused with other items.
fn mismatch() -> Answer {
    (
        400,
        r#"{"__type":"com.amazonaws.dynamodb.v20120810#IdempotentParameterMismatchException","message":"An error occurred (IdempotentParameterMismatchException)"}"#.into(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    fn request(token: Option<&str>, item: &str) -> String {
        let mut body =
            serde_json::json!({"TransactItems": [{"Put": {"Item": {"pk": {"S": item}}}}]});
        if let Some(token) = token {
            body["ClientRequestToken"] = token.into();
        }
        body.to_string()
    }

    #[test]
    fn a_token_sent_again_is_answered_as_before_and_runs_once() {
        let mut tokens = ClientTokens::default();
        let runs = Cell::new(0);
        let now = Instant::now();
        let execute = |body: &str| {
            runs.set(runs.get() + 1);
            assert!(
                !body.contains("ClientRequestToken"),
                "dynoxide keeps no token: {body}"
            );
            (200, format!("{{\"run\":{}}}", runs.get()))
        };
        let first = tokens.run(&request(Some("t-1"), "a"), now, execute);
        let again = tokens.run(&request(Some("t-1"), "a"), now + WINDOW / 2, execute);
        assert_eq!((first.clone(), again), ((200, "{\"run\":1}".into()), first));
        assert_eq!(runs.get(), 1);
        // Other items under the same token: refused, as DynamoDB refuses them, and not run.
        let other = tokens.run(&request(Some("t-1"), "b"), now, execute);
        assert_eq!(other.0, 400);
        assert!(other.1.contains("IdempotentParameterMismatchException"));
        assert_eq!(runs.get(), 1);
        // Without a token, every request runs.
        tokens.run(&request(None, "a"), now, execute);
        tokens.run(&request(None, "a"), now, execute);
        assert_eq!(runs.get(), 3);
    }

    #[test]
    fn a_failure_is_not_remembered_and_a_token_is_forgotten_after_the_window() {
        let mut tokens = ClientTokens::default();
        let now = Instant::now();
        let failed = tokens.run(&request(Some("t"), "a"), now, |_| (500, "{}".into()));
        assert_eq!(failed.0, 500);
        assert_eq!(tokens.len(), 0, "a retry of a failure runs again");
        tokens.run(&request(Some("t"), "a"), now, |_| (200, "{}".into()));
        let later = tokens.run(&request(Some("t"), "b"), now + WINDOW, |_| {
            (200, "{\"b\":1}".into())
        });
        assert_eq!(later, (200, "{\"b\":1}".into()), "the token is free again");
    }

    /// Each call evicts only what expired before it, oldest first: the work per call does not
    /// grow with the tokens held (dynoxide's walked all of them), and the count is bounded.
    #[test]
    fn tokens_leave_in_the_order_they_came_and_never_exceed_the_bound() {
        let mut tokens = ClientTokens::default();
        let start = Instant::now();
        for i in 0..10 {
            let at = start + Duration::from_secs(i * 10);
            tokens.run(&request(Some(&format!("t{i}")), "a"), at, |_| {
                (200, "{}".into())
            });
        }
        assert_eq!(tokens.len(), 6, "t0..t3 are older than a minute at t9");
        assert_eq!(tokens.order.front().map(|(_, t)| t.as_str()), Some("t4"));
        let mut bounded = ClientTokens::default();
        for i in 0..MAX_TOKENS + 5 {
            bounded.run(&request(Some(&format!("t{i}")), "a"), start, |_| {
                (200, "{}".into())
            });
        }
        assert_eq!(bounded.len(), MAX_TOKENS);
        assert!(!bounded.answers.contains_key("t0") && bounded.answers.contains_key("t5"));
    }
}
