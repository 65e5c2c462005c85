//! Reading a request body under a size limit so that the client still gets
//! the answer when it sent too much.
//!
//! Answering `413` without reading the rest of the body makes the socket
//! close with unread bytes in it, and the kernel then resets the connection:
//! the client's write fails or its read of the answer does, and it sees a
//! network error instead of the `413` (the CI of `17cff0f` hit exactly
//! that). So past the limit the rest is read and dropped, up to
//! [`DRAIN_LIMIT`] bytes; only a client sending more than that can still
//! see a reset.

use std::future::poll_fn;
use std::pin::Pin;

use axum::body::{Body, Bytes, HttpBody};

/// How much of an over-limit body is read and dropped so that the answer
/// arrives; beyond it the connection is closed without reading.
pub const DRAIN_LIMIT: usize = 32 << 20;

/// Why a body could not be read.
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    /// The body is longer than the limit (its rest was drained).
    #[error("the request body is over the limit of {limit} bytes")]
    TooLarge {
        /// The limit in bytes.
        limit: usize,
    },
    /// The client stopped sending or the connection broke.
    #[error("the request body could not be read: {0}")]
    Broken(String),
}

/// The whole body if it holds at most `limit` bytes; else
/// [`BodyError::TooLarge`] after draining the rest (up to [`DRAIN_LIMIT`]).
/// `waits_to_send`: the client sent `Expect: 100-continue` and sends the
/// body only when it is read: a declared length over the limit is then
/// refused at once (nothing to drain), as is one over [`DRAIN_LIMIT`].
pub async fn read_limited(
    mut body: Body,
    limit: usize,
    waits_to_send: bool,
) -> Result<Bytes, BodyError> {
    let declared = body.size_hint().exact().unwrap_or(0);
    let too_large = declared > limit as u64;
    if too_large && (waits_to_send || declared > DRAIN_LIMIT as u64) {
        return Err(BodyError::TooLarge { limit });
    }
    let mut kept: Vec<u8> = Vec::new();
    let mut seen: usize = 0;
    while let Some(frame) = poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await {
        let frame = frame.map_err(|e| BodyError::Broken(e.to_string()))?;
        let Ok(data) = frame.into_data() else {
            continue;
        };
        seen = seen.saturating_add(data.len());
        if too_large || seen > limit {
            if seen > DRAIN_LIMIT {
                break;
            }
            kept = Vec::new();
            continue;
        }
        kept.extend_from_slice(&data);
    }
    if too_large || seen > limit {
        return Err(BodyError::TooLarge { limit });
    }
    Ok(Bytes::from(kept))
}

/// Whether the request says `Expect: 100-continue`.
pub fn waits_to_send(headers: &axum::http::HeaderMap) -> bool {
    headers
        .get(axum::http::header::EXPECT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("100-continue"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
    }

    #[test]
    fn a_body_within_the_limit_is_returned_whole() {
        let got = rt()
            .block_on(read_limited(Body::from("abc"), 3, false))
            .unwrap();
        assert_eq!(&got[..], b"abc");
    }

    #[test]
    fn a_body_over_the_limit_is_too_large() {
        let got = rt().block_on(read_limited(Body::from("abcd"), 3, false));
        assert!(
            matches!(got, Err(BodyError::TooLarge { limit: 3 })),
            "{got:?}"
        );
    }

    #[test]
    fn an_over_limit_stream_without_a_length_is_read_to_its_end() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use std::sync::Arc;
        let pulled = Arc::new(AtomicUsize::new(0));
        let counter = pulled.clone();
        let chunks = (0..10).map(move |_| {
            counter.fetch_add(1, Ordering::SeqCst);
            Ok::<_, std::io::Error>(Bytes::from(vec![b'x'; 1000]))
        });
        let body = Body::from_stream(futures::stream::iter(chunks));
        let got = rt().block_on(read_limited(body, 2500, false));
        assert!(matches!(got, Err(BodyError::TooLarge { .. })), "{got:?}");
        assert_eq!(
            pulled.load(Ordering::SeqCst),
            10,
            "the rest was not drained"
        );
    }
}
