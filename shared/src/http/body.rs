//! Reading a request body: size limit, JSON, then the route's schema. Nothing else in a handler
//! runs before this passes.

use super::error::ApiError;
use crate::schema::{Schema, normalize_integers};
use axum::body::{Body, Bytes};
use hyper::body::Frame;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

/// Bodies above this many bytes are answered 413.
pub const MAX_BODY_BYTES: usize = 64 * 1024;

/// Read at most [`MAX_BODY_BYTES`] of `body`. A body that a [`Deadline`] cut off is a 408.
pub async fn read_limited(body: Body) -> Result<Bytes, ApiError> {
    // A declared length over the limit is refused at once, not after waiting for the bytes.
    if hyper::body::Body::size_hint(&body).lower() > MAX_BODY_BYTES as u64 {
        return Err(ApiError::PayloadTooLarge(MAX_BODY_BYTES));
    }
    axum::body::to_bytes(body, MAX_BODY_BYTES)
        .await
        .map_err(|err| {
            let mut causes =
                std::iter::successors(Some(&err as &dyn std::error::Error), |e| e.source());
            match causes.find_map(|e| {
                e.downcast_ref::<BodyTimedOut>()
                    .map(|t| ApiError::RequestTimeout(t.0.as_secs()))
                    .or_else(|| {
                        e.is::<http_body_util::LengthLimitError>()
                            .then_some(ApiError::PayloadTooLarge(MAX_BODY_BYTES))
                    })
            }) {
                Some(known) => known,
                None => ApiError::InvalidJson(format!("the body could not be read: {err}")),
            }
        })
}

/// The error a [`Deadline`] body ends with when the time ran out.
#[derive(Debug, thiserror::Error)]
#[error("the body did not arrive within {} s", .0.as_secs())]
pub struct BodyTimedOut(pub Duration);

/// A request body that must arrive in full within a time limit: a client that starts a body and
/// never finishes it (or trickles it) holds a connection only that long. `leasekit serve` wraps
/// every request body in one; on Lambda, API Gateway has the whole body before we start.
pub struct Deadline<B> {
    inner: B,
    limit: Duration,
    sleep: Pin<Box<tokio::time::Sleep>>,
}

impl<B> Deadline<B> {
    /// `inner`, cut off `limit` from now.
    pub fn new(inner: B, limit: Duration) -> Self {
        Self {
            inner,
            limit,
            sleep: Box::pin(tokio::time::sleep(limit)),
        }
    }
}

impl<B> hyper::body::Body for Deadline<B>
where
    B: hyper::body::Body<Data = Bytes> + Unpin,
    B::Error: Into<axum::BoxError>,
{
    type Data = Bytes;
    type Error = axum::BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        if let Poll::Ready(frame) = Pin::new(&mut this.inner).poll_frame(cx) {
            return Poll::Ready(frame.map(|f| f.map_err(Into::into)));
        }
        match this.sleep.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Some(Err(Box::new(BodyTimedOut(this.limit))))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.inner.size_hint()
    }
}

/// Parse `bytes` as JSON, validate it against `schema`, read the integral numbers in `whole` as
/// integers, then deserialize it as `T`. Also returns the JSON as sent, for hashing.
pub fn parse_valid<T: DeserializeOwned>(
    bytes: &[u8],
    schema: &Schema,
    whole: &[&str],
) -> Result<(T, Value), ApiError> {
    let value: Value =
        crate::strict_json::parse(bytes).map_err(|e| ApiError::InvalidJson(e.to_string()))?;
    validate_value(value, schema, whole)
}

/// Validate an already parsed JSON `value` as [`parse_valid`] does.
pub fn validate_value<T: DeserializeOwned>(
    mut value: Value,
    schema: &Schema,
    whole: &[&str],
) -> Result<(T, Value), ApiError> {
    schema.check(&value).map_err(ApiError::InvalidInput)?;
    normalize_integers(&mut value, whole);
    // The schema admitted it, so this only fails if the schema and the type disagree: say so.
    let typed = serde_json::from_value(value.clone()).map_err(|e| {
        ApiError::InvalidInput(vec![crate::witness::Witness::new(
            "SCHEMA",
            "",
            e.to_string(),
        )])
    })?;
    Ok((typed, value))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A body that sends one chunk and then never ends.
    struct Stalled(bool);

    impl hyper::body::Body for Stalled {
        type Data = Bytes;
        type Error = std::convert::Infallible;

        fn poll_frame(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
            if std::mem::replace(&mut self.0, true) {
                Poll::Pending
            } else {
                Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(b"{\"op\":")))))
            }
        }
    }

    fn stalled() -> Stalled {
        Stalled(false)
    }

    #[tokio::test]
    async fn a_body_that_never_ends_is_a_408() {
        let body = Body::new(Deadline::new(stalled(), Duration::from_millis(50)));
        let err = read_limited(body).await.unwrap_err();
        assert_eq!(err.status().as_u16(), 408);
        assert_eq!(err.code(), "REQUEST_TIMEOUT");
    }

    #[tokio::test]
    async fn a_body_within_the_deadline_is_read() {
        let body = Body::new(Deadline::new(Body::from("{}"), Duration::from_secs(10)));
        assert_eq!(&read_limited(body).await.unwrap()[..], b"{}");
    }
}
