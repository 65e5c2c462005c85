//! Decode throughput on seed-shaped `orders` messages.
//!
//! `cargo bench -p topicberg-core --bench decode [-- MESSAGES] [NAME... | =NAME...]` prints
//! messages/s and MB/s (value bytes) for:
//! - `parse only`: serde_json skipping every value (the floor of any JSON path);
//! - `serde_json::Value`: a tree per message (what we avoid);
//! - `BatchDecoder`: our decoder into Arrow batches, metadata columns included;
//! - `BatchDecoder trips`, `BatchDecoder events`: the same on `bench/run`'s
//!   144-byte trips shape, and on an event shape with escaped strings and
//!   nested values (a `json` column kept as its text);
//! - `SchemaInference`: the discover-time sampler;
//! - `apache-avro Value`: the same orders as registry-framed Avro, decoded
//!   by the `apache-avro` crate into its value tree (the well-kept decoder
//!   we did not pick);
//! - `BatchDecoder avro`: our Avro reader into Arrow batches, metadata
//!   columns included;
//! - `BatchDecoder protobuf`: the same orders as registry-framed Protobuf
//!   (encoded by prost-reflect, checked to decode to the same rows as the
//!   JSON), our Protobuf reader into Arrow batches, metadata columns
//!   included.
//!
//! Each line also gives the CPU time (user + system, from
//! `/proc/self/stat`) per message over all its rounds. No time is asserted:
//! the numbers are for reading and comparing.

use std::hint::black_box;
use std::time::{Duration, Instant};

use std::sync::Arc;

use prost_reflect::prost::Message as _;
use prost_reflect::{DescriptorPool, DynamicMessage, Value as ProtoValue};
use topicberg_core::{
    BatchDecoder, DecoderOptions, RegisteredSchema, RegistryError, RegistryValues, SchemaInference,
    SchemaKind, SchemaSource, SourceRecord, TableColumns, ValueFormat,
};

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

fn report(name: &str, messages: usize, bytes: usize, elapsed: Duration, cpu_ns: f64) {
    let secs = elapsed.as_secs_f64();
    println!(
        "{name:<22} {:>12.0} messages/s {:>6.0} ns/message {:>9.1} MB/s {:>6.0} CPU ns/message   ({messages} messages in {:.3} s)",
        messages as f64 / secs,
        secs * 1e9 / messages as f64,
        bytes as f64 / secs / 1e6,
        cpu_ns,
        secs,
    );
}

/// User + system CPU time of this process in nanoseconds (Linux; 0 elsewhere).
fn cpu_ns() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    // Fields after the command name (which may hold spaces): utime is the
    // 12th, stime the 13th, in clock ticks (100 per second on Linux).
    let rest = &stat[stat.rfind(')').map_or(0, |i| i + 2)..];
    let ticks: f64 = rest
        .split(' ')
        .skip(11)
        .take(2)
        .filter_map(|t| t.parse::<f64>().ok())
        .sum();
    ticks * 1e7
}

/// Whether the command line asks for bench `name`: no filter, a filter
/// the name contains, or `=NAME` exactly.
fn wanted(name: &str) -> bool {
    let filters: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-') && a.parse::<usize>().is_err())
        .collect();
    filters.is_empty()
        || filters.iter().any(|f| match f.strip_prefix('=') {
            Some(exact) => name == exact,
            None => name.contains(f.as_str()),
        })
}

/// Runs `f` ROUNDS times and reports the fastest (unless filtered out).
fn bench(name: &str, messages: usize, bytes: usize, mut f: impl FnMut()) {
    if !wanted(name) {
        return;
    }
    let cpu = cpu_ns();
    let best = (0..ROUNDS)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed()
        })
        .min()
        .expect("at least one round");
    let cpu_per_message = (cpu_ns() - cpu) / (ROUNDS * messages) as f64;
    report(name, messages, bytes, best, cpu_per_message);
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

    let columns = batch_decoder("BatchDecoder", &messages);
    let trips: Vec<_> = (1..=count as u64).map(trip).collect();
    batch_decoder("BatchDecoder trips", &trips);
    let events: Vec<_> = (1..=count as u64).map(event).collect();
    batch_decoder("BatchDecoder events", &events);

    if wanted("apache-avro Value") || wanted("BatchDecoder avro") {
        avro(&messages);
    }
    if wanted("BatchDecoder protobuf") {
        protobuf(&messages, &columns);
    }

    bench("SchemaInference", count, bytes, || {
        let mut inference = SchemaInference::new();
        for (_, v) in &messages {
            inference.add(v.as_bytes()).unwrap();
        }
        black_box(inference.columns());
    });
}

