//! Who calls the MCP service (an API key's account, or a paying wallet), and what a tool call
//! leaves for its request's one log line: rmcp answers the HTTP request itself, so that goes
//! through the request's extensions.

use super::super::error::Failure;
use super::super::observe::Note;
use super::super::{ApiError, AppState, Caller};
use crate::store::usage::Usage;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::sync::Arc;

/// The account of the API key that authenticated the MCP request.
#[derive(Clone)]
pub(super) struct Account(pub(super) crate::auth::KeyHolder);

/// What a tool call leaves for its request's log line: its note, the cause of a failure, and its
/// store usage (rmcp runs the call in a task of its own, out of the request's measured scope).
#[derive(Default)]
pub(super) struct Outcome {
    pub(super) note: Option<Note>,
    pub(super) failure: Option<Failure>,
    pub(super) usage: Usage,
}

/// rmcp answers the HTTP request itself, so the outcome goes through the request's extensions
/// (shared) and [`require_key`] puts it on the response, as a route's handler would.
#[derive(Clone, Default)]
pub(super) struct OutcomeSlot(Arc<std::sync::Mutex<Outcome>>);

impl OutcomeSlot {
    pub(super) fn put(&self, outcome: Outcome) {
        if let Ok(mut slot) = self.0.lock() {
            *slot = outcome;
        }
    }

    fn take(&self) -> Outcome {
        self.0
            .lock()
            .map(|mut slot| std::mem::take(&mut *slot))
            .unwrap_or_default()
    }
}

/// The tool call's outcome onto its HTTP response, for the request's log line.
fn answer_with_outcome(mut response: Response, slot: &OutcomeSlot) -> Response {
    let outcome = slot.take();
    crate::store::usage::add(outcome.usage);
    if let Some(note) = outcome.note {
        response.extensions_mut().insert(note);
    }
    if let Some(failure) = outcome.failure {
        response.extensions_mut().insert(failure);
    }
    response
}

/// Callers with a valid API key reach the MCP service with their account; without a key, only
/// where payments are on (a wallet pays per call). A bad key is refused here.
pub(super) async fn require_key(
    State(state): State<AppState>,
    mut request: Request,
    next: Next,
) -> Response {
    let (parts, body) = request.into_parts();
    match state.auth.caller(&parts).await {
        Ok(Caller::Account(account)) => {
            request = Request::from_parts(parts, body);
            request.extensions_mut().insert(Account(account));
            let slot = OutcomeSlot::default();
            request.extensions_mut().insert(slot.clone());
            answer_with_outcome(next.run(request).await, &slot)
        }
        // A wallet pays per tool call, inside MCP: listing the tools is free, and a call
        // without its payment is answered with the offer as a tool result.
        Ok(Caller::Anonymous) if state.payments.is_some() => {
            request = Request::from_parts(parts, body);
            let slot = OutcomeSlot::default();
            request.extensions_mut().insert(slot.clone());
            answer_with_outcome(next.run(request).await, &slot)
        }
        Ok(Caller::Anonymous) => {
            ApiError::Unauthorized("an API key (X-API-KEY) is required").into_response()
        }
        Err(err) => err.into_response(),
    }
}
