//! The fetch thread of a batch drain: finds each partition's leader, sends
//! Fetch requests over plain TCP, reads each response into a reused buffer
//! and works out from the batch headers alone where each partition goes
//! next and whether it is done; the drain thread reads the records while
//! the next response arrives.

use std::collections::{BTreeMap, HashMap};
use std::io::{ErrorKind, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, SyncSender};
use std::time::{Duration, Instant};

use super::buffers::FetchBuffers;
use super::protocol::{self, PartitionError, PartitionSection};
use super::records;
use crate::{KafkaConnection, KafkaError, KafkaErrorKind};

/// How long one request may take before the connection counts as lost.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// A blocking read returns this often to look at the stop flag.
const READ_SLICE: Duration = Duration::from_millis(200);
/// Waits between reconnects: doubling from the first to the last.
const BACKOFF: (Duration, Duration) = (Duration::from_millis(100), Duration::from_secs(2));

/// One partition's section of a response, as the drain thread uses it.
#[derive(Debug, Default)]
pub struct Section {
    /// The broker's view of the partition, and where its records are.
    pub fetched: PartitionSection,
    /// The offset the partition is read from after these records (after
    /// the last complete batch, at most the partition's end).
    pub next: i64,
    /// Whether the partition is done: at its end, or at the end of what a
    /// `read_committed` reader sees (an open transaction, control records).
    pub done: bool,
}

/// A response with the sections that moved a partition.
#[derive(Debug, Default)]
pub struct Fetched {
    /// The response, without its size prefix.
    pub bytes: Vec<u8>,
    /// The partitions it moved.
    pub sections: Vec<Section>,
}

/// What the fetch thread sends the drain thread.
pub enum Event {
    /// Records to read.
    Fetched(Fetched),
    /// The fetch failed for good; the drain fails with this.
    Failed(KafkaError),
}

/// One partition's fetch position.
struct Cursor {
    next: i64,
    end: i64,
    done: bool,
}

/// A failure of one request.
enum Failure {
    /// The connection or the leadership moved: reconnect and refetch.
    Retry(String),
    /// The drain fails.
    Fatal(KafkaError),
    /// The drain thread stopped listening.
    Stopped,
}

/// The fetch thread's state.
pub struct Fetcher<'a> {
    pub(super) connection: &'a KafkaConnection,
    pub(super) topic: &'a str,
    pub(super) client_id: &'a str,
    pub(super) stall_timeout: Duration,
    pub(super) stop: &'a AtomicBool,
    /// Where response buffers come from and go back to.
    buffers: &'a FetchBuffers,
    cursors: BTreeMap<i32, Cursor>,
    /// Partition -> leader's broker id; empty: ask again.
    leaders: HashMap<i32, i32>,
    /// Broker id -> `host:port`.
    brokers: HashMap<i32, String>,
    connections: HashMap<i32, TcpStream>,
    correlation: i32,
    request: Vec<u8>,
    /// Rotates the partitions' order in requests, so that each is first
    /// in turn (a first batch over the partition limit only comes whole
    /// there).
    turn: usize,
}

impl<'a> Fetcher<'a> {
    /// A fetcher of `(partition, start, end)` ranges.
    pub fn new(
        connection: &'a KafkaConnection,
        topic: &'a str,
        client_id: &'a str,
        stall_timeout: Duration,
        stop: &'a AtomicBool,
        buffers: &'a FetchBuffers,
        ranges: impl Iterator<Item = (i32, i64, i64)>,
    ) -> Self {
        let cursors = ranges
            .map(|(partition, next, end)| {
                let done = next >= end;
                (partition, Cursor { next, end, done })
            })
            .collect();
        Fetcher {
            connection,
            topic,
            client_id,
            stall_timeout,
            stop,
            buffers,
            cursors,
            leaders: HashMap::new(),
            brokers: HashMap::new(),
            connections: HashMap::new(),
            correlation: 0,
            request: Vec::with_capacity(1024),
            turn: 0,
        }
    }

    /// Fetches until every partition is done, the drain thread hangs up, or
    /// the fetch fails (sent as [`Event::Failed`]). `spare` returns read
    /// buffers for reuse; at the end they go back to the kept buffers.
    pub fn run(mut self, events: SyncSender<Event>, spare: Receiver<Fetched>) {
        let mut buffer = self.spare_buffer();
        self.fetch_all(&mut buffer, &events, &spare);
        self.buffers.keep(buffer.bytes);
        while let Ok(returned) = spare.try_recv() {
            self.buffers.keep(returned.bytes);
        }
    }