/// `bench/run`'s 144-byte trips record (its generator's fields and ranges).
fn trip(i: u64) -> (String, String) {
    const PAYMENTS: [&str; 4] = ["card", "cash", "app", "voucher"];
    let r = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 16;
    let at = |x: u64| {
        let s = x % (30 * 86_400);
        let (d, h, m, sec) = (1 + s / 86_400, s / 3600 % 24, s / 60 % 60, s % 60);
        format!("2026-11-{d:02}T{h:02}:{m:02}:{sec:02}Z")
    };
    let (dist, fare) = ((r >> 24) % 3000, (r >> 30) % 9000);
    let value = format!(
        r#"{{"id":{i},"vendor":{},"pickup":"{}","dropoff":"{}","pax":{},"distance":{}.{:02},"fare":{}.{:02},"payment":"{}"}}"#,
        r % 3 + 1,
        at(r & 0xFFF_FFFF),
        at((r >> 12) & 0xFFF_FFFF),
        (r >> 4) % 5 + 1,
        dist / 100,
        dist % 100,
        fare / 100,
        fare % 100,
        PAYMENTS[((r >> 8) & 3) as usize],
    );
    (i.to_string(), value)
}

/// An event with escaped strings and nested values (the `json` column's
/// raw-text path), about 260 bytes.
fn event(i: u64) -> (String, String) {
    let value = format!(
        r#"{{"id":{i},"kind":"click","at":"{T0}","user":{{"id":{},"name":"user \"{}\"","tags":["a","b\\c"]}},"path":"/shop/item?id={}&ref=mail\u00e9","meta":{{"ua":"Mozilla/5.0 (X11; Linux x86_64)","ms":{}.{}}},"ok":true}}"#,
        i % 1000,
        i % 97,
        i % 5000,
        i % 300,
        i % 10,
    );
    (i.to_string(), value)
}

/// Our JSON decoder on `messages` (columns inferred from the first 10,000),
/// as bench `name`; returns the columns.
fn batch_decoder(name: &str, messages: &[(String, String)]) -> TableColumns {
    let count = messages.len();
    let bytes: usize = messages.iter().map(|(_, v)| v.len()).sum();
    let mut inference = SchemaInference::new();
    for (_, v) in messages.iter().take(10_000) {
        inference.add(v.as_bytes()).unwrap();
    }
    let columns = TableColumns::for_new_table(&inference.columns()).unwrap();
    let mut decoder = BatchDecoder::new(&columns, DecoderOptions::append(0)).unwrap();
    let mut rows = 0;
    bench(name, count, bytes, || {
        for (offset, (key, value)) in messages.iter().enumerate() {
            let record = SourceRecord {
                topic: "orders",
                partition: 0,
                offset: offset as i64,
                timestamp_ms: Some(1_793_287_324_000),
                key: Some(key.as_bytes()),
                value: Some(value.as_bytes()),
                headers: Default::default(),
            };
            decoder.append(&record).unwrap();
            if decoder.len() == BATCH_ROWS {
                rows += black_box(decoder.finish()).num_rows();
            }
        }
        rows += black_box(decoder.finish()).num_rows();
    });
    assert!(rows == 0 || rows == ROUNDS * count);
    columns
}

const ORDER_AVRO: &str = r#"{"type":"record","name":"Order","fields":[
  {"name":"id","type":"long"},{"name":"customer_id","type":"long"},
  {"name":"product","type":"string"},{"name":"amount","type":"double"},
  {"name":"status","type":"string"},
  {"name":"created_at","type":{"type":"long","logicalType":"timestamp-micros"}},
  {"name":"updated_at","type":{"type":"long","logicalType":"timestamp-micros"}}]}"#;

#[derive(Debug)]
struct OneSchema;

impl SchemaSource for OneSchema {
    fn schema_by_id(&self, id: u32) -> Result<Arc<RegisteredSchema>, RegistryError> {
        Ok(Arc::new(RegisteredSchema {
            id,
            kind: SchemaKind::Avro,
            schema: ORDER_AVRO.to_owned(),
            references: Vec::new(),
        }))
    }
}

