//! Messages taken from librdkafka's consumer queue a batch at a time.
//!
//! `BaseConsumer::poll` hands out one message per call, each wrapped in an
//! event with its own `Arc` and a clock read: at a million messages a
//! second that wrapper cost more than a tenth of the drain. Here
//! `rd_kafka_consume_batch_queue` takes up to [`POLL_BATCH`] messages under
//! one queue lock, and each message is read in place and freed when the
//! next batch is taken (or the batch dropped).
//!
//! The consumer must only be assigned partitions (no group subscription):
//! the drain never joins its group, so no rebalance event can be waiting
//! in this queue.

use std::ffi::{c_void, CStr};
use std::marker::PhantomData;
use std::ptr;

use rdkafka::bindings as rdsys;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError as RdKafkaError;
use rdkafka::types::{RDKafkaErrorCode, RDKafkaRespErr};
use topicberg_core::record::{Header, HeaderList, MalformedHeaders};

/// Messages taken per call.
pub const POLL_BATCH: usize = 2048;
/// How long one call waits for messages, in milliseconds. librdkafka may
/// wait this long for a batch to fill, so it is short: at full speed a
/// batch fills in a few milliseconds; a small sync pays it once per poll.
pub const POLL_WAIT_MS: i32 = 20;

/// One message, read in place (valid until the next [`MessageBatch::poll`]).
pub struct RawMessage<'a> {
    /// Partition.
    pub partition: i32,
    /// Offset.
    pub offset: i64,
    /// Message timestamp (ms), if it has one.
    pub timestamp_ms: Option<i64>,
    /// Key bytes.
    pub key: Option<&'a [u8]>,
    /// Value bytes (`None`: a tombstone).
    pub value: Option<&'a [u8]>,
    /// Its headers.
    pub headers: MessageHeaders<'a>,
}

/// A message's headers as librdkafka holds them; librdkafka parses them
/// only when they are first read, so a job that does not read headers
/// never pays for them.
#[derive(Clone, Copy)]
pub struct MessageHeaders<'a> {
    message: *const rdsys::rd_kafka_message_t,
    _message: PhantomData<&'a ()>,
}

impl HeaderList for MessageHeaders<'_> {
    fn get(&self, index: usize) -> Result<Option<Header<'_>>, MalformedHeaders> {
        use RDKafkaRespErr::{RD_KAFKA_RESP_ERR_NO_ERROR as OK, RD_KAFKA_RESP_ERR__NOENT as NONE};
        let mut list = ptr::null_mut();
        // SAFETY: the message is valid for 'a (until its batch is
        // released), and read by this thread only.
        match unsafe { rdsys::rd_kafka_message_headers(self.message, &mut list) } {
            OK => {}
            NONE => return Ok(None),
            _ => return Err(MalformedHeaders),
        }
        let (mut name, mut value, mut size) = (ptr::null(), ptr::null(), 0usize);
        // SAFETY: `list` belongs to the message; the out-pointers are ours.
        match unsafe {
            rdsys::rd_kafka_header_get_all(list, index, &mut name, &mut value, &mut size)
        } {
            OK => {}
            NONE => return Ok(None),
            _ => return Err(MalformedHeaders),
        }
        // SAFETY: librdkafka keeps the name (NUL-terminated) and the value
        // (`size` bytes, or null) for the message's life.
        let key = unsafe { CStr::from_ptr(name) }.to_bytes();
        let value = unsafe { bytes(value as *mut c_void, size) };
        Ok(Some(Header { key, value }))
    }
}

/// What the queue held.
pub enum Polled<'a> {
    /// A message.
    Message(RawMessage<'a>),
    /// The end of a partition's log.
    Eof(i32),
    /// A fetch error.
    Error(RdKafkaError),
}

/// A consumer's queue and the messages of the last call.
pub struct MessageBatch<'c> {
    queue: *mut rdsys::rd_kafka_queue_t,
    messages: Vec<*mut rdsys::rd_kafka_message_t>,
    _consumer: &'c BaseConsumer,
}

