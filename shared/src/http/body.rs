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
use tokio::sync::{Semaphore, SemaphorePermit};

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
        .map_err(|err| read_error(&err, MAX_BODY_BYTES))
}

/// Read at most `limit` bytes of `body`, for a route that takes more than [`MAX_BODY_BYTES`].
/// Only a body declared to be at most `MAX_BODY_BYTES` is read without a permit of `large`: at
/// most that many other bodies are in memory at once, whatever the number of connections. The
/// permit comes back with the bytes, to be kept while they are. A body still arriving when its
/// [`Deadline`] passes is a 408, time spent waiting for a permit included.
pub async fn read_large(
    mut body: Body,
    limit: usize,
    large: &'static Semaphore,
) -> Result<(Bytes, Option<SemaphorePermit<'static>>), ApiError> {
    use http_body_util::BodyExt;
    let hint = hyper::body::Body::size_hint(&body);
    if hint.lower() > limit as u64 {
        return Err(ApiError::PayloadTooLarge(limit));
    }
    // The semaphore is never closed, so acquiring only waits.
    let take = || async { large.acquire().await.ok() };
    // Only a body declared small is read without a permit. One of unknown length (chunked) takes
    // one first: a frame of it can be a large slice of the connection's buffer, and holding
    // that while waiting for a permit was 330 KB a connection (found by the attack of
    // 2026-12-07: 2,500 such senders, 868 MB).
    let permit = match hint.exact() {
        Some(declared) if declared <= MAX_BODY_BYTES as u64 => None,
        _ => take().await,
    };
    let mut read = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|err| read_error(&err, limit))?;
        let Ok(data) = frame.into_data() else {
            continue;
        };
        let len = read.len() + data.len();
        if len > limit {
            return Err(ApiError::PayloadTooLarge(limit));
        }
        // A declared length is room taken once, when its first bytes come (never before: a
        // sender that declares and sends nothing costs nothing). Grown by doubling instead, a
        // body's buffer and its copies held about 4 times what had arrived (the attack of
        // 2026-12-07: a 6 MiB body stalled one byte short, 28 MB).
        if read.capacity() == 0
            && let Some(declared) = hint.exact()
        {
            read.reserve_exact(usize::try_from(declared).unwrap_or(limit).clamp(len, limit));
        }
        read.extend_from_slice(&data);
    }
    Ok((Bytes::from(read), permit))
}

/// What a failed read of a body means: the [`Deadline`] passed (408), the limit was passed
/// (413), or the body broke off (400).
fn read_error(err: &(dyn std::error::Error + 'static), limit: usize) -> ApiError {
    let mut causes = std::iter::successors(Some(err), |e| e.source());
    match causes.find_map(|e| {
        e.downcast_ref::<BodyTimedOut>()
            .map(|t| ApiError::RequestTimeout(t.0.as_secs()))
            .or_else(|| {
                e.is::<http_body_util::LengthLimitError>()
                    .then_some(ApiError::PayloadTooLarge(limit))
            })
    }) {
        Some(known) => known,
        None => ApiError::InvalidJson(format!("the body could not be read: {err}")),
    }
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

    #[tokio::test]
    async fn a_body_that_never_ends_is_a_408() {
        let stalled = Chunks {
            count: 1,
            size: 6,
            stall: true,
        };
        let body = Body::new(Deadline::new(stalled, Duration::from_millis(50)));
        let err = read_limited(body).await.unwrap_err();
        assert_eq!(err.status().as_u16(), 408);
        assert_eq!(err.code(), "REQUEST_TIMEOUT");
    }

    /// A body of `count` chunks of `size` bytes that does not declare its length (chunked),
    /// then ends, or never does if `stall`.
    #[derive(Default)]
    struct Chunks {
        count: usize,
        size: usize,
        stall: bool,
    }

    impl hyper::body::Body for Chunks {
        type Data = Bytes;
        type Error = std::convert::Infallible;

        fn poll_frame(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
            if self.count == 0 {
                return match self.stall {
                    true => Poll::Pending,
                    false => Poll::Ready(None),
                };
            }
            self.count -= 1;
            Poll::Ready(Some(Ok(Frame::data(Bytes::from(vec![b' '; self.size])))))
        }
    }

    #[tokio::test]
    async fn a_large_body_is_read_up_to_its_limit_declared_or_not() {
        static LARGE: Semaphore = Semaphore::const_new(1);
        let limit = 4 * MAX_BODY_BYTES;
        let (read, permit) = read_large(Body::from(vec![b' '; limit]), limit, &LARGE)
            .await
            .unwrap();
        assert_eq!((read.len(), permit.is_some()), (limit, true));
        drop(permit);
        let chunked = Chunks {
            count: 4,
            size: MAX_BODY_BYTES,
            ..Chunks::default()
        };
        let (read, _) = read_large(Body::new(chunked), limit, &LARGE).await.unwrap();
        assert_eq!(read.len(), limit);
        for body in [
            Body::from(vec![b' '; limit + 1]),
            Body::new(Chunks {
                count: 5,
                size: MAX_BODY_BYTES,
                ..Chunks::default()
            }),
        ] {
            let err = read_large(body, limit, &LARGE).await.unwrap_err();
            assert_eq!(err.status().as_u16(), 413);
            assert!(err.to_string().contains(&limit.to_string()), "{err}");
        }
        assert_eq!(
            LARGE.available_permits(),
            1,
            "a refused body gives its permit back"
        );
    }

    /// Memory for large bodies is bounded by the permits: a body waits while they are held unless
    /// it is declared small, and a body still arriving ends at its deadline.
    #[tokio::test]
    async fn only_bodies_declared_small_are_read_without_a_permit() {
        static LARGE: Semaphore = Semaphore::const_new(1);
        let limit = 4 * MAX_BODY_BYTES;
        let mut held = LARGE.acquire().await.unwrap();
        let (small, permit) = read_large(Body::from("{}"), limit, &LARGE).await.unwrap();
        assert_eq!((&small[..], permit.is_none()), (&b"{}"[..], true));
        // Declared large, of unknown length and large, of unknown length and small: each waits,
        // the last two before any of their bytes is read.
        for (case, size) in [(0, 2 * MAX_BODY_BYTES), (1, 2 * MAX_BODY_BYTES), (2, 10)] {
            let body = match case {
                0 => Body::from(vec![b' '; size]),
                _ => Body::new(Chunks {
                    count: 2,
                    size: size / 2,
                    ..Chunks::default()
                }),
            };
            let reading = tokio::spawn(read_large(body, limit, &LARGE));
            tokio::time::sleep(Duration::from_millis(50)).await;
            assert!(!reading.is_finished(), "case {case}");
            drop(held);
            let (read, permit) = reading.await.unwrap().unwrap();
            assert_eq!((read.len(), permit.is_some()), (size, true));
            held = permit.unwrap();
        }
        // More than a small body, then nothing: the sender that trickles.
        let trickle = Chunks {
            count: 1,
            size: MAX_BODY_BYTES + 1,
            stall: true,
        };
        let late = Body::new(Deadline::new(trickle, Duration::from_millis(50)));
        let reading = tokio::spawn(read_large(late, limit, &LARGE));
        tokio::time::sleep(Duration::from_millis(100)).await;
        drop(held);
        let err = reading.await.unwrap().unwrap_err();
        assert_eq!(err.status().as_u16(), 408);
    }

    #[tokio::test]
    async fn a_body_within_the_deadline_is_read() {
        let body = Body::new(Deadline::new(Body::from("{}"), Duration::from_secs(10)));
        assert_eq!(&read_limited(body).await.unwrap()[..], b"{}");
    }
}
