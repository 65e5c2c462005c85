//! Avro and Protobuf topics through the test bed's schema registry
//! (Karapace), produced by Confluent's own serializers
//! (`scripts/produce_registry.py`): the seeds' customers and orders, two
//! syncs (the second through a new schema version with an optional
//! field), append and upsert, typed columns read byte-identically by every
//! reader; and what goes wrong: the registry down, an unknown schema id, a
//! message without the framing, a schema change Iceberg cannot follow.

use std::collections::BTreeMap;
use std::io::Write;
use std::process::Stdio;

use serde_json::{json, Value};

use crate::fault_proxy::{Fault, FaultProxy, Rule};
use crate::support::{
    create_topic, read_lines, sample_messages, table_report, try_read, Catalog, Job,
};
use crate::testbed::{command, get, repo_root, unique_name};

/// Orders, version 1: the seeds' fields with Avro logical types, and
/// nested values.
const ORDERS_V1: &str = r#"{"type":"record","name":"Order","namespace":"shop","fields":[
  {"name":"id","type":"long"},
  {"name":"customer_id","type":"long"},
  {"name":"product","type":"string"},
  {"name":"amount","type":{"type":"bytes","logicalType":"decimal","precision":10,"scale":2}},
  {"name":"status","type":{"type":"enum","name":"Status","symbols":["placed","shipped","delivered"]}},
  {"name":"created_at","type":{"type":"long","logicalType":"timestamp-millis"}},
  {"name":"updated_at","type":{"type":"long","logicalType":"timestamp-micros"}},
  {"name":"shipping","type":{"type":"record","name":"Shipping","fields":[
     {"name":"city","type":"string"},{"name":"zip","type":["null","string"],"default":null}]}},
  {"name":"tags","type":{"type":"array","items":"string"}}
]}"#;

/// Version 2 adds an optional coupon, and an optional country inside the
/// shipping record (compatible changes).
fn orders_v2() -> String {
    ORDERS_V1
        .replace(
            r#"{"name":"tags","#,
            r#"{"name":"coupon","type":["null","string"],"default":null},
  {"name":"tags","#,
        )
        .replace(
            r#"{"name":"zip","type":["null","string"],"default":null}]}}"#,
            r#"{"name":"zip","type":["null","string"],"default":null},
     {"name":"country","type":["null","string"],"default":null}]}}"#,
        )
}

const CUSTOMERS_V1: &str = r#"{"type":"record","name":"Customer","namespace":"shop","fields":[
  {"name":"id","type":"long"},{"name":"name","type":"string"},{"name":"email","type":"string"},
  {"name":"city","type":"string"},{"name":"tier","type":"string"},
  {"name":"created_at","type":{"type":"long","logicalType":"timestamp-millis"}},
  {"name":"updated_at","type":{"type":"long","logicalType":"timestamp-millis"}}
]}"#;

const ORDERS_PROTO_V1: &str = r#"syntax = "proto3";
package shop;
import "google/protobuf/timestamp.proto";
message Order {
  int64 id = 1;
  int64 customer_id = 2;
  string product = 3;
  double amount = 4;
  Status status = 5;
  google.protobuf.Timestamp created_at = 6;
  google.protobuf.Timestamp updated_at = 7;
  Shipping shipping = 8;
  repeated string tags = 9;
  map<string, int64> attrs = 11;
  enum Status { placed = 0; shipped = 1; delivered = 2; }
  message Shipping { string city = 1; optional string zip = 2; }
}
"#;

fn orders_proto_v2() -> String {
    ORDERS_PROTO_V1.replace(
        "  repeated string tags = 9;\n",
        "  repeated string tags = 9;\n  optional string coupon = 10;\n",
    )
}