/// The same orders as registry-framed Avro (schema id 1).
fn avro_orders(messages: &[(String, String)]) -> Vec<Vec<u8>> {
    use apache_avro::types::Value;
    let schema = apache_avro::Schema::parse_str(ORDER_AVRO).unwrap();
    messages
        .iter()
        .map(|(_, v)| {
            let json: serde_json::Value = serde_json::from_str(v).unwrap();
            let micros = |f: &str| {
                let t = json[f].as_str().unwrap();
                topicberg_core::parse_timestamp_micros(t).unwrap()
            };
            let value = Value::Record(vec![
                ("id".into(), Value::Long(json["id"].as_i64().unwrap())),
                (
                    "customer_id".into(),
                    Value::Long(json["customer_id"].as_i64().unwrap()),
                ),
                (
                    "product".into(),
                    Value::String(json["product"].as_str().unwrap().into()),
                ),
                (
                    "amount".into(),
                    Value::Double(json["amount"].as_f64().unwrap()),
                ),
                (
                    "status".into(),
                    Value::String(json["status"].as_str().unwrap().into()),
                ),
                (
                    "created_at".into(),
                    Value::TimestampMicros(micros("created_at")),
                ),
                (
                    "updated_at".into(),
                    Value::TimestampMicros(micros("updated_at")),
                ),
            ]);
            let mut out = vec![0, 0, 0, 0, 1];
            out.extend(apache_avro::to_avro_datum(&schema, value).unwrap());
            out
        })
        .collect()
}

fn avro(messages: &[(String, String)]) {
    let count = messages.len();
    let values = avro_orders(messages);
    let bytes: usize = values.iter().map(Vec::len).sum();
    println!(
        "as Avro: {:.1} bytes per value on average (framing included)",
        bytes as f64 / count as f64
    );
    let schema = apache_avro::Schema::parse_str(ORDER_AVRO).unwrap();
    bench("apache-avro Value", count, bytes, || {
        for v in &values {
            let mut body = &v[5..];
            black_box(apache_avro::from_avro_datum(&schema, &mut body, None).unwrap());
        }
    });
    let registry = Arc::new(RegistryValues::new(ValueFormat::Avro, Arc::new(OneSchema)));
    let fields = registry.fields_of(1).unwrap().unwrap();
    let columns = TableColumns::for_new_table(&fields).unwrap();
    let mut options = DecoderOptions::append(0);
    options.registry = Some(registry);
    let mut decoder = BatchDecoder::new(&columns, options).unwrap();
    let mut rows = 0;
    bench("BatchDecoder avro", count, bytes, || {
        for (offset, ((key, _), value)) in messages.iter().zip(&values).enumerate() {
            let record = SourceRecord {
                topic: "orders",
                partition: 0,
                offset: offset as i64,
                timestamp_ms: Some(1_793_287_324_000),
                key: Some(key.as_bytes()),
                value: Some(value),
                headers: Default::default(),
            };
            decoder.append(&record).unwrap();
            if decoder.len() == BATCH_ROWS {
                rows += black_box(decoder.finish()).num_rows();
            }
        }
        rows += black_box(decoder.finish()).num_rows();
    });
    assert!(rows == 0 || rows == ROUNDS * count);
}

/// The orders as Protobuf (the seed's fields; timestamps as
/// `google.protobuf.Timestamp`).
const ORDER_PROTO: &str = r#"syntax = "proto3";
import "google/protobuf/timestamp.proto";
message Order {
  int64 id = 1;
  int64 customer_id = 2;
  string product = 3;
  double amount = 4;
  string status = 5;
  google.protobuf.Timestamp created_at = 6;
  google.protobuf.Timestamp updated_at = 7;
}"#;

/// The one schema of the Protobuf case, id 1.
#[derive(Debug)]
struct OneProtoSchema;

impl SchemaSource for OneProtoSchema {
    fn schema_by_id(&self, id: u32) -> Result<Arc<RegisteredSchema>, RegistryError> {
        Ok(Arc::new(RegisteredSchema {
            id,
            kind: SchemaKind::Protobuf,
            schema: ORDER_PROTO.to_owned(),
            references: Vec::new(),
        }))
    }
}

/// Serves `ORDER_PROTO` as `order.proto` to protox (the encoder's copy).
struct OrderFile;

impl protox::file::FileResolver for OrderFile {
    fn open_file(&self, name: &str) -> Result<protox::file::File, protox::Error> {
        match name {
            "order.proto" => protox::file::File::from_source(name, ORDER_PROTO),
            _ => protox::file::GoogleFileResolver::new().open_file(name),
        }
    }
}

