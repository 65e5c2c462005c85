//! Decode throughput on seed-shaped `orders` messages.
//!
//! `cargo bench -p topicberg-core --bench decode [-- MESSAGES] [NAME...]` prints
//! messages/s and MB/s (value bytes) for:
//! - `parse only`: serde_json skipping every value (the floor of any JSON path);
//! - `serde_json::Value`: a tree per message (what we avoid);
//! - `BatchDecoder`: our decoder into Arrow batches, metadata columns included;
//! - `SchemaInference`: the discover-time sampler.
//!
//! No time is asserted: the numbers are for reading and comparing.

use std::hint::black_box;
use std::time::{Duration, Instant};

use topicberg_core::{BatchDecoder, DecoderOptions, SchemaInference, SourceRecord, TableColumns};

const PRODUCTS: [&str; 8] = [
    "Headphones",
    "Keyboard",
    "Monitor",
    "Mouse",
    "Webcam",
    "Laptop",
    "Desk Lamp",
    "USB Hub",
];
const STATUSES: [&str; 3] = ["placed", "shipped", "delivered"];
const T0: &str = "2026-10-29T15:22:04+00:00";
const T1: &str = "2026-10-30T09:05:41+00:00";
const BATCH_ROWS: usize = 100_000;
const ROUNDS: usize = 3;

/// One `orders` message as `scripts/demo.d/sample_messages.py` shapes it.
fn order(i: u64) -> (String, String) {
    let cents = 1999 + (i * 7919) % 120_000;
    let amount = cents as f64 / 100.0;
    let value = format!(
        r#"{{"id":{i},"customer_id":{},"product":"{}","amount":{amount},"status":"{}","created_at":"{T0}","updated_at":"{}"}}"#,
        1 + (i * 5) % 8,
        PRODUCTS[(i % 8) as usize],
        STATUSES[(i % 3) as usize],
        if i.is_multiple_of(5) { T1 } else { T0 },
    );
    (i.to_string(), value)
}

fn report(name: &str, messages: usize, bytes: usize, elapsed: Duration) {
    let secs = elapsed.as_secs_f64();
    println!(
        "{name:<20} {:>12.0} messages/s {:>9.1} MB/s   ({messages} messages in {:.3} s)",
        messages as f64 / secs,
        bytes as f64 / secs / 1e6,
        secs,
    );
}

/// Runs `f` ROUNDS times and reports the fastest (unless filtered out).
fn bench(name: &str, messages: usize, bytes: usize, mut f: impl FnMut()) {
    let filters: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-') && a.parse::<usize>().is_err())
        .collect();
    if !filters.is_empty() && !filters.iter().any(|f| name.contains(f.as_str())) {
        return;
    }
    let best = (0..ROUNDS)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed()
        })
        .min()
        .expect("at least one round");
    report(name, messages, bytes, best);
}

fn main() {
    let count: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let messages: Vec<(String, String)> = (1..=count as u64).map(order).collect();
    let bytes: usize = messages.iter().map(|(_, v)| v.len()).sum();
    println!(
        "{count} orders messages, {:.1} bytes per value on average, {:.1} MB in all; best of {ROUNDS}",
        bytes as f64 / count as f64,
        bytes as f64 / 1e6
    );
    println!("example: {}", messages[0].1);

    bench("parse only", count, bytes, || {
        for (_, v) in &messages {
            black_box(serde_json::from_slice::<serde::de::IgnoredAny>(v.as_bytes()).unwrap());
        }
    });

    bench("serde_json::Value", count, bytes, || {
        for (_, v) in &messages {
            black_box(serde_json::from_slice::<serde_json::Value>(v.as_bytes()).unwrap());
        }
    });

    let mut inference = SchemaInference::new();
    for (_, v) in messages.iter().take(10_000) {
        inference.add(v.as_bytes()).unwrap();
    }
    let columns = TableColumns::for_new_table(&inference.columns()).unwrap();
    let mut decoder = BatchDecoder::new(&columns, DecoderOptions::append(0)).unwrap();
    let mut rows = 0;
    bench("BatchDecoder", count, bytes, || {
        for (offset, (key, value)) in messages.iter().enumerate() {
            let record = SourceRecord {
                topic: "orders",
                partition: 0,
                offset: offset as i64,
                timestamp_ms: Some(1_793_287_324_000),
                key: Some(key.as_bytes()),
                value: Some(value.as_bytes()),
            };
            decoder.append(&record).unwrap();
            if decoder.len() == BATCH_ROWS {
                rows += black_box(decoder.finish()).num_rows();
            }
        }
        rows += black_box(decoder.finish()).num_rows();
    });
    assert!(rows == 0 || rows == ROUNDS * count);

    bench("SchemaInference", count, bytes, || {
        let mut inference = SchemaInference::new();
        for (_, v) in &messages {
            inference.add(v.as_bytes()).unwrap();
        }
        black_box(inference.columns());
    });
}