/// The seeds' orders of one batch with the nested fields added; the
/// second batch's new orders carry a coupon.
fn orders(batch: &str, coupons: bool) -> Vec<Value> {
    sample_messages("orders", batch)
        .into_iter()
        .map(|(_, v)| {
            let mut o: Value = serde_json::from_str(&v).unwrap();
            let id = o["id"].as_i64().unwrap();
            o["shipping"] = json!({"city": format!("City{}", id % 3), "zip": (id % 2 == 0).then(|| format!("{id:05}"))});
            o["tags"] = json!((0..id % 3).map(|t| format!("t{t}")).collect::<Vec<_>>());
            if coupons && id > 40 {
                o["coupon"] = json!(format!("SAVE{id}"));
                o["shipping"]["country"] = json!("NO");
            }
            o
        })
        .collect()
}

fn customers(batch: &str) -> Vec<Value> {
    sample_messages("customers", batch)
        .into_iter()
        .map(|(_, v)| serde_json::from_str(&v).unwrap())
        .collect()
}

/// Produces `values` (keyed by their id) with Confluent's serializer for
/// `format`, schema `schema`; returns the producer's summary line.
fn produce_registry(topic: &str, format: &str, schema: &str, values: &[Value]) -> Value {
    let dir = std::env::temp_dir().join(unique_name("schemas"));
    std::fs::create_dir_all(&dir).unwrap();
    let ext = if format == "avro" { "avsc" } else { "proto" };
    let file = dir.join(format!("value.{ext}"));
    std::fs::write(&file, schema).unwrap();
    let lines: String = values
        .iter()
        .map(|v| json!({"key": v["id"].to_string(), "value": v}).to_string() + "\n")
        .collect();
    run_producer(
        topic,
        &[
            "--value-format",
            format,
            "--value-schema",
            file.to_str().unwrap(),
            "--partition-by-key",
        ],
        &lines,
    )
}

/// Raw value bytes (base64 per line), keyed `k<n>`.
fn produce_raw(topic: &str, values: &[Vec<u8>]) {
    use base64::Engine as _;
    let lines: String = values
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let b64 = base64::engine::general_purpose::STANDARD.encode(v);
            json!({"key": format!("k{i}"), "value": b64}).to_string() + "\n"
        })
        .collect();
    run_producer(topic, &["--raw", "--value-format", "avro"], &lines);
}

fn run_producer(topic: &str, args: &[&str], stdin: &str) -> Value {
    let script = repo_root().join("scripts/produce_registry.py");
    let mut child = command(&get("TESTBED_PYTHON"))
        .arg(&script)
        .args(["--topic", topic])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "producing to {topic}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("the producer's summary line")
}

fn registry_source(url: &str) -> String {
    format!("schema_registry_url = \"{url}\"\n")
}

/// Every engine reads the same bytes; the rows, parsed.
fn read_everywhere(catalog: Catalog, table: &str, engines: &[&str]) -> Vec<Value> {
    let first = read_lines(engines[0], catalog, table);
    for engine in &engines[1..] {
        let other = read_lines(engine, catalog, table);
        assert_eq!(
            other, first,
            "{engine} and {} disagree on {table}",
            engines[0]
        );
    }
    first
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// A reader that cannot read `table` fails saying `says`, printing no rows:
/// chDB reads a null struct as one of nulls (its reader refuses optional
/// nested columns), DataFusion 54 with pyiceberg-core 0.11 cannot read a
/// struct that gained a field (iceberg-rust).
fn assert_refuses(engine: &str, catalog: Catalog, table: &str, says: &str) {
    let out = try_read(engine, catalog, table);
    let why = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && out.stdout.is_empty() && why.contains(says),
        "{engine} must refuse {table} saying {says:?}: {why}"
    );
}