impl<'c> MessageBatch<'c> {
    /// The consumer queue of `consumer` (which it must outlive).
    pub fn new(consumer: &'c BaseConsumer) -> Self {
        // SAFETY: the client pointer is valid while `consumer` lives, which
        // the borrow guarantees; the returned queue holds its own reference.
        let queue = unsafe { rdsys::rd_kafka_queue_get_consumer(consumer.client().native_ptr()) };
        MessageBatch {
            queue,
            messages: Vec::with_capacity(POLL_BATCH),
            _consumer: consumer,
        }
    }

    /// Frees the last call's messages and takes up to [`POLL_BATCH`] more,
    /// waiting at most `wait_ms`.
    pub fn poll(&mut self, wait_ms: i32) {
        self.release();
        if self.queue.is_null() {
            return;
        }
        self.messages.resize(POLL_BATCH, ptr::null_mut());
        // SAFETY: the queue is valid (checked above) and the array has room
        // for POLL_BATCH pointers.
        let taken = unsafe {
            rdsys::rd_kafka_consume_batch_queue(
                self.queue,
                wait_ms,
                self.messages.as_mut_ptr(),
                POLL_BATCH,
            )
        };
        self.messages.truncate(taken.max(0) as usize);
    }

    /// Whether the last call took nothing.
    pub fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }

    /// The last call's messages, in queue order.
    pub fn messages(&self) -> impl Iterator<Item = Polled<'_>> + '_ {
        self.messages.iter().map(|&message| {
            // SAFETY: librdkafka returned these pointers and they live
            // until `release`, which needs `&mut self`.
            let m = unsafe { &*message };
            if m.err != RDKafkaRespErr::RD_KAFKA_RESP_ERR_NO_ERROR {
                if m.err == RDKafkaRespErr::RD_KAFKA_RESP_ERR__PARTITION_EOF {
                    return Polled::Eof(m.partition);
                }
                return Polled::Error(RdKafkaError::MessageConsumption(RDKafkaErrorCode::from(
                    m.err,
                )));
            }
            let mut kind = rdsys::rd_kafka_timestamp_type_t::RD_KAFKA_TIMESTAMP_NOT_AVAILABLE;
            // SAFETY: a valid message, as above.
            let timestamp = unsafe { rdsys::rd_kafka_message_timestamp(message, &mut kind) };
            Polled::Message(RawMessage {
                partition: m.partition,
                offset: m.offset,
                timestamp_ms: (kind
                    != rdsys::rd_kafka_timestamp_type_t::RD_KAFKA_TIMESTAMP_NOT_AVAILABLE
                    && timestamp >= 0)
                    .then_some(timestamp),
                // SAFETY: librdkafka owns these bytes for the message's life.
                key: unsafe { bytes(m.key, m.key_len) },
                value: unsafe { bytes(m.payload, m.len) },
                headers: MessageHeaders {
                    message,
                    _message: PhantomData,
                },
            })
        })
    }

    fn release(&mut self) {
        for message in self.messages.drain(..) {
            // SAFETY: each message is freed once, here.
            unsafe { rdsys::rd_kafka_message_destroy(message) };
        }
    }
}

impl Drop for MessageBatch<'_> {
    fn drop(&mut self) {
        self.release();
        if !self.queue.is_null() {
            // SAFETY: the reference `rd_kafka_queue_get_consumer` gave us.
            unsafe { rdsys::rd_kafka_queue_destroy(self.queue) };
        }
    }
}

/// # Safety
/// `data` must point to `len` bytes that outlive `'a`, or be null.
unsafe fn bytes<'a>(data: *mut c_void, len: usize) -> Option<&'a [u8]> {
    if data.is_null() {
        None
    } else {
        Some(std::slice::from_raw_parts(data as *const u8, len))
    }
}
