//! Fuzzes `topicberg_core::BatchDecoder` against the reference model the
//! proptest suite uses (`crates/core/src/decode/tests/fuzz/model.rs`): no
//! input may panic, and after every record the decoder must agree with the
//! model (row or error, row count, unknown fields, every cell of every
//! finished batch, Arrow's full validation).
//!
//! Input layout (see `fuzz/README.md`):
//!
//! ```text
//! table byte | config byte (1: upsert, 2: collect unknown fields, 4: a
//! `columns` list) | key-column byte | record (0xFF record)*
//! record := flags byte | key length byte | key bytes | value bytes
//! flags: 1 tombstone, 2 no key, 4 no timestamp, 8 finish after,
//!        16 take unknown fields after, 32 timestamp that overflows micros,
//!        64|128 partition
//! ```
//!
//! 0xFF never occurs in UTF-8, so the split keeps every valid message whole.

#![no_main]

use libfuzzer_sys::fuzz_target;
use topicberg_core::SourceRecord;

/// What the model file calls the crate under test.
mod tb {
    pub use topicberg_core::*;
}

#[allow(dead_code)]
#[path = "../../crates/core/src/decode/tests/fuzz/model.rs"]
mod model;

/// Records per input at most (the batch reuse after `finish` is covered
/// well before this).
const MAX_RECORDS: usize = 64;

fuzz_target!(|data: &[u8]| {
    let [table, config, keys, records @ ..] = data else {
        return;
    };
    let (columns, options) = model::setup(
        usize::from(*table),
        config & 1 != 0,
        &[*keys],
        config & 2 != 0,
        config & 4 != 0,
    );
    let mut checker = model::Checker::new(columns, options);
    for (i, record) in records.split(|b| *b == 0xFF).take(MAX_RECORDS).enumerate() {
        let [flags, key_len, body @ ..] = record else {
            continue;
        };
        let (key, value) = body.split_at(usize::from(*key_len).min(body.len()));
        let timestamp_ms = match (flags & 4 != 0, flags & 32 != 0) {
            (true, _) => None,
            (false, true) => Some(i64::MAX - i as i64),
            (false, false) => Some(1_793_287_324_000 + i as i64),
        };
        checker.append(&SourceRecord {
            topic: model::TOPIC,
            partition: i32::from(flags >> 6),
            offset: i as i64 * 7,
            timestamp_ms,
            key: (flags & 2 == 0).then_some(key),
            value: (flags & 1 == 0).then_some(value),
        });
        if flags & 8 != 0 {
            checker.finish();
        }
        if flags & 16 != 0 {
            checker.take_unknown_fields();
        }
    }
    checker.finish();
});
