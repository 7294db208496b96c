//! A watch as a stream of server-sent events: `POST /api/v1/lease` with
//! `Accept: text/event-stream` (and not `application/json`) and a watch's body answers `text/event-stream`, one `change`
//! event per change (its data the answer a watch gives, signed unless `?signed=false`; its id the
//! state's tag), from watches chained on the tag inside the server. The first event is the state
//! as it stands (or, with a `stateTag`, the first state that is not that one). A comment line
//! every 15 s keeps an idle stream's connection open. A failed watch ends the stream with an
//! `error` event (its data the error's JSON body and its HTTP `status`): reconnect with the last id as `stateTag`, and
//! no change is missed.
//!
//! Served by `leasekit serve` only: a Lambda function behind API Gateway would be billed for
//! the whole open stream while it polls the table (ADR 0011), so there a stream is refused with
//! 406 and a watch is one call. With an API key only: a paid call buys one answer.

use super::{as_asked, for_account};
use crate::auth::KeyHolder;
use crate::http::{ApiError, AppState};
use crate::lease::LeaseRequest;
use crate::lease::ops::Op;
use crate::service::{HungUp, this_hang_up};
use axum::http::header::ACCEPT;
use axum::http::request::Parts;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use std::convert::Infallible;
use std::time::Duration;

/// How long each watch of the chain waits (the contract's bound).
const WAIT_SECONDS: u32 = 20;
/// How often an idle stream says something (a comment), under the server's idle timeout.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// Whether the caller asks for a stream: `text/event-stream` among its Accept header's types,
/// and not `application/json`. A caller that takes either (an MCP client sends both on every
/// request) gets the one JSON answer every other caller gets.
pub(crate) fn asked(parts: &Parts) -> bool {
    let accepts = |wanted: &str| {
        parts
            .headers
            .get_all(ACCEPT)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .any(|media| {
                let essence = media.split(';').next().unwrap_or("").trim();
                essence.eq_ignore_ascii_case(wanted)
            })
    };
    accepts("text/event-stream") && !accepts("application/json")
}

/// Why a stream is refused where it is, if it is.
pub(crate) fn refusal(state: &AppState, request: &LeaseRequest, keyed: bool) -> Option<ApiError> {
    if request.op != Op::Watch {
        return Some(ApiError::NotAcceptable(format!(
            "only a watch streams (text/event-stream); {} answers application/json",
            request.op.as_str()
        )));
    }
    if !state.streams {
        return Some(ApiError::NotAcceptable(
            "this deployment answers a watch once (application/json): chain watches on \
             stateTag (leasekit serve streams them)"
                .into(),
        ));
    }
    if !keyed {
        return Some(ApiError::NotAcceptable(
            "a stream needs an API key: a paid watch is one call (application/json); chain \
             them on stateTag"
                .into(),
        ));
    }
    None
}

/// The stream of `request`'s changes (a watch, by `holder`'s key), as `signed` asks.
pub(crate) fn events(
    state: AppState,
    holder: KeyHolder,
    mut request: LeaseRequest,
    request_sha256: [u8; 32],
    signed: bool,
) -> Response {
    request.wait_seconds = Some(WAIT_SECONDS);
    let chain = Chain {
        state,
        holder,
        request,
        request_sha256,
        signed,
        // Seen from the socket itself: a stream only writes when something changes, so hyper
        // would not learn of a caller gone for up to a keep-alive interval, while its watch
        // holds one of the account's waits.
        hung_up: this_hang_up().map_or_else(
            || Box::pin(std::future::pending()) as HungUp,
            |watch| watch(),
        ),
    };
    // After a failed watch's `error` event, nothing more: the stream ends.
    let changes = futures_util::stream::unfold(Some(chain), |chain| async move {
        let mut chain = chain?;
        let next = chain.next_change().await?;
        let more = next.is_ok().then_some(chain);
        Some((
            Ok::<_, Infallible>(next.unwrap_or_else(|failed| failed)),
            more,
        ))
    });
    Sse::new(changes)
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE))
        .into_response()
}

/// Watches chained on the tag each one saw.
struct Chain {
    state: AppState,
    holder: KeyHolder,
    /// The watch, its `stateTag` the last state sent (or the caller's, before the first).
    request: LeaseRequest,
    request_sha256: [u8; 32],
    /// Each answer signed, or its data alone.
    signed: bool,
    /// Resolves when the caller hangs up (never, where that cannot be seen).
    hung_up: HungUp,
}

impl Chain {
    /// The next change's `change` event, or a failed watch's `error` event; `None` once the
    /// caller has hung up.
    async fn next_change(&mut self) -> Option<Result<Event, Event>> {
        loop {
            let watched = for_account(
                &self.state,
                &self.holder,
                &self.request,
                self.request_sha256,
            );
            let replied = match tokio::select! {
                watched = watched => watched,
                () = &mut self.hung_up => return None,
            } {
                Ok(replied) => replied,
                Err(e) => {
                    let mut body = e.body();
                    body["status"] = e.status().as_u16().into();
                    return Some(Err(Event::default().event("error").data(body.to_string())));
                }
            };
            let data = &replied.body["data"];
            let changed = data["changed"] == true;
            self.request.state_tag = data["stateTag"].as_str().map(str::to_owned);
            if !changed {
                continue;
            }
            let body = as_asked(replied.body, self.signed);
            let mut event = Event::default().event("change").data(body.to_string());
            if let Some(tag) = &self.request.state_tag {
                event = event.id(tag);
            }
            return Some(Ok(event));
        }
    }
}