/// The payload a reader prints for a produced order.
fn expected_order(o: &Value, with_coupon_column: bool) -> Value {
    let mut e = json!({
        "id": o["id"],
        "customer_id": o["customer_id"],
        "product": o["product"],
        "amount": format!("{:.2}", o["amount"].as_f64().unwrap()),
        "status": o["status"],
        "created_at": canonical_ts(o["created_at"].as_str().unwrap()),
        "updated_at": canonical_ts(o["updated_at"].as_str().unwrap()),
        "shipping": o["shipping"],
        "tags": o["tags"],
    });
    if with_coupon_column {
        e["coupon"] = o.get("coupon").cloned().unwrap_or(Value::Null);
        let country = o["shipping"].get("country").cloned().unwrap_or(Value::Null);
        e["shipping"]["country"] = country;
    }
    e
}

/// `2026-10-29T15:22:04+00:00` as the readers print a timestamptz.
fn canonical_ts(t: &str) -> String {
    let (s, zone) = t.split_at(19);
    assert_eq!(zone, "+00:00");
    format!("{s}.000000+00:00")
}

/// The payload columns of reader rows, by id.
fn payload_by_id(rows: &[Value], fields: &[&str]) -> BTreeMap<i64, Value> {
    rows.iter()
        .map(|r| {
            let picked: serde_json::Map<String, Value> = fields
                .iter()
                .map(|f| (f.to_string(), r[*f].clone()))
                .collect();
            (r["id"].as_i64().unwrap(), Value::Object(picked))
        })
        .collect()
}

fn avro_orders_two_syncs(catalog: Catalog, upsert: bool) {
    let topic = unique_name("orders_avro");
    create_topic(&topic, 2);
    let first = orders("first", false);
    let summary = produce_registry(&topic, "avro", ORDERS_V1, &first);
    let v1_id = summary["value_schema_id"].as_i64().unwrap();
    let streams = if upsert {
        format!("[[streams]]\ntopic = \"{topic}\"\nmode = \"upsert\"\ndedup_keys = [\"id\"]\n")
    } else {
        String::new()
    };
    let registry = get("TESTBED_SCHEMA_REGISTRY_URL");
    let job = Job::new(catalog, &[&topic], &registry_source(&registry), &streams);
    let report = job.sync();
    let table = job.table(&topic);
    assert_eq!(table_report(&report, &table)["records"], first.len());

    let second = orders("second", true);
    let summary = produce_registry(&topic, "avro", &orders_v2(), &second);
    let v2_id = summary["value_schema_id"].as_i64().unwrap();
    assert_ne!(
        v1_id, v2_id,
        "the new optional field is a new schema version"
    );
    let report = job.sync();
    let t = table_report(&report, &table);
    assert_eq!(t["records"], second.len());
    let changes = t["schema_changes"].to_string();
    assert!(
        changes.contains("coupon") && changes.contains("country"),
        "the second sync adds the coupon column and shipping.country: {t}"
    );

    // Trino once (slow per query): on the append table. chDB refuses
    // optional nested columns and DataFusion fails on the struct that
    // gained a field: both asserted.
    let engines: &[&str] = if upsert {
        &["duckdb", "pyiceberg", "spark", "polars", "daft"]
    } else {
        &["duckdb", "pyiceberg", "spark", "polars", "daft", "trino"]
    };
    let rows = read_everywhere(catalog, &table, engines);
    assert_refuses(
        "chdb",
        catalog,
        &table,
        "column shipping is an optional struct",
    );
    assert_refuses(
        "datafusion",
        catalog,
        &table,
        "Incorrect number of arrays for StructArray fields, expected 3 got 2",
    );
    let fields = [
        "id",
        "customer_id",
        "product",
        "amount",
        "status",
        "created_at",
        "updated_at",
        "shipping",
        "tags",
        "coupon",
    ];
    let mut model: BTreeMap<i64, Value> = BTreeMap::new();
    let mut appended = Vec::new();
    for o in first.iter().chain(&second) {
        let e = expected_order(o, true);
        appended.push(e.clone());
        model.insert(o["id"].as_i64().unwrap(), e);
    }
    if upsert {
        assert_eq!(payload_by_id(&rows, &fields), model);
    } else {
        assert_eq!(rows.len(), first.len() + second.len());
        let mut got: Vec<Value> = payload_by_id(&rows, &fields).into_values().collect();
        got.sort_by_key(|v| v.to_string());
        appended.sort_by_key(|v| v.to_string());
        // Repeated ids keep one row each in `payload_by_id`: compare all.
        let mut all: Vec<Value> = rows
            .iter()
            .map(|r| {
                payload_by_id(std::slice::from_ref(r), &fields)
                    .into_values()
                    .next()
                    .unwrap()
            })
            .collect();
        all.sort_by_key(|v| v.to_string());
        assert_eq!(all, appended);
        assert!(!got.is_empty());
    }
}

