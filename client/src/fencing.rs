//! Fencing at the store: writes that the store itself refuses when they carry a token smaller
//! than the one it last took (docs/adr/0013-fencing-at-the-store.md).
//!
//! A fencing token protects only a store that refuses a smaller one. Each helper makes one
//! write, atomic in the store (no read-then-write outside it): the store keeps the token that
//! last wrote beside the data, where any other reader sees it, and refuses a write whose token is
//! smaller with [`FenceError::Refused`], naming both tokens; nothing is written then. Equal
//! tokens write: the holder's retries and later writes carry its one token.
//!
//! - DynamoDB ([`dynamodb_put`], feature `dynamodb`): one conditional PutItem, the token in the
//!   item's `fence` attribute.
//! - S3 ([`s3_put`], feature `s3`): the token in the object's metadata (`leasekit-fence`); a HEAD
//!   reads it and the object's ETag, and the PUT is conditional on the object still being that
//!   one (`If-Match`, or `If-None-Match: *` when there was none), read again when it is not.
//!
//! ```no_run
//! # #[cfg(feature = "dynamodb")]
//! # async fn write(client: leasekit_client::Client, ddb: aws_sdk_dynamodb::Client) -> Result<(), Box<dyn std::error::Error>> {
//! use aws_sdk_dynamodb::types::AttributeValue;
//! use std::{collections::HashMap, time::Duration};
//! let guard = client.guard("invoice:INV-1009", "worker-1", Duration::from_secs(60)).await?;
//! let item = HashMap::from([
//!     ("id".to_owned(), AttributeValue::S("INV-1009".into())),
//!     ("state".to_owned(), AttributeValue::S("sent".into())),
//! ]);
//! leasekit_client::fencing::dynamodb_put(&ddb, "invoices", item, &guard).await?;
//! # Ok(()) }
//! ```
//!
//! A semaphore's permits are not ordered by who holds now: two live permits have two tokens,
//! neither stale, so the highest token is no fence there. For a permit of a limit above 1 the
//! helpers ask the service first (`check`, signed) and write only while the permit is current,
//! without comparing the store's fence. That narrows the window to the time between the check
//! and the write; it does not close it (a permit that lapses in between still writes). A lease
//! (limit 1) is the fence.

use crate::{Client, Error, Guard};

/// The DynamoDB attribute that keeps the token that last wrote.
pub const FENCE: &str = "fence";
/// The S3 object metadata key that keeps it (S3 lower-cases metadata keys).
pub const S3_FENCE: &str = "leasekit-fence";

/// What a fenced write needs of a hold: its token, and for a semaphore's permit (limit above 1)
/// the resource, holder and client to ask whether it is still current. [`Guard::fence`] gives
/// a guard's; [`Fence::new`] a lease's from its resource and token.
#[derive(Clone)]
pub struct Fence {
    pub resource: String,
    pub token: u64,
    pub holder: Option<String>,
    /// 1 for a lease; a semaphore's limit for one of its permits.
    pub limit: u32,
    /// The client that granted it, for `check` (needed when `limit` is above 1).
    pub client: Option<Client>,
}

impl Fence {
    /// A lease's (limit 1) fence.
    pub fn new(resource: &str, token: u64) -> Self {
        Self {
            resource: resource.to_owned(),
            token,
            holder: None,
            limit: 1,
            client: None,
        }
    }

    #[cfg(any(feature = "dynamodb", feature = "s3"))]
    /// Whether the store's fence decides: a lease's token is its own fence (true). A
    /// semaphore's permit must be current now (the service says so), and then its write is not
    /// compared with the store's fence, which another live permit's larger token may hold.
    async fn compared(&self) -> Result<bool, FenceError> {
        if self.limit <= 1 {
            return Ok(true);
        }
        let Some(client) = &self.client else {
            return Err(FenceError::Service(Error::Invalid(
                "a semaphore's permit needs the client that granted it, to check it".into(),
            )));
        };
        let answer = client
            .check(&self.resource, self.token, self.holder.as_deref())
            .await
            .map_err(FenceError::Service)?;
        match answer.current {
            Some(true) => Ok(false),
            _ => Err(FenceError::Refused {
                token: self.token,
                found: None,
                message: format!(
                    "permit {} of {} is no longer current: nothing written",
                    self.token, self.resource
                ),
            }),
        }
    }
}

