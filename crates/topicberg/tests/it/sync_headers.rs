//! `kafka_headers = true`: each row keeps its message's headers in
//! `_kafka_headers` (a list of `{key, value}` in the message's order,
//! repeated keys and null values kept; DuckDB, PyIceberg, Spark and Trino
//! read the same lists), read through both readers
//! (`source.fetch`: topicberg's own record-batch reader, and librdkafka,
//! which TLS and SASL clusters use), in append and upsert tables, and
//! added to a table that exists when the setting is turned on.

use std::collections::BTreeMap;
use std::time::Duration;

use base64::Engine as _;
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use serde_json::{json, Value};

use crate::support::{create_topic, plaintext, read_rows, table_report, Catalog, Job};
use crate::testbed::unique_name;

/// A message's headers: key, then value (`None`: null).
type Headers = Vec<(String, Option<Vec<u8>>)>;

/// Produces `(partition, key, value, headers)` messages and waits until the
/// broker acknowledged every one.
fn produce_with_headers(topic: &str, messages: &[(i32, String, String, Headers)]) {
    let producer: BaseProducer = plaintext().client_config().create().expect("producer");
    for (partition, key, value, headers) in messages {
        let mut owned = OwnedHeaders::new();
        for (k, v) in headers {
            owned = owned.insert(Header {
                key: k,
                value: v.as_deref(),
            });
        }
        let record = BaseRecord::to(topic)
            .partition(*partition)
            .key(key)
            .payload(value)
            .headers(owned);
        producer.send(record).map_err(|(e, _)| e).expect("queued");
    }
    producer
        .flush(Duration::from_secs(60))
        .expect("every message acknowledged");
}

/// The headers as the readers print `_kafka_headers` (binary as base64).
fn printed(headers: &Headers) -> Value {
    let b64 = base64::engine::general_purpose::STANDARD;
    Value::Array(
        headers
            .iter()
            .map(|(k, v)| json!({"key": k, "value": v.as_ref().map(|v| b64.encode(v))}))
            .collect(),
    )
}

/// `id -> _kafka_headers` of every row, asserting one row per id.
fn headers_by_id(engine: &str, job: &Job, topic: &str) -> BTreeMap<i64, Value> {
    let mut out = BTreeMap::new();
    for row in read_rows(engine, Catalog::Seaweed, &job.table(topic)) {
        let id = row["id"].as_i64().expect("id");
        assert!(
            out.insert(id, row["_kafka_headers"].clone()).is_none(),
            "id {id} twice"
        );
    }
    out
}

/// Messages `ids` of two partitions, each with headers that say its id:
/// repeated keys, a null value, bytes that are not UTF-8, a non-ASCII key,
/// none at all, and forty.
fn messages(ids: std::ops::Range<i64>, round: &str) -> Vec<(i32, String, String, Headers)> {
    ids.map(|id| {
        let headers: Headers = match id % 4 {
            0 => vec![
                ("trace".into(), Some(format!("{round}{id}").into_bytes())),
                ("trace".into(), None),
                ("bin".into(), Some(vec![0xff, 0x00, id as u8])),
            ],
            1 => Vec::new(),
            2 => vec![("clé".into(), Some(format!("{round}-é").into_bytes()))],
            _ => (0..40)
                .map(|h| (format!("h{h}"), Some(vec![h as u8])))
                .collect(),
        };
        let value = format!(r#"{{"id":{id},"round":"{round}"}}"#);
        ((id % 2) as i32, id.to_string(), value, headers)
    })
    .collect()
}

/// The headers each id's row must hold: its last message's.
fn expected(all: &[(i32, String, String, Headers)]) -> BTreeMap<i64, Value> {
    all.iter()
        .map(|(_, key, _, headers)| (key.parse().unwrap(), printed(headers)))
        .collect()
}

/// One append and one upsert topic with `kafka_headers = true`, read with
/// `fetch`: two syncs (the upsert's second replaces half the rows, whose
/// headers change with them).
fn headers_land(fetch: &str) {
    let append = unique_name("headers_append");
    let upsert = unique_name("headers_upsert");
    create_topic(&append, 2);
    create_topic(&upsert, 2);
    let streams = format!(
        "[[streams]]\ntopic = \"{append}\"\nkafka_headers = true\n\
         [[streams]]\ntopic = \"{upsert}\"\nmode = \"upsert\"\ndedup_keys = [\"id\"]\nkafka_headers = true\n"
    );
    let job = Job::new(
        Catalog::Seaweed,
        &[&append, &upsert],
        &format!("fetch = \"{fetch}\"\n"),
        &streams,
    );
    let first = messages(0..12, "a");
    produce_with_headers(&append, &first);
    produce_with_headers(&upsert, &first);
    let report = job.sync();
    assert_eq!(table_report(&report, &job.table(&append))["records"], 12);
    let second = messages(6..18, "b");
    produce_with_headers(&upsert, &second);
    job.sync();

    assert_eq!(
        headers_by_id("duckdb", &job, &append),
        expected(&first),
        "fetch {fetch}"
    );
    let latest: Vec<_> = first.iter().take(6).chain(&second).cloned().collect();
    assert_eq!(
        headers_by_id("duckdb", &job, &upsert),
        expected(&latest),
        "fetch {fetch}"
    );
    assert_eq!(
        headers_by_id("pyiceberg", &job, &upsert),
        expected(&latest),
        "fetch {fetch}"
    );
    if fetch == "auto" {
        // The engines users query with read the same lists.
        for engine in ["spark", "trino"] {
            assert_eq!(
                headers_by_id(engine, &job, &upsert),
                expected(&latest),
                "{engine}"
            );
        }
    }
}

#[test]
fn kafka_headers_land_in_order_through_topicbergs_own_reader() {
    headers_land("auto");
}

#[test]
fn kafka_headers_land_in_order_through_librdkafka() {
    headers_land("librdkafka");
}

#[test]
fn kafka_headers_turned_on_later_add_the_column_and_turned_off_leave_it_null() {
    let topic = unique_name("headers_later");
    create_topic(&topic, 2);
    let job = Job::new(Catalog::Seaweed, &[&topic], "", "");
    let before = messages(0..4, "a");
    produce_with_headers(&topic, &before);
    job.sync();
    let rows = read_rows("duckdb", Catalog::Seaweed, &job.table(&topic));
    assert!(
        rows.iter().all(|r| r.get("_kafka_headers").is_none()),
        "{rows:?}"
    );

    job.append(&format!(
        "[[streams]]\ntopic = \"{topic}\"\nkafka_headers = true\n"
    ));
    let after = messages(4..8, "b");
    produce_with_headers(&topic, &after);
    let report = job.sync();
    let changes = report.to_string();
    assert!(changes.contains("added column _kafka_headers"), "{changes}");
    let mut want: BTreeMap<i64, Value> = (0..4).map(|id| (id, Value::Null)).collect();
    want.extend(expected(&after));
    assert_eq!(headers_by_id("duckdb", &job, &topic), want);

    // Turned off: the column stays, new rows leave it null.
    let text = std::fs::read_to_string(&job.path).unwrap();
    let text = text.replace("kafka_headers = true", "kafka_headers = false");
    std::fs::write(&job.path, text).unwrap();
    produce_with_headers(&topic, &messages(8..12, "c"));
    job.sync();
    want.extend((8..12).map(|id| (id, Value::Null)));
    assert_eq!(headers_by_id("duckdb", &job, &topic), want);
}