/// The same orders as registry-framed Protobuf (schema id 1, message
/// index `[0]`), encoded by prost-reflect.
fn protobuf_orders(messages: &[(String, String)]) -> Vec<Vec<u8>> {
    let mut compiler = protox::Compiler::with_file_resolver(OrderFile);
    compiler.open_file("order.proto").unwrap();
    let pool: DescriptorPool = compiler.descriptor_pool();
    let order = pool.get_message_by_name("Order").unwrap();
    let timestamp = pool
        .get_message_by_name("google.protobuf.Timestamp")
        .unwrap();
    messages
        .iter()
        .map(|(_, v)| {
            let json: serde_json::Value = serde_json::from_str(v).unwrap();
            let at = |f: &str| {
                let micros = topicberg_core::parse_timestamp_micros(json[f].as_str().unwrap());
                let micros = micros.unwrap();
                let mut t = DynamicMessage::new(timestamp.clone());
                t.set_field_by_name("seconds", ProtoValue::I64(micros.div_euclid(1_000_000)));
                let nanos = micros.rem_euclid(1_000_000) * 1000;
                t.set_field_by_name("nanos", ProtoValue::I32(nanos as i32));
                ProtoValue::Message(t)
            };
            let text = |f: &str| ProtoValue::String(json[f].as_str().unwrap().to_owned());
            let mut m = DynamicMessage::new(order.clone());
            m.set_field_by_name("id", ProtoValue::I64(json["id"].as_i64().unwrap()));
            let customer = json["customer_id"].as_i64().unwrap();
            m.set_field_by_name("customer_id", ProtoValue::I64(customer));
            m.set_field_by_name("product", text("product"));
            m.set_field_by_name("amount", ProtoValue::F64(json["amount"].as_f64().unwrap()));
            m.set_field_by_name("status", text("status"));
            m.set_field_by_name("created_at", at("created_at"));
            m.set_field_by_name("updated_at", at("updated_at"));
            let mut out = vec![0, 0, 0, 0, 1, 0];
            out.extend(m.encode_to_vec());
            out
        })
        .collect()
}

/// The Protobuf case, into `columns` (the JSON case's).
fn protobuf(messages: &[(String, String)], columns: &TableColumns) {
    let count = messages.len();
    let values = protobuf_orders(messages);
    let bytes: usize = values.iter().map(Vec::len).sum();
    println!(
        "as Protobuf: {:.1} bytes per value on average (framing included)",
        bytes as f64 / count as f64
    );
    let registry = RegistryValues::new(ValueFormat::Protobuf, Arc::new(OneProtoSchema));
    let fields = registry.fields_of(1).unwrap().unwrap();
    let payload: Vec<_> = columns
        .payload()
        .map(|c| (c.name.clone(), c.ty.clone()))
        .collect();
    assert_eq!(
        fields, payload,
        "the Protobuf schema gives the JSON columns"
    );
    let mut options = DecoderOptions::append(0);
    options.registry = Some(Arc::new(registry));
    let mut decoder = BatchDecoder::new(columns, options).unwrap();
    same_rows(columns, messages, &values, &mut decoder);
    let mut rows = 0;
    bench("BatchDecoder protobuf", count, bytes, || {
        for (offset, ((key, _), value)) in messages.iter().zip(&values).enumerate() {
            let record = SourceRecord {
                topic: "orders",
                partition: 0,
                offset: offset as i64,
                timestamp_ms: Some(1_793_287_324_000),
                key: Some(key.as_bytes()),
                value: Some(value),
                headers: Default::default(),
            };
            decoder.append(&record).unwrap();
            if decoder.len() == BATCH_ROWS {
                rows += black_box(decoder.finish()).num_rows();
            }
        }
        rows += black_box(decoder.finish()).num_rows();
    });
    assert!(rows == 0 || rows == ROUNDS * count);
}

/// Checks that the first messages decode to the same batch as JSON and
/// as registry-framed values (`framed` reads those).
fn same_rows(
    columns: &TableColumns,
    messages: &[(String, String)],
    values: &[Vec<u8>],
    framed: &mut BatchDecoder,
) {
    let mut json = BatchDecoder::new(columns, DecoderOptions::append(0)).unwrap();
    for (offset, ((key, text), value)) in messages.iter().zip(values).take(100).enumerate() {
        let record = |value| SourceRecord {
            topic: "orders",
            partition: 0,
            offset: offset as i64,
            timestamp_ms: Some(1_793_287_324_000),
            key: Some(key.as_bytes()),
            value: Some(value),
            headers: Default::default(),
        };
        json.append(&record(text.as_bytes())).unwrap();
        framed.append(&record(value)).unwrap();
    }
    assert_eq!(
        json.finish(),
        framed.finish(),
        "JSON and framed rows differ"
    );
}