impl From<&Guard> for Fence {
    fn from(guard: &Guard) -> Self {
        guard.fence()
    }
}

impl From<&Fence> for Fence {
    fn from(fence: &Fence) -> Self {
        fence.clone()
    }
}

/// Why a fenced write wrote nothing.
#[derive(Debug, thiserror::Error)]
pub enum FenceError {
    /// The store holds a larger fence (`found`), or (a semaphore's permit, `found` None) the
    /// permit is no longer current, or (S3) the object kept changing under the write.
    #[error("{message}")]
    Refused {
        /// The token this write carried.
        token: u64,
        found: Option<u64>,
        message: String,
    },
    /// The service could not say whether a semaphore's permit is current.
    #[error("checking the permit: {0}")]
    Service(Error),
    /// The store failed the write (not a refusal): what its SDK said.
    #[error("the store: {0}")]
    Store(Box<dyn std::error::Error + Send + Sync>),
}

#[cfg(any(feature = "dynamodb", feature = "s3"))]
impl FenceError {
    fn larger(place: &str, token: u64, found: u64) -> Self {
        Self::Refused {
            token,
            found: Some(found),
            message: format!(
                "{place} holds fence {found}, larger than this write's token {token}: nothing written"
            ),
        }
    }

    fn store<E: std::error::Error + Send + Sync + 'static>(e: E) -> Self {
        Self::Store(Box::new(e))
    }
}

/// A fence as these helpers write it (a base-10 integer: no sign, no leading zero, as `u64`
/// prints) as a token; `None` for anything else, which these helpers did not write.
#[cfg(any(feature = "s3", test))]
fn token_in(text: &str) -> Option<u64> {
    let canonical =
        text == "0" || (!text.starts_with('0') && text.bytes().all(|b| b.is_ascii_digit()));
    canonical.then(|| text.parse().ok()).flatten()
}

#[cfg(feature = "dynamodb")]
pub use self::dynamodb::dynamodb_put;

#[cfg(feature = "dynamodb")]
mod dynamodb {
    use super::{FENCE, Fence, FenceError};
    use aws_sdk_dynamodb::operation::put_item::PutItemError;
    use aws_sdk_dynamodb::types::{AttributeValue, ReturnValuesOnConditionCheckFailure};
    use std::collections::HashMap;

    /// Put `item` into `table` with its `fence` attribute set to the token, unless the stored
    /// item's fence is larger: one conditional PutItem (the refusal hands back the larger fence,
    /// at no extra round trip).
    pub async fn dynamodb_put(
        client: &aws_sdk_dynamodb::Client,
        table: &str,
        mut item: HashMap<String, AttributeValue>,
        hold: impl Into<Fence>,
    ) -> Result<(), FenceError> {
        let fence = hold.into();
        let compared = fence.compared().await?;
        item.insert(FENCE.to_owned(), AttributeValue::N(fence.token.to_string()));
        let mut put = client.put_item().table_name(table).set_item(Some(item));
        if compared {
            put = put
                .condition_expression("attribute_not_exists(#f) OR #f <= :t")
                .expression_attribute_names("#f", FENCE)
                .expression_attribute_values(":t", AttributeValue::N(fence.token.to_string()))
                .return_values_on_condition_check_failure(
                    ReturnValuesOnConditionCheckFailure::AllOld,
                );
        }
        match put.send().await.map_err(|e| e.into_service_error()) {
            Ok(_) => Ok(()),
            Err(PutItemError::ConditionalCheckFailedException(refused)) => {
                let found = refused
                    .item()
                    .and_then(|old| old.get(FENCE))
                    .and_then(|f| f.as_n().ok())
                    .and_then(|n| n.parse().ok());
                let place = format!("the item in {table}");
                Err(match found {
                    Some(found) => FenceError::larger(&place, fence.token, found),
                    // The store did not hand the item back: refused all the same.
                    None => FenceError::Refused {
                        token: fence.token,
                        found: None,
                        message: format!(
                            "{place} holds a larger fence than this write's token {}: nothing written",
                            fence.token
                        ),
                    },
                })
            }
            Err(other) => Err(FenceError::store(other)),
        }
    }
}