#[test]
fn avro_orders_append_two_syncs_typed_and_read_alike_everywhere() {
    avro_orders_two_syncs(Catalog::Fixture, false);
}

#[test]
fn avro_orders_upsert_two_syncs_keep_the_latest_row_per_id() {
    avro_orders_two_syncs(Catalog::Seaweed, true);
}

#[test]
fn avro_customers_upsert_default_format_comes_from_the_registry() {
    let topic = unique_name("customers_avro");
    create_topic(&topic, 1);
    produce_registry(&topic, "avro", CUSTOMERS_V1, &customers("first"));
    produce_registry(&topic, "avro", CUSTOMERS_V1, &customers("second"));
    // No value_format: the registry's <topic>-value subject says Avro.
    let streams =
        format!("[[streams]]\ntopic = \"{topic}\"\nmode = \"upsert\"\ndedup_keys = [\"id\"]\n");
    let registry = get("TESTBED_SCHEMA_REGISTRY_URL");
    let job = Job::new(
        Catalog::Fixture,
        &[&topic],
        &registry_source(&registry),
        &streams,
    );
    job.sync();
    // Flat columns: chDB reads them too.
    let rows = read_everywhere(
        Catalog::Fixture,
        &job.table(&topic),
        &[
            "duckdb",
            "pyiceberg",
            "polars",
            "datafusion",
            "chdb",
            "daft",
        ],
    );
    let by_id = payload_by_id(&rows, &["name", "city", "tier", "updated_at"]);
    assert_eq!(by_id.len(), 10, "8 customers, 2 new ones, 2 updated");
    assert_eq!(by_id[&9]["city"], "Pune");
    assert_eq!(
        by_id[&3]["updated_at"],
        canonical_ts("2026-10-30T09:05:41+00:00")
    );
}

/// Orders with a map (the registry gives maps back written out as
/// repeated entry messages).
fn proto_orders(batch: &str, coupons: bool) -> Vec<Value> {
    let mut orders = orders(batch, coupons);
    for o in &mut orders {
        o["attrs"] = json!({"n": o["id"], "half": o["id"].as_i64().unwrap() / 2});
        o["shipping"].as_object_mut().unwrap().remove("country");
    }
    orders
}