    /// A response buffer from the kept ones, or a new one.
    fn spare_buffer(&self) -> Fetched {
        Fetched {
            bytes: self.buffers.take(),
            sections: Vec::new(),
        }
    }

    /// [`Fetcher::run`]'s loop, over the buffer being filled.
    fn fetch_all(
        &mut self,
        buffer: &mut Fetched,
        events: &SyncSender<Event>,
        spare: &Receiver<Fetched>,
    ) {
        let mut last_progress = Instant::now();
        let mut failures = 0u32;
        loop {
            if self.stop.load(Ordering::Relaxed) || self.cursors.values().all(|c| c.done) {
                return;
            }
            let outcome = self.fetch_round(buffer, events, spare, &mut last_progress);
            match outcome {
                Ok(()) => {
                    if failures > 0 {
                        tracing::info!(topic = self.topic, failures, "fetching again");
                    }
                    failures = 0;
                }
                Err(Failure::Stopped) => return,
                Err(Failure::Fatal(e)) => {
                    let _ = events.send(Event::Failed(e));
                    return;
                }
                Err(Failure::Retry(why)) => {
                    failures += 1;
                    if failures == 1 {
                        tracing::warn!(topic = self.topic, error = %why, "fetch failed; reconnecting");
                    } else {
                        tracing::debug!(topic = self.topic, error = %why, failures, "fetch failed again");
                    }
                    self.leaders.clear();
                    self.connections.clear();
                    let wait = BACKOFF
                        .0
                        .saturating_mul(1 << failures.min(5))
                        .min(BACKOFF.1);
                    if self.wait(wait).is_err() {
                        return;
                    }
                }
            }
            if last_progress.elapsed() > self.stall_timeout {
                let waiting = self.cursors.iter().filter(|(_, c)| !c.done);
                let stalled = crate::partition_range::stalled(
                    self.topic,
                    waiting.map(|(p, c)| (*p, c.next, c.end)),
                    self.stall_timeout,
                );
                let _ = events.send(Event::Failed(stalled));
                return;
            }
        }
    }

    /// One request to each leader of an open partition; responses that
    /// moved a partition go to the drain thread.
    fn fetch_round(
        &mut self,
        buffer: &mut Fetched,
        events: &SyncSender<Event>,
        spare: &Receiver<Fetched>,
        last_progress: &mut Instant,
    ) -> Result<(), Failure> {
        if self.leaders.is_empty() {
            self.find_leaders()?;
        }
        let mut by_leader: BTreeMap<i32, Vec<(i32, i64)>> = BTreeMap::new();
        for (partition, cursor) in self.cursors.iter().filter(|(_, c)| !c.done) {
            let leader =
                self.leaders.get(partition).copied().ok_or_else(|| {
                    Failure::Retry(format!("partition {partition} has no leader"))
                })?;
            by_leader
                .entry(leader)
                .or_default()
                .push((*partition, cursor.next));
        }
        self.turn = self.turn.wrapping_add(1);
        for (leader, mut positions) in by_leader {
            let n = positions.len();
            positions.rotate_left(self.turn % n);
            self.fetch_from(leader, &positions, buffer)?;
            if self.advance(buffer)? {
                *last_progress = Instant::now();
                let next = spare.try_recv().unwrap_or_else(|_| self.spare_buffer());
                let full = std::mem::replace(buffer, next);
                events
                    .send(Event::Fetched(full))
                    .map_err(|_| Failure::Stopped)?;
            }
        }
        Ok(())
    }

