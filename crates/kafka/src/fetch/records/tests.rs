use std::io::Write;

use super::*;

/// One record to encode: offset delta, timestamp delta, key, value, and
/// how many headers.
type Spec<'a> = (i32, i64, Option<&'a [u8]>, Option<&'a [u8]>, usize);

fn put_varint(out: &mut Vec<u8>, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    while z >= 0x80 {
        out.push((z as u8) | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
}

fn put_varbytes(out: &mut Vec<u8>, b: Option<&[u8]>) {
    match b {
        None => put_varint(out, -1),
        Some(b) => {
            put_varint(out, b.len() as i64);
            out.extend_from_slice(b);
        }
    }
}

fn encode_records(records: &[Spec<'_>]) -> Vec<u8> {
    let mut out = Vec::new();
    for &(offset_delta, ts_delta, key, value, headers) in records {
        let mut body = vec![0u8]; // attributes
        put_varint(&mut body, ts_delta);
        put_varint(&mut body, i64::from(offset_delta));
        put_varbytes(&mut body, key);
        put_varbytes(&mut body, value);
        put_varint(&mut body, headers as i64);
        for h in 0..headers {
            put_varbytes(&mut body, Some(format!("h{h}").as_bytes()));
            put_varbytes(&mut body, Some(b"v"));
        }
        put_varint(&mut out, body.len() as i64);
        out.extend_from_slice(&body);
    }
    out
}

fn compress(codec: u8, raw: &[u8]) -> Vec<u8> {
    match codec {
        0 => raw.to_vec(),
        1 => {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(raw).unwrap();
            e.finish().unwrap()
        }
        2 => snap::raw::Encoder::new().compress_vec(raw).unwrap(),
        3 => {
            let mut e = lz4_flex::frame::FrameEncoder::new(Vec::new());
            e.write_all(raw).unwrap();
            e.finish().unwrap()
        }
        4 => zstd::bulk::compress(raw, 3).unwrap(),
        _ => unreachable!(),
    }
}

/// A whole batch: header fields as Kafka lays them out, then the records.
struct Batch<'a> {
    base_offset: i64,
    attributes: i16,
    producer_id: i64,
    base_timestamp: i64,
    max_timestamp: i64,
    records: Vec<Spec<'a>>,
    /// Record bytes to use as they are (a control record, a framing).
    body: Option<Vec<u8>>,
}

impl<'a> Batch<'a> {
    fn new(base_offset: i64, records: Vec<Spec<'a>>) -> Self {
        Batch {
            base_offset,
            attributes: 0,
            producer_id: -1,
            base_timestamp: 1_700_000_000_000,
            max_timestamp: 1_700_000_000_999,
            records,
            body: None,
        }
    }

    fn encode(&self, out: &mut Vec<u8>) {
        let raw = encode_records(&self.records);
        let body = match &self.body {
            Some(b) => b.clone(),
            None => compress((self.attributes & 7) as u8, &raw),
        };
        let last_delta = self.records.iter().map(|r| r.0).max().unwrap_or(0);
        let mut after_length = Vec::new();
        after_length.extend_from_slice(&0i32.to_be_bytes()); // leader epoch
        after_length.push(2); // magic
        after_length.extend_from_slice(&0u32.to_be_bytes()); // crc
        after_length.extend_from_slice(&self.attributes.to_be_bytes());
        after_length.extend_from_slice(&last_delta.to_be_bytes());
        after_length.extend_from_slice(&self.base_timestamp.to_be_bytes());
        after_length.extend_from_slice(&self.max_timestamp.to_be_bytes());
        after_length.extend_from_slice(&self.producer_id.to_be_bytes());
        after_length.extend_from_slice(&0i16.to_be_bytes());
        after_length.extend_from_slice(&0i32.to_be_bytes());
        after_length.extend_from_slice(&(self.records.len() as i32).to_be_bytes());
        after_length.extend_from_slice(&body);
        out.extend_from_slice(&self.base_offset.to_be_bytes());
        out.extend_from_slice(&(after_length.len() as i32).to_be_bytes());
        out.extend_from_slice(&after_length);
    }
}

/// Every record handed out of `bytes`, read_committed with `aborted`.
fn read_all(bytes: &[u8], aborted: Vec<(i64, i64)>) -> Result<Vec<Record<'_>>, WireError> {
    let mut filter = TransactionFilter::new(aborted);
    let mut out = Vec::new();
    let mut scratch = Vec::new();
    for batch in batches(bytes) {
        let (header, body) = batch?;
        if !filter.keeps(&header, body)? {
            continue;
        }
        let records = record_bytes(&header, body, &mut scratch)?;
        for_each_record(&header, records, |r| {
            // Owned copies: the scratch buffer is reused by the next batch.
            out.push(Record {
                key: r.key.map(|k| &*Box::leak(k.to_vec().into_boxed_slice())),
                value: r.value.map(|v| &*Box::leak(v.to_vec().into_boxed_slice())),
                headers: Box::leak(r.headers.to_vec().into_boxed_slice()),
                ..r
            });
            Ok::<_, WireError>(())
        })?;
    }
    Ok(out)
}

fn three_records() -> Vec<Spec<'static>> {
    vec![
        (0, 0, Some(b"k0"), Some(b"{\"a\":0}"), 0),
        (1, 5, None, Some(b"{\"a\":1}"), 2),
        (2, 9, Some(b"k2"), None, 0),
    ]
}