fn protobuf_orders_two_syncs(catalog: Catalog, upsert: bool) {
    let topic = unique_name("orders_proto");
    create_topic(&topic, 2);
    let first = proto_orders("first", false);
    produce_registry(&topic, "protobuf", ORDERS_PROTO_V1, &first);
    let streams = if upsert {
        format!("[[streams]]\ntopic = \"{topic}\"\nmode = \"upsert\"\ndedup_keys = [\"id\"]\nvalue_format = \"protobuf\"\n")
    } else {
        format!("[[streams]]\ntopic = \"{topic}\"\nvalue_format = \"protobuf\"\n")
    };
    let registry = get("TESTBED_SCHEMA_REGISTRY_URL");
    let job = Job::new(catalog, &[&topic], &registry_source(&registry), &streams);
    job.sync();
    let second = proto_orders("second", true);
    produce_registry(&topic, "protobuf", &orders_proto_v2(), &second);
    job.sync();
    let table = job.table(&topic);
    // No struct gains a field here, so DataFusion reads it; chDB refuses
    // the optional struct `shipping` (asserted in avro_orders_two_syncs).
    let rows = read_everywhere(
        catalog,
        &table,
        &[
            "duckdb",
            "pyiceberg",
            "spark",
            "polars",
            "datafusion",
            "daft",
        ],
    );
    let fields = [
        "id",
        "product",
        "amount",
        "status",
        "created_at",
        "shipping",
        "tags",
        "coupon",
        "attrs",
    ];
    let mut model = BTreeMap::new();
    for o in first.iter().chain(&second) {
        let mut e = json!({
            "id": o["id"], "product": o["product"], "amount": o["amount"],
            "status": o["status"], "created_at": canonical_ts(o["created_at"].as_str().unwrap()),
            "shipping": o["shipping"], "tags": o["tags"],
            "coupon": o.get("coupon").cloned().unwrap_or(Value::Null),
            // Map entries as the readers print them: [key, value], by key.
            "attrs": [["half", o["id"].as_i64().unwrap() / 2], ["n", o["id"]]],
        });
        if e["shipping"]["zip"].is_null() {
            e["shipping"]["zip"] = Value::Null;
        }
        model.insert(o["id"].as_i64().unwrap(), e);
    }
    let got = payload_by_id(&rows, &fields);
    if upsert {
        assert_eq!(got, model);
    } else {
        assert_eq!(rows.len(), first.len() + second.len());
        for (id, row) in &got {
            let latest = &model[id];
            // Appended rows of a repeated id: the last one read equals one
            // of the versions; the products never change, so compare those.
            assert_eq!(row["product"], latest["product"], "id {id}");
        }
    }
}

#[test]
fn protobuf_orders_append_two_syncs_read_alike_everywhere() {
    protobuf_orders_two_syncs(Catalog::Seaweed, false);
}

#[test]
fn protobuf_orders_upsert_two_syncs_keep_the_latest_row_per_id() {
    protobuf_orders_two_syncs(Catalog::Fixture, true);
}

/// A sync that must fail; its stderr and report.
fn failing_sync(job: &Job) -> (String, Value) {
    let report = job.scratch_file("report.json");
    let out = job.run("sync", &["--report-json", report.to_str().unwrap()], &[]);
    assert!(!out.status.success(), "the sync should fail");
    let report = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    (String::from_utf8_lossy(&out.stderr).into_owned(), report)
}

#[test]
fn registry_down_mid_sync_fails_the_table_naming_registry_and_id_and_commits_nothing() {
    let topic = unique_name("orders_avro_down");
    create_topic(&topic, 1);
    let first = orders("first", false);
    produce_registry(&topic, "avro", ORDERS_V1, &first);
    let proxy = FaultProxy::start(&get("TESTBED_SCHEMA_REGISTRY_URL"));
    let streams = format!("[[streams]]\ntopic = \"{topic}\"\nvalue_format = \"avro\"\n");
    let job = Job::new(
        Catalog::Fixture,
        &[&topic],
        &registry_source(&proxy.uri),
        &streams,
    );
    job.sync();
    let table = job.table(&topic);
    let before = read_lines("duckdb", Catalog::Fixture, &table);

    // A new schema version appears while the registry is unavailable.
    let second = orders("second", true);
    let v2 = produce_registry(&topic, "avro", &orders_v2(), &second);
    let id = v2["value_schema_id"].as_i64().unwrap();
    proxy.add(
        Rule::new(Fault::Status(503))
            .path_contains("/schemas/ids/")
            .until_reset(),
    );
    let (stderr, report) = failing_sync(&job);
    let t = table_report(&report, &table);
    assert_eq!(t["status"], "failed", "{t}");
    let error = t["error"].as_str().unwrap_or_default();
    assert!(error.contains(&format!("schema id {id}")), "{error}");
    assert!(
        error.contains(&proxy.uri.clone().trim_end_matches('/').to_string()),
        "{error}\n{stderr}"
    );
    assert_eq!(
        read_lines("duckdb", Catalog::Fixture, &table),
        before,
        "nothing committed"
    );

    proxy.reset();
    let report = job.sync();
    assert_eq!(table_report(&report, &table)["records"], second.len());
    let rows = read_lines("duckdb", Catalog::Fixture, &table);
    assert_eq!(rows.lines().count(), first.len() + second.len());
}

