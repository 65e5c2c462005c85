//! A measured experiment (issue 19): what reading a topic costs when Kafka
//! record batches are parsed in place, without librdkafka's per-message
//! work (an op, a queue entry and a message struct per message).
//!
//! `cargo run --release -p topicberg-kafka --example batch_fetch -- HOST:PORT TOPIC PARTITIONS`
//!
//! Plaintext only, uncompressed batches only (the benchmark's topics):
//! Fetch v4 requests (the oldest Kafka 4 serves) for every partition at
//! once, each response read into one reused buffer, every record's key and
//! value located (and their bytes summed, so they are read) until the high
//! watermarks. Prints messages/s and CPU µs per message (user + system of
//! this process), to set beside kcat's and topicberg's in `bench/run`.
//! Not part of the product: the numbers decide whether a batch-level
//! fetch path is worth building (bench/README.md, "A batch-level fetch").

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Instant;

/// Bytes asked per partition and per response.
const PARTITION_BYTES: i32 = 4 << 20;
const RESPONSE_BYTES: i32 = 32 << 20;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, address, topic, partitions] = args.as_slice() else {
        eprintln!("usage: batch_fetch HOST:PORT TOPIC PARTITIONS");
        std::process::exit(2);
    };
    let partitions: i32 = partitions.parse().expect("PARTITIONS is a number");
    let mut stream = TcpStream::connect(address).expect("connect");
    stream.set_nodelay(true).expect("nodelay");
    let started = Instant::now();
    let cpu_before = cpu_seconds();
    let mut offsets: Vec<i64> = vec![0; partitions as usize];
    let mut ends: Vec<Option<i64>> = vec![None; partitions as usize];
    let (mut messages, mut value_bytes, mut checksum) = (0u64, 0u64, 0u64);
    let mut request = Vec::with_capacity(1024);
    let mut response = Vec::with_capacity(RESPONSE_BYTES as usize + (1 << 20));
    let mut correlation = 0;
    while ends
        .iter()
        .zip(&offsets)
        .any(|(end, offset)| end.is_none_or(|e| *offset < e))
    {
        correlation += 1;
        fetch_request(&mut request, correlation, topic, &offsets, &ends);
        stream.write_all(&request).expect("send");
        read_response(&mut stream, &mut response);
        let mut r = Reader::new(&response);
        assert_eq!(r.i32(), correlation, "correlation id");
        r.i32(); // throttle
        for _ in 0..r.i32() {
            r.string();
            for _ in 0..r.i32() {
                let partition = r.i32() as usize;
                let error = r.i16();
                assert_eq!(error, 0, "partition {partition}: error code {error}");
                let high = r.i64();
                r.i64(); // last stable offset
                let aborted = r.i32();
                for _ in 0..aborted.max(0) {
                    r.i64();
                    r.i64();
                }
                ends[partition] = Some(high);
                let records = r.bytes();
                let next = parse_batches(records, offsets[partition], high, |key, value| {
                    messages += 1;
                    value_bytes += value.len() as u64;
                    checksum = checksum
                        .wrapping_add(u64::from(value.first().copied().unwrap_or(0)))
                        .wrapping_add(key.len() as u64);
                });
                offsets[partition] = next;
            }
        }
    }
    let wall = started.elapsed().as_secs_f64();
    let cpu = cpu_seconds() - cpu_before;
    println!(
        "{messages} messages, {value_bytes} value bytes in {wall:.2} s: {:.0} msg/s, {:.3} CPU µs/msg ({cpu:.2} CPU s; checksum {checksum})",
        messages as f64 / wall,
        cpu * 1e6 / messages.max(1) as f64,
    );
}

/// A Fetch v4 request for every partition not yet at its end.
fn fetch_request(
    out: &mut Vec<u8>,
    correlation: i32,
    topic: &str,
    offsets: &[i64],
    ends: &[Option<i64>],
) {
    out.clear();
    out.extend_from_slice(&[0; 4]); // size, set below
    out.extend_from_slice(&1i16.to_be_bytes()); // Fetch
    out.extend_from_slice(&4i16.to_be_bytes()); // v4
    out.extend_from_slice(&correlation.to_be_bytes());
    put_string(out, "batch_fetch");
    out.extend_from_slice(&(-1i32).to_be_bytes()); // replica id
    out.extend_from_slice(&500i32.to_be_bytes()); // max wait ms
    out.extend_from_slice(&1i32.to_be_bytes()); // min bytes
    out.extend_from_slice(&RESPONSE_BYTES.to_be_bytes());
    out.push(0); // read uncommitted
    out.extend_from_slice(&1i32.to_be_bytes()); // one topic
    put_string(out, topic);
    let open: Vec<usize> = (0..offsets.len())
        .filter(|&p| ends[p].is_none_or(|e| offsets[p] < e))
        .collect();
    out.extend_from_slice(&(open.len() as i32).to_be_bytes());
    for p in open {
        out.extend_from_slice(&(p as i32).to_be_bytes());
        out.extend_from_slice(&offsets[p].to_be_bytes());
        out.extend_from_slice(&PARTITION_BYTES.to_be_bytes());
    }
    let size = (out.len() - 4) as i32;
    out[..4].copy_from_slice(&size.to_be_bytes());
}