/// [`three_records`] in one batch at offset 100, compressed with `codec`.
fn three_records_in(codec: u8) -> Vec<u8> {
    let mut bytes = Vec::new();
    let mut batch = Batch::new(100, three_records());
    batch.attributes = i16::from(codec);
    batch.encode(&mut bytes);
    bytes
}

#[test]
fn records_of_every_codec_read_the_same() {
    for codec in 0..=4u8 {
        let bytes = three_records_in(codec);
        let records = read_all(&bytes, vec![]).unwrap();
        let got: Vec<_> = records
            .iter()
            .map(|r| (r.offset, r.timestamp_ms, r.key, r.value))
            .collect();
        assert_eq!(
            got,
            [
                (
                    100,
                    Some(1_700_000_000_000),
                    Some(&b"k0"[..]),
                    Some(&b"{\"a\":0}"[..])
                ),
                (101, Some(1_700_000_000_005), None, Some(&b"{\"a\":1}"[..])),
                (102, Some(1_700_000_000_009), Some(&b"k2"[..]), None),
            ],
            "codec {codec}"
        );
    }
}

#[test]
fn a_records_headers_are_handed_out_in_order_in_every_codec() {
    for codec in 0..=4u8 {
        let bytes = three_records_in(codec);
        let records = read_all(&bytes, vec![]).unwrap();
        let headers: Vec<Vec<(String, Option<Vec<u8>>)>> = records
            .iter()
            .map(|r| {
                let mut list = Vec::new();
                topicberg_core::Headers::Wire(r.headers)
                    .for_each(|h| {
                        list.push((
                            String::from_utf8(h.key.to_vec()).unwrap(),
                            h.value.map(<[u8]>::to_vec),
                        ));
                        Ok::<_, topicberg_core::record::MalformedHeaders>(())
                    })
                    .unwrap();
                list
            })
            .collect();
        let two = vec![
            ("h0".into(), Some(b"v".to_vec())),
            ("h1".into(), Some(b"v".to_vec())),
        ];
        assert_eq!(headers, [vec![], two, vec![]], "codec {codec}");
    }
}

#[test]
fn snappy_in_the_java_clients_framing_reads_like_raw_snappy() {
    let raw = encode_records(&three_records());
    let (first, second) = raw.split_at(raw.len() / 2);
    let mut framed = b"\x82SNAPPY\x00".to_vec();
    framed.extend_from_slice(&1i32.to_be_bytes());
    framed.extend_from_slice(&1i32.to_be_bytes());
    for part in [first, second] {
        let block = snap::raw::Encoder::new().compress_vec(part).unwrap();
        framed.extend_from_slice(&(block.len() as i32).to_be_bytes());
        framed.extend_from_slice(&block);
    }
    let mut batch = Batch::new(7, three_records());
    batch.attributes = 2;
    batch.body = Some(framed);
    let mut bytes = Vec::new();
    batch.encode(&mut bytes);
    let offsets: Vec<i64> = read_all(&bytes, vec![])
        .unwrap()
        .iter()
        .map(|r| r.offset)
        .collect();
    assert_eq!(offsets, [7, 8, 9]);
}

#[test]
fn log_append_time_gives_every_record_the_batch_max_timestamp() {
    let mut batch = Batch::new(0, three_records());
    batch.attributes = 0x8;
    let mut bytes = Vec::new();
    batch.encode(&mut bytes);
    let stamps: Vec<_> = read_all(&bytes, vec![])
        .unwrap()
        .iter()
        .map(|r| r.timestamp_ms)
        .collect();
    assert_eq!(stamps, [Some(1_700_000_000_999); 3]);
}

