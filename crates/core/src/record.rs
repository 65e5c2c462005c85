//! A Kafka message as the decoder sees it: borrowed, never copied.

/// One Kafka message, borrowing every byte from the consumer's buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SourceRecord<'a> {
    /// The topic the message was read from.
    pub topic: &'a str,
    /// Its partition.
    pub partition: i32,
    /// Its offset in that partition.
    pub offset: i64,
    /// The message timestamp in milliseconds since the epoch (create time or
    /// log append time, per the topic's `message.timestamp.type`); `None`
    /// when the message has none (Kafka's -1), which leaves
    /// `_kafka_timestamp` and `_cdc_timestamp` null.
    pub timestamp_ms: Option<i64>,
    /// The key bytes; `None` for a message without a key.
    pub key: Option<&'a [u8]>,
    /// The value bytes; `None` for a tombstone.
    pub value: Option<&'a [u8]>,
}