/// Framed Avro bytes with another schema id.
fn with_schema_id(framed: &[u8], id: u32) -> Vec<u8> {
    let mut out = framed.to_vec();
    out[1..5].copy_from_slice(&id.to_be_bytes());
    out
}

#[test]
fn unknown_id_unframed_and_truncated_messages_follow_on_invalid_with_offset_and_reason() {
    let topic = unique_name("orders_avro_bad");
    create_topic(&topic, 1);
    let first = orders("first", false);
    produce_registry(&topic, "avro", ORDERS_V1, &first[..3]);
    // A real framed message to damage: read back with the consumer of the
    // test bed would need a client; build one from a fresh registration.
    let good = crate::support::fetch_values(&topic, 0, 1);
    let good = &good[0];
    let bad = vec![
        with_schema_id(good, 999_999),
        br#"{"id": 100, "product": "plain JSON"}"#.to_vec(),
        good[..good.len() - 4].to_vec(),
    ];
    produce_raw(&topic, &bad);
    produce_registry(&topic, "avro", ORDERS_V1, &first[3..5]);
    let registry = get("TESTBED_SCHEMA_REGISTRY_URL");

    // fail: the first bad message fails the table, naming its offset.
    let streams = format!("[[streams]]\ntopic = \"{topic}\"\nvalue_format = \"avro\"\n");
    let job = Job::new(
        Catalog::Fixture,
        &[&topic],
        &registry_source(&registry),
        &streams,
    );
    let (_, report) = failing_sync(&job);
    let error = table_report(&report, &job.table(&topic))["error"].to_string();
    assert!(
        error.contains("@3") && error.contains("schema id 999999"),
        "{error}"
    );
    assert_eq!(
        try_read("duckdb", Catalog::Fixture, &job.table(&topic))
            .status
            .code(),
        Some(4)
    );

    // dlq: the three land in the dead-letter table with their reasons.
    let streams = format!(
        "[[streams]]\ntopic = \"{topic}\"\nvalue_format = \"avro\"\non_invalid = \"dlq\"\n"
    );
    let job = Job::new(
        Catalog::Fixture,
        &[&topic],
        &registry_source(&registry),
        &streams,
    );
    let report = job.sync();
    let table = job.table(&topic);
    assert_eq!(table_report(&report, &table)["records"], 5);
    let dead = read_lines("duckdb", Catalog::Fixture, &format!("{table}__dlq"));
    let dead: Vec<Value> = dead
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(dead.len(), 3, "{dead:?}");
    let text = serde_json::to_string(&dead).unwrap();
    assert!(text.contains("schema id 999999 is unknown"), "{text}");
    assert!(text.contains("not schema-registry framed"), "{text}");
    assert!(text.contains("truncated"), "{text}");
}