    /// Sends one Fetch to `leader` and reads its response into `buffer`.
    fn fetch_from(
        &mut self,
        leader: i32,
        positions: &[(i32, i64)],
        buffer: &mut Fetched,
    ) -> Result<(), Failure> {
        self.correlation = self.correlation.wrapping_add(1);
        let (correlation, stop) = (self.correlation, self.stop);
        let mut request = std::mem::take(&mut self.request);
        protocol::fetch_request(
            &mut request,
            correlation,
            self.client_id,
            self.topic,
            positions,
        );
        let exchanged = self
            .connection_to(leader)
            .and_then(|stream| exchange(stream, &request, &mut buffer.bytes, stop));
        self.request = request;
        let address = exchanged?;
        let mut fetched = Vec::new();
        protocol::read_fetch_response(&buffer.bytes, correlation, &mut fetched)
            .map_err(|e| Failure::Retry(format!("broker {address}: {e}")))?;
        buffer.sections.clear();
        buffer
            .sections
            .extend(fetched.into_iter().map(|fetched| Section {
                fetched,
                next: 0,
                done: false,
            }));
        Ok(())
    }

    /// Moves each partition's cursor past the complete batches of its
    /// section; keeps in `buffer` only the sections that moved a partition.
    /// Whether any did.
    fn advance(&mut self, buffer: &mut Fetched) -> Result<bool, Failure> {
        let topic = self.topic;
        let bytes = &buffer.bytes;
        let mut retry = None;
        let mut outcome = Ok(());
        buffer.sections.retain_mut(|section| {
            let partition = section.fetched.partition;
            let Some(cursor) = self.cursors.get_mut(&partition).filter(|c| !c.done) else {
                return false;
            };
            let code = section.fetched.error;
            if code != 0 {
                match PartitionError::of(code) {
                    PartitionError::Retry => {
                        retry = Some(format!("{topic}[{partition}]: error code {code}"))
                    }
                    class => {
                        if outcome.is_ok() {
                            outcome = Err(partition_failure(
                                topic,
                                partition,
                                cursor.next,
                                code,
                                class,
                            ));
                        }
                    }
                }
                return false;
            }
            let mut next = cursor.next;
            for batch in records::batches(&bytes[section.fetched.records.clone()]) {
                match batch {
                    Ok((header, _)) => next = next.max(header.last_offset + 1),
                    Err(e) => {
                        if outcome.is_ok() {
                            outcome = Err(super::record_failure(topic, partition, next, &e));
                        }
                        return false;
                    }
                }
            }
            let next = next.min(cursor.end);
            let visible_end = match section.fetched.last_stable_offset {
                lso if lso >= 0 => lso.min(section.fetched.high_watermark),
                _ => section.fetched.high_watermark,
            };
            let moved = next > cursor.next;
            let done = next >= cursor.end || (!moved && next >= visible_end);
            cursor.next = next;
            cursor.done = done;
            section.next = next;
            section.done = done;
            moved || done
        });
        outcome.map_err(Failure::Fatal)?;
        if let Some(why) = retry {
            // Partitions that moved still count; the others are asked of
            // their new leader.
            if buffer.sections.is_empty() {
                return Err(Failure::Retry(why));
            }
            self.leaders.clear();
        }
        Ok(!buffer.sections.is_empty())
    }

    /// The leaders of the topic's partitions, from a metadata request.
    fn find_leaders(&mut self) -> Result<(), Failure> {
        let metadata = crate::ping::fetch_metadata_of(
            self.connection,
            Some(self.topic),
            Duration::from_secs(5),
            "finding the partitions' leaders",
        )
        .map_err(|e| match e.kind {
            KafkaErrorKind::Authentication | KafkaErrorKind::Tls | KafkaErrorKind::Config => {
                Failure::Fatal(e)
            }
            _ => Failure::Retry(e.to_string()),
        })?;
        self.brokers = metadata
            .brokers()
            .iter()
            .map(|b| (b.id(), format!("{}:{}", b.host(), b.port())))
            .collect();
        self.leaders.clear();
        for topic in metadata.topics().iter().filter(|t| t.name() == self.topic) {
            for p in topic.partitions() {
                if p.leader() >= 0 {
                    self.leaders.insert(p.id(), p.leader());
                }
            }
        }
        Ok(())
    }

    fn connection_to(&mut self, broker: i32) -> Result<&mut TcpStream, Failure> {
        if !self.connections.contains_key(&broker) {
            let address = self
                .brokers
                .get(&broker)
                .ok_or_else(|| Failure::Retry(format!("broker {broker} is not in the metadata")))?;
            let stream =
                connect(address).map_err(|e| Failure::Retry(format!("broker {address}: {e}")))?;
            self.connections.insert(broker, stream);
        }
        Ok(self.connections.get_mut(&broker).expect("inserted above"))
    }

