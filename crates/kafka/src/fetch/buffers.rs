//! Response buffers kept between drains. A follower runs a drain every
//! round; without these each round's fetch threads would allocate their
//! response buffers again and zero them (up to
//! [`protocol::RESPONSE_BYTES`](super::protocol::RESPONSE_BYTES) each) before
//! the first byte arrives.

use std::sync::Mutex;

/// Buffers kept at most: a drain has up to three in flight (one being
/// read, one queued, one being filled) and a round runs a few drains.
const KEPT: usize = 8;

/// Spare response buffers, shared by the drains of one sync or of every
/// round of one follower.
#[derive(Default)]
pub struct FetchBuffers {
    kept: Mutex<Vec<Vec<u8>>>,
}

impl std::fmt::Debug for FetchBuffers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kept = self.kept.lock().map_or(0, |k| k.len());
        f.debug_struct("FetchBuffers").field("kept", &kept).finish()
    }
}

impl FetchBuffers {
    /// A kept buffer (its length that of the last response it held, so
    /// a response of up to that size is read without zeroing), or a new
    /// one.
    pub(super) fn take(&self) -> Vec<u8> {
        let bytes = self.kept.lock().ok().and_then(|mut k| k.pop());
        bytes.unwrap_or_default()
    }

    /// Keeps a response buffer for a later drain, unless enough are kept.
    pub(super) fn keep(&self, bytes: Vec<u8>) {
        if bytes.capacity() == 0 {
            return;
        }
        if let Ok(mut kept) = self.kept.lock() {
            if kept.len() < KEPT {
                kept.push(bytes);
            }
        }
    }

    /// How many buffers are kept.
    #[cfg(test)]
    fn kept(&self) -> usize {
        self.kept.lock().map_or(0, |k| k.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn response(len: usize) -> Vec<u8> {
        vec![7; len]
    }

    #[test]
    fn a_kept_buffer_comes_back_with_its_length_so_a_response_as_large_needs_no_zeroing() {
        let buffers = FetchBuffers::default();
        buffers.keep(response(4096));
        assert_eq!(buffers.kept(), 1);
        let taken = buffers.take();
        assert_eq!(taken.len(), 4096);
        assert_eq!(buffers.kept(), 0);
        assert!(buffers.take().is_empty(), "none kept: a new one");
    }

    #[test]
    fn at_most_eight_buffers_are_kept_and_empty_ones_never() {
        let buffers = FetchBuffers::default();
        buffers.keep(Vec::new());
        assert_eq!(buffers.kept(), 0);
        for _ in 0..12 {
            buffers.keep(response(16));
        }
        assert_eq!(buffers.kept(), KEPT);
    }
}