#[cfg(feature = "s3")]
pub use self::s3::{S3_ATTEMPTS, s3_put};

#[cfg(feature = "s3")]
mod s3 {
    use super::{Fence, FenceError, S3_FENCE};
    use aws_sdk_s3::error::ProvideErrorMetadata;
    use aws_sdk_s3::operation::head_object::HeadObjectError;
    use aws_sdk_s3::primitives::ByteStream;

    /// How many times the object may change between the HEAD and the PUT before the write gives
    /// up (refused, `found` None).
    pub const S3_ATTEMPTS: usize = 5;

    /// Write object `key` of `bucket` with `body` and the token in its metadata
    /// (`leasekit-fence`), unless the current object carries a larger one. S3 cannot compare
    /// numbers: the helper reads the object's ETag and fence (HEAD), then writes on condition
    /// that the object is still that one (`If-Match` on the ETag, `If-None-Match: *` when there
    /// was none), so the fence compared is always the one of the object the write replaces. A
    /// write in between fails the condition and the helper reads again, [`S3_ATTEMPTS`] times at
    /// most. Two requests per write.
    ///
    /// The ETag is the MD5 of the bytes, not of the metadata: a newer write that leaves the very
    /// bytes read (the same content again, or changed and changed back) between the HEAD and
    /// the PUT does not fail the condition, and this write then lands over it. Put the token in
    /// the body (so that no two tokens write the same bytes) and that cannot happen
    /// (docs/adr/0013-fencing-at-the-store.md).
    pub async fn s3_put(
        client: &aws_sdk_s3::Client,
        bucket: &str,
        key: &str,
        body: Vec<u8>,
        hold: impl Into<Fence>,
    ) -> Result<(), FenceError> {
        let fence = hold.into();
        let compared = fence.compared().await?;
        let place = format!("s3://{bucket}/{key}");
        for _ in 0..S3_ATTEMPTS {
            let (etag, stored) = match client.head_object().bucket(bucket).key(key).send().await {
                Ok(head) => {
                    let stored = head.metadata().and_then(|m| m.get(S3_FENCE)).cloned();
                    (head.e_tag, stored)
                }
                Err(e) if matches!(e.as_service_error(), Some(HeadObjectError::NotFound(_))) => {
                    (None, None)
                }
                Err(e) => return Err(FenceError::store(e.into_service_error())),
            };
            if compared {
                // A fence that is not a number was not written by these helpers: refuse to
                // guess over it.
                let found = match stored.as_deref().map(super::token_in) {
                    Some(Some(found)) => Some(found),
                    Some(None) => {
                        return Err(FenceError::Refused {
                            token: fence.token,
                            found: None,
                            message: format!(
                                "{place} carries a fence that is not a token: nothing written"
                            ),
                        });
                    }
                    None => None,
                };
                if let Some(found) = found.filter(|&found| found > fence.token) {
                    return Err(FenceError::larger(&place, fence.token, found));
                }
            }
            let put = client
                .put_object()
                .bucket(bucket)
                .key(key)
                .body(ByteStream::from(body.clone()))
                .metadata(S3_FENCE, fence.token.to_string());
            let put = match etag {
                Some(etag) => put.if_match(etag),
                None => put.if_none_match("*"),
            };
            match put.send().await {
                Ok(_) => return Ok(()),
                Err(e)
                    if matches!(
                        e.code(),
                        Some("PreconditionFailed" | "ConditionalRequestConflict")
                    ) => {}
                Err(e) => return Err(FenceError::store(e.into_service_error())),
            }
        }
        Err(FenceError::Refused {
            token: fence.token,
            found: None,
            message: format!("{place} kept changing: nothing written"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::token_in;

    #[test]
    fn only_a_plain_base_10_integer_is_a_token() {
        assert_eq!(token_in("0"), Some(0));
        assert_eq!(token_in("12"), Some(12));
        assert_eq!(token_in("18446744073709551615"), Some(u64::MAX));
        for odd in [
            "",
            "+5",
            "012",
            "1e3",
            "0x10",
            "12.0",
            "1_000",
            " 5",
            "-1",
            "18446744073709551616",
        ] {
            assert_eq!(token_in(odd), None, "{odd:?}");
        }
    }
}
