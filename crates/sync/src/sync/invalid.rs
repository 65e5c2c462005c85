//! Messages that cannot become rows: what counts as one, and what
//! `on_invalid` does with it: `fail` stops the table, `skip` counts and
//! logs it (one event per batch, with the first offsets), `dlq` keeps it
//! for the dead-letter table (see `dlq.rs`).

use topicberg_core::{DecodeError, DecodeErrorKind, SourceRecord};

/// An invalid message kept for the dead-letter table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadRecord {
    /// The partition.
    pub partition: i32,
    /// The offset.
    pub offset: i64,
    /// The message timestamp (ms since the epoch).
    pub timestamp_ms: Option<i64>,
    /// The raw key.
    pub key: Option<Vec<u8>>,
    /// The raw value.
    pub value: Option<Vec<u8>>,
    /// Why it is invalid (the full error text).
    pub error: String,
    /// The field at fault, when one is.
    pub field: Option<String>,
}

impl DeadRecord {
    /// The message and its error, copied.
    pub fn new(record: &SourceRecord<'_>, error: &DecodeError) -> Self {
        Self {
            partition: record.partition,
            offset: record.offset,
            timestamp_ms: record.timestamp_ms,
            key: record.key.map(<[u8]>::to_vec),
            value: record.value.map(<[u8]>::to_vec),
            error: error.to_string(),
            field: error.field.clone(),
        }
    }
}

/// Whether a decode error makes the message invalid (as opposed to asking
/// the table to evolve, or the batch to be finished first).
pub fn is_invalid(error: &DecodeError) -> bool {
    !matches!(
        error.kind,
        DecodeErrorKind::BatchFull | DecodeErrorKind::Registry(_) | DecodeErrorKind::Truncate
    )
}

/// Skipped messages of one drain thread since its last log line.
#[derive(Debug, Default)]
pub struct SkipLog {
    count: u64,
    first: Vec<(i32, i64)>,
    first_error: Option<String>,
}

/// Offsets listed in a skip log line.
const LISTED_OFFSETS: usize = 5;

impl SkipLog {
    /// Counts a skipped message.
    pub fn record(&mut self, error: &DecodeError) {
        self.count += 1;
        if self.first.len() < LISTED_OFFSETS {
            self.first.push((error.partition, error.offset));
        }
        if self.first_error.is_none() {
            self.first_error = Some(error.to_string());
        }
    }

    /// Logs the messages skipped since the last call (one warn event), if any.
    pub fn flush(&mut self, topic: &str) {
        if self.count == 0 {
            return;
        }
        let offsets: Vec<String> = self
            .first
            .iter()
            .map(|(p, o)| format!("{topic}[{p}]@{o}"))
            .collect();
        tracing::warn!(
            topic,
            skipped = self.count,
            first_offsets = %offsets.join(", "),
            first_error = self.first_error.as_deref().unwrap_or(""),
            "skipped invalid messages (on_invalid = \"skip\")"
        );
        self.count = 0;
        self.first.clear();
        self.first_error = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(offset: i64) -> DecodeError {
        DecodeError {
            topic: "orders".into(),
            partition: 1,
            offset,
            field: None,
            kind: DecodeErrorKind::NotJson {
                reason: "expected value at line 1 column 1".into(),
            },
        }
    }

    #[test]
    fn skip_log_counts_everything_and_lists_the_first_offsets() {
        let mut log = SkipLog::default();
        for offset in 0..8 {
            log.record(&error(offset));
        }
        assert_eq!(log.first, (0..5).map(|o| (1, o)).collect::<Vec<_>>());
        log.flush("orders");
        assert_eq!(log.count, 0);
        log.record(&error(9));
        assert_eq!((log.count, log.first.clone()), (1, vec![(1, 9)]));
    }

    #[test]
    fn dead_record_keeps_the_raw_message_and_the_error() {
        let record = SourceRecord {
            topic: "orders",
            partition: 1,
            offset: 7,
            timestamp_ms: Some(5),
            key: Some(b"k"),
            value: Some(b"{oops"),
            headers: Default::default(),
        };
        let dead = DeadRecord::new(&record, &error(7));
        assert_eq!(dead.value.as_deref(), Some(&b"{oops"[..]));
        assert!(dead.error.starts_with("orders[1]@7: value is not JSON"));
    }
}