#[test]
fn a_schema_change_iceberg_cannot_follow_is_invalid_naming_both_schema_ids() {
    let topic = unique_name("orders_avro_change");
    create_topic(&topic, 1);
    let first = orders("first", false);
    let v1 = produce_registry(&topic, "avro", ORDERS_V1, &first[..4]);
    // id becomes a string: a new subject version only with compatibility NONE.
    let v3 = ORDERS_V1.replace(
        r#"{"name":"id","type":"long"}"#,
        r#"{"name":"id","type":"string"}"#,
    );
    let changed: Vec<Value> = first[4..6]
        .iter()
        .map(|o| {
            let mut o = o.clone();
            o["id"] = json!(o["id"].to_string());
            o
        })
        .collect();
    let dir = std::env::temp_dir().join(unique_name("schemas"));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("v3.avsc");
    std::fs::write(&file, &v3).unwrap();
    let lines: String = changed
        .iter()
        .map(|v| json!({"key": "x", "value": v}).to_string() + "\n")
        .collect();
    let v3_summary = run_producer(
        &topic,
        &[
            "--value-format",
            "avro",
            "--value-schema",
            file.to_str().unwrap(),
            "--compatibility",
            "NONE",
        ],
        &lines,
    );
    let registry = get("TESTBED_SCHEMA_REGISTRY_URL");
    let streams = format!(
        "[[streams]]\ntopic = \"{topic}\"\nvalue_format = \"avro\"\non_invalid = \"skip\"\n"
    );
    let job = Job::new(
        Catalog::Fixture,
        &[&topic],
        &registry_source(&registry),
        &streams,
    );
    let log = job.scratch_file("sync.log");
    let report = job.sync_logged(&log);
    let t = table_report(&report, &job.table(&topic));
    assert_eq!(t["records"], 4);
    assert_eq!(t["skipped_records"], 2, "{t}");
    let log = std::fs::read_to_string(&log).unwrap();
    let (old, new) = (
        v1["value_schema_id"].as_i64().unwrap(),
        v3_summary["value_schema_id"].as_i64().unwrap(),
    );
    assert!(
        log.contains(&format!("schema id {new}")) && log.contains(&format!("schema id {old}")),
        "{log}"
    );
}

const ORDER_KEY: &str = r#"{"type":"record","name":"OrderKey","namespace":"shop","fields":[
  {"name":"region","type":"string"},{"name":"id","type":"long"}]}"#;

#[test]
fn avro_keys_upsert_on_a_key_field_and_their_tombstones_delete() {
    let topic = unique_name("orders_avro_keyed");
    create_topic(&topic, 2);
    let dir = std::env::temp_dir().join(unique_name("schemas"));
    std::fs::create_dir_all(&dir).unwrap();
    let (value_file, key_file) = (dir.join("value.avsc"), dir.join("key.avsc"));
    std::fs::write(&value_file, ORDERS_V1).unwrap();
    std::fs::write(&key_file, ORDER_KEY).unwrap();
    let args = [
        "--value-format",
        "avro",
        "--value-schema",
        value_file.to_str().unwrap(),
        "--key-format",
        "avro",
        "--key-schema",
        key_file.to_str().unwrap(),
        "--partition-by-key",
    ];
    let line = |id: i64, value: Option<&Value>| {
        json!({"key": {"region": "eu", "id": id}, "value": value}).to_string() + "\n"
    };
    let first = orders("first", false);
    let lines: String = first
        .iter()
        .map(|o| line(o["id"].as_i64().unwrap(), Some(o)))
        .collect();
    run_producer(&topic, &args, &lines);
    let registry = get("TESTBED_SCHEMA_REGISTRY_URL");
    let streams = format!(
        "[[streams]]\ntopic = \"{topic}\"\nmode = \"upsert\"\ndedup_keys = [\"_kafka_key.id\"]\n"
    );
    let job = Job::new(
        Catalog::Fixture,
        &[&topic],
        &registry_source(&registry),
        &streams,
    );
    job.sync();
    // Orders 2 and 5 are deleted by tombstones; order 7 changes status.
    let mut seven = first[6].clone();
    seven["status"] = json!("delivered");
    let lines = line(2, None) + &line(5, None) + &line(7, Some(&seven));
    run_producer(&topic, &args, &lines);
    job.sync();
    let table = job.table(&topic);
    let rows = read_everywhere(Catalog::Fixture, &table, &["duckdb", "pyiceberg", "spark"]);
    let by_id = payload_by_id(&rows, &["status"]);
    assert_eq!(by_id.len(), first.len() - 2);
    assert!(!by_id.contains_key(&2) && !by_id.contains_key(&5));
    assert_eq!(by_id[&7]["status"], "delivered");
}