    /// Sleeps `total` in slices, returning early (`Err`) when stopped.
    fn wait(&self, total: Duration) -> Result<(), ()> {
        let until = Instant::now() + total;
        while Instant::now() < until {
            if self.stop.load(Ordering::Relaxed) {
                return Err(());
            }
            std::thread::sleep(READ_SLICE.min(until - Instant::now()));
        }
        Ok(())
    }
}

fn partition_failure(
    topic: &str,
    partition: i32,
    offset: i64,
    code: i16,
    class: PartitionError,
) -> KafkaError {
    let (kind, why) = match class {
        PartitionError::OffsetOutOfRange => (
            KafkaErrorKind::Broker,
            "the offset is out of range: the topic's retention deleted it during the sync"
                .to_string(),
        ),
        PartitionError::Unauthorized => (
            KafkaErrorKind::Authorization,
            "the broker refuses to let this client read the topic (TOPIC_AUTHORIZATION_FAILED)"
                .to_string(),
        ),
        _ => (
            KafkaErrorKind::Broker,
            format!("the broker answered error code {code}"),
        ),
    };
    KafkaError::new(
        kind,
        "fetching messages",
        format!("{topic}[{partition}] at offset {offset}: {why}"),
    )
}

/// Sends `request` and reads the response into `response`; the broker's
/// address (for errors) when it worked.
fn exchange(
    stream: &mut TcpStream,
    request: &[u8],
    response: &mut Vec<u8>,
    stop: &AtomicBool,
) -> Result<String, Failure> {
    let address = stream
        .peer_addr()
        .map(|a| a.to_string())
        .unwrap_or_default();
    let lost = |e: std::io::Error| Failure::Retry(format!("broker {address}: {e}"));
    stream.write_all(request).map_err(lost)?;
    let mut size = [0u8; 4];
    read_full(stream, &mut size, stop).map_err(|e| e.or_retry(&address))?;
    let size = usize::try_from(i32::from_be_bytes(size))
        .map_err(|_| Failure::Retry(format!("broker {address}: a negative response size")))?;
    response.resize(size, 0);
    read_full(stream, response, stop).map_err(|e| e.or_retry(&address))?;
    Ok(address)
}

fn connect(address: &str) -> std::io::Result<TcpStream> {
    let mut last = None;
    for addr in address.to_socket_addrs()? {
        match TcpStream::connect_timeout(&addr, Duration::from_secs(10)) {
            Ok(stream) => {
                stream.set_nodelay(true)?;
                stream.set_read_timeout(Some(READ_SLICE))?;
                stream.set_write_timeout(Some(REQUEST_TIMEOUT))?;
                return Ok(stream);
            }
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::new(ErrorKind::NotFound, "no address")))
}

/// Why a read stopped.
enum ReadError {
    Io(std::io::Error),
    Stopped,
}

impl ReadError {
    fn or_retry(self, address: &str) -> Failure {
        match self {
            ReadError::Io(e) => Failure::Retry(format!("broker {address}: {e}")),
            ReadError::Stopped => Failure::Stopped,
        }
    }
}

/// Fills `buf`, in reads of at most [`READ_SLICE`] each so that a stop is
/// seen; a response that takes over [`REQUEST_TIMEOUT`] is an error.
fn read_full(stream: &mut TcpStream, buf: &mut [u8], stop: &AtomicBool) -> Result<(), ReadError> {
    let started = Instant::now();
    let mut filled = 0;
    while filled < buf.len() {
        match stream.read(&mut buf[filled..]) {
            Ok(0) => {
                return Err(ReadError::Io(std::io::Error::new(
                    ErrorKind::UnexpectedEof,
                    "the broker closed the connection",
                )))
            }
            Ok(n) => filled += n,
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                ) =>
            {
                if stop.load(Ordering::Relaxed) {
                    return Err(ReadError::Stopped);
                }
                if started.elapsed()
                    > REQUEST_TIMEOUT + Duration::from_millis(protocol::MAX_WAIT_MS as u64)
                {
                    return Err(ReadError::Io(std::io::Error::new(
                        ErrorKind::TimedOut,
                        "no response within 30 s",
                    )));
                }
            }
            Err(e) => return Err(ReadError::Io(e)),
        }
    }
    Ok(())
}