#[test]
fn no_timestamp_reads_as_none() {
    let mut batch = Batch::new(0, vec![(0, 0, None, Some(b"x"), 0)]);
    batch.base_timestamp = -1;
    let mut bytes = Vec::new();
    batch.encode(&mut bytes);
    assert_eq!(read_all(&bytes, vec![]).unwrap()[0].timestamp_ms, None);
}

#[test]
fn a_batch_cut_off_by_the_response_limit_is_left_for_the_next_fetch() {
    let mut bytes = Vec::new();
    Batch::new(0, three_records()).encode(&mut bytes);
    let whole = bytes.len();
    Batch::new(3, three_records()).encode(&mut bytes);
    for cut in [whole, whole + 5, whole + 61, bytes.len() - 1] {
        let read: Vec<i64> = batches(&bytes[..cut])
            .map(|b| b.unwrap().0.base_offset)
            .collect();
        assert_eq!(read, [0], "cut at {cut}");
    }
    assert_eq!(batches(&bytes).count(), 2);
}

#[test]
fn an_old_message_format_is_refused_by_name() {
    let mut bytes = Vec::new();
    Batch::new(0, three_records()).encode(&mut bytes);
    bytes[16] = 1; // magic
    let err = batches(&bytes).next().unwrap().unwrap_err();
    assert_eq!(err, WireError::MessageFormat(1));
    assert!(err.to_string().contains("fetch = \"librdkafka\""), "{err}");
}

#[test]
fn a_corrupt_compressed_batch_names_its_codec() {
    let mut batch = Batch::new(0, three_records());
    batch.attributes = 4;
    batch.body = Some(b"not zstd".to_vec());
    let mut bytes = Vec::new();
    batch.encode(&mut bytes);
    let err = read_all(&bytes, vec![]).unwrap_err();
    assert!(matches!(err, WireError::Codec("zstd", _)), "{err:?}");
}

fn control(base_offset: i64, producer_id: i64, abort: bool) -> Batch<'static> {
    let key: &'static [u8] = if abort { &[0, 0, 0, 0] } else { &[0, 0, 0, 1] };
    let mut b = Batch::new(
        base_offset,
        vec![(0, 0, Some(key), Some(b"\0\0\0\0\0\0"), 0)],
    );
    b.attributes = 0x30;
    b.producer_id = producer_id;
    b
}

fn transactional(base_offset: i64, producer_id: i64, n: i32) -> Batch<'static> {
    let records = (0..n).map(|i| (i, 0, None, Some(&b"v"[..]), 0)).collect();
    let mut b = Batch::new(base_offset, records);
    b.attributes = 0x10;
    b.producer_id = producer_id;
    b
}

#[test]
fn aborted_transactions_and_control_batches_are_not_handed_out() {
    // Producer 1 aborts (offsets 0-1, marker 4) and later commits (6, 7);
    // producer 2 commits (2-3, marker 5); a plain batch at 8.
    let mut bytes = Vec::new();
    transactional(0, 1, 2).encode(&mut bytes);
    transactional(2, 2, 2).encode(&mut bytes);
    control(4, 1, true).encode(&mut bytes);
    control(5, 2, false).encode(&mut bytes);
    transactional(6, 1, 1).encode(&mut bytes);
    control(7, 1, false).encode(&mut bytes);
    Batch::new(8, vec![(0, 0, None, Some(b"plain"), 0)]).encode(&mut bytes);
    let offsets: Vec<i64> = read_all(&bytes, vec![(1, 0)])
        .unwrap()
        .iter()
        .map(|r| r.offset)
        .collect();
    assert_eq!(offsets, [2, 3, 6, 8]);
    // Without the response's aborted list (read_uncommitted's view of the
    // same bytes) only the markers are left out.
    let offsets: Vec<i64> = read_all(&bytes, vec![])
        .unwrap()
        .iter()
        .map(|r| r.offset)
        .collect();
    assert_eq!(offsets, [0, 1, 2, 3, 6, 8]);
}

#[test]
fn an_aborted_transaction_that_starts_mid_fetch_is_skipped_from_its_first_batch() {
    let mut bytes = Vec::new();
    transactional(10, 3, 2).encode(&mut bytes);
    control(12, 3, false).encode(&mut bytes);
    transactional(13, 3, 2).encode(&mut bytes);
    control(15, 3, true).encode(&mut bytes);
    let offsets: Vec<i64> = read_all(&bytes, vec![(3, 13)])
        .unwrap()
        .iter()
        .map(|r| r.offset)
        .collect();
    assert_eq!(offsets, [10, 11]);
}