fn put_string(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as i16).to_be_bytes());
    out.extend_from_slice(s.as_bytes());
}

/// One response (without its size prefix) into `buffer`, reused.
fn read_response(stream: &mut TcpStream, buffer: &mut Vec<u8>) {
    let mut size = [0u8; 4];
    stream.read_exact(&mut size).expect("response size");
    let size = i32::from_be_bytes(size) as usize;
    buffer.resize(size, 0);
    stream.read_exact(buffer).expect("response");
}

/// Every record at or after `from` in the record batches of `records`
/// (v2, uncompressed; a truncated last batch is skipped); returns the
/// offset to fetch next.
fn parse_batches(
    mut records: &[u8],
    from: i64,
    high: i64,
    mut each: impl FnMut(&[u8], &[u8]),
) -> i64 {
    let mut next = from;
    while records.len() >= 61 {
        let mut b = Reader::new(records);
        let base_offset = b.i64();
        let length = b.i32() as usize;
        if records.len() < 12 + length {
            break;
        }
        b.i32(); // leader epoch
        assert_eq!(b.i8(), 2, "record batch magic");
        b.i32(); // crc (not checked here; librdkafka does not either by default)
        let attributes = b.i16();
        assert_eq!(attributes & 7, 0, "compressed batches are not handled");
        let last_delta = b.i32();
        b.i64();
        b.i64();
        b.i64();
        b.i16();
        b.i32();
        let count = b.i32();
        for _ in 0..count {
            let _length = b.varint();
            b.i8();
            b.varint(); // timestamp delta
            let offset = base_offset + b.varint();
            let key = b.varbytes();
            let value = b.varbytes();
            for _ in 0..b.varint() {
                b.varbytes();
                b.varbytes();
            }
            if offset >= next && offset < high {
                each(key, value);
            }
        }
        next = next.max(base_offset + i64::from(last_delta) + 1);
        records = &records[12 + length..];
    }
    next
}

/// Big-endian and zigzag-varint reads over a byte slice.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        Reader { bytes, at: 0 }
    }
    fn take(&mut self, n: usize) -> &'a [u8] {
        let out = &self.bytes[self.at..self.at + n];
        self.at += n;
        out
    }
    fn i8(&mut self) -> i8 {
        self.take(1)[0] as i8
    }
    fn i16(&mut self) -> i16 {
        i16::from_be_bytes(self.take(2).try_into().expect("2"))
    }
    fn i32(&mut self) -> i32 {
        i32::from_be_bytes(self.take(4).try_into().expect("4"))
    }
    fn i64(&mut self) -> i64 {
        i64::from_be_bytes(self.take(8).try_into().expect("8"))
    }
    fn string(&mut self) -> &'a [u8] {
        let n = self.i16();
        self.take(n.max(0) as usize)
    }
    fn bytes(&mut self) -> &'a [u8] {
        let n = self.i32();
        self.take(n.max(0) as usize)
    }
    fn varint(&mut self) -> i64 {
        let (mut value, mut shift) = (0u64, 0);
        loop {
            let byte = self.take(1)[0];
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                break;
            }
            shift += 7;
        }
        ((value >> 1) as i64) ^ -((value & 1) as i64)
    }
    fn varbytes(&mut self) -> &'a [u8] {
        let n = self.varint();
        if n < 0 {
            &[]
        } else {
            self.take(n as usize)
        }
    }
}

/// User + system CPU seconds of this process so far.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("/proc/self/stat");
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .expect("stat")
        .split_whitespace()
        .collect();
    let ticks: f64 =
        fields[11].parse::<f64>().expect("utime") + fields[12].parse::<f64>().expect("stime");
    ticks / 100.0
}
