//! Debezium change events into rows: types from the Connect schema, the
//! operations, the placeholder of unsent values, keys.

use arrow_array::cast::AsArray;
use arrow_array::types::{Date32Type, Decimal128Type, Int32Type, TimestampMicrosecondType};
use arrow_array::{Array, RecordBatch};
use serde_json::json;

use crate::columns::ColumnType;
use crate::config::ChangeEvents;
use crate::decode::{BatchDecoder, DecodeErrorKind, DecoderOptions, IdMode, ALL_KEY_FIELDS};
use crate::record::SourceRecord;
use crate::TableColumns;

fn field(name: &str, ty: &str, semantic: Option<&str>) -> serde_json::Value {
    let mut f = json!({"type": ty, "optional": true, "field": name});
    if let Some(s) = semantic {
        f["name"] = json!(s);
    }
    f
}

/// The envelope schema of a table `(id int, amount numeric(12,3), at
/// timestamptz, d date, u uuid, j jsonb, b bytea, tags text[])`, as
/// Debezium's PostgreSQL connector writes it, plus `extra` fields.
pub(super) fn envelope_schema(extra: &[serde_json::Value]) -> serde_json::Value {
    let mut amount = field(
        "amount",
        "bytes",
        Some("org.apache.kafka.connect.data.Decimal"),
    );
    amount["parameters"] = json!({"scale": "3", "connect.decimal.precision": "12"});
    let mut fields = vec![
        json!({"type": "int32", "optional": false, "field": "id"}),
        amount,
        field("at", "string", Some("io.debezium.time.ZonedTimestamp")),
        field("d", "int32", Some("io.debezium.time.Date")),
        field("u", "string", Some("io.debezium.data.Uuid")),
        field("j", "string", Some("io.debezium.data.Json")),
        field("b", "bytes", None),
        json!({"type": "array", "optional": true, "field": "tags",
               "items": {"type": "string", "optional": true}}),
    ];
    fields.extend(extra.iter().cloned());
    let value =
        json!({"type": "struct", "optional": true, "name": "p.public.t.Value", "fields": fields});
    let mut before = value.clone();
    before["field"] = json!("before");
    let mut after = value;
    after["field"] = json!("after");
    json!({"type": "struct", "name": "p.public.t.Envelope", "fields": [
        before, after,
        {"type": "struct", "field": "source", "fields": []},
        {"type": "string", "optional": false, "field": "op"},
        {"type": "int64", "optional": true, "field": "ts_ms"}
    ]})
}

pub(super) fn event(
    schema: Option<&serde_json::Value>,
    op: &str,
    after: serde_json::Value,
) -> String {
    let payload = json!({"before": null, "after": after, "source": {"lsn": 1, "ts_ms": 1}, "op": op, "ts_ms": 1});
    match schema {
        Some(s) => json!({"schema": s, "payload": payload}).to_string(),
        None => payload.to_string(),
    }
}

pub(super) fn row() -> serde_json::Value {
    json!({"id": 1, "amount": "AeJA", "at": "2026-12-07T01:02:03.456789Z", "d": 20429,
           "u": "6f1c2c1e-8a7b-4c2d-9e0f-0123456789ab", "j": "{\"a\": [1, 2]}",
           "b": "AAEC", "tags": ["x", null, "z"]})
}

pub(super) fn record<'a>(offset: i64, key: &'a str, value: Option<&'a str>) -> SourceRecord<'a> {
    SourceRecord {
        topic: "p.public.t",
        partition: 0,
        offset,
        timestamp_ms: Some(1_000),
        key: Some(key.as_bytes()),
        value: value.map(str::as_bytes),
        headers: Default::default(),
    }
}

pub(super) fn decoder(payload: &[(String, ColumnType)]) -> BatchDecoder {
    decoder_of(&TableColumns::for_new_table(payload).unwrap())
}

/// A decoder of a change-event table: `payload` and `_cdc_lsn` too.
fn lsn_decoder(payload: &[(String, ColumnType)]) -> BatchDecoder {
    let columns = TableColumns::for_new_table(payload).unwrap();
    decoder_of(&columns.with_change_columns().unwrap())
}

pub(super) fn decoder_of(columns: &TableColumns) -> BatchDecoder {
    let mut options = DecoderOptions::append(0);
    options.id_mode = IdMode::Upsert {
        key_columns: vec![ALL_KEY_FIELDS.to_owned()],
    };
    options.change_events = ChangeEvents::Debezium;
    BatchDecoder::new(columns, options).unwrap()
}

/// The columns a first event asks for, as the sync adds them.
pub(super) fn typed_columns(value: &str) -> Vec<(String, ColumnType)> {
    let e = decoder(&[])
        .append(&record(0, "{}", Some(value)))
        .unwrap_err();
    let DecodeErrorKind::UnknownFields(fields) = e.kind else {
        panic!("{e}")
    };
    fields
        .iter()
        .map(|f| (f.name.clone(), f.column_type()))
        .collect()
}

pub(super) fn column<'a>(batch: &'a RecordBatch, name: &str) -> &'a dyn Array {
    batch.column_by_name(name).unwrap().as_ref()
}

#[test]
fn the_connect_schema_gives_each_field_its_exact_type_and_value() {
    let schema = envelope_schema(&[]);
    let value = event(Some(&schema), "c", row());
    let columns = typed_columns(&value);
    let types: Vec<String> = columns.iter().map(|(n, t)| format!("{n} {t}")).collect();
    assert_eq!(
        types,
        [
            "id int",
            "amount decimal(12,3)",
            "at timestamptz",
            "d date",
            "u uuid",
            "j string",
            "b binary",
            "tags list<string>"
        ]
    );
    let mut d = decoder(&columns);
    d.append(&record(0, r#"{"id":1}"#, Some(&value))).unwrap();
    let b = d.finish();
    assert_eq!(column(&b, "id").as_primitive::<Int32Type>().value(0), 1);
    // 0x01e240 = 123456, scale 3.
    let amount = column(&b, "amount").as_primitive::<Decimal128Type>();
    assert_eq!(amount.value_as_string(0), "123.456");
    let at = column(&b, "at").as_primitive::<TimestampMicrosecondType>();
    assert_eq!(at.value(0), 1_796_605_323_456_789);
    assert_eq!(column(&b, "d").as_primitive::<Date32Type>().value(0), 20429);
    assert_eq!(
        column(&b, "u").as_fixed_size_binary().value(0),
        [
            0x6f, 0x1c, 0x2c, 0x1e, 0x8a, 0x7b, 0x4c, 0x2d, 0x9e, 0x0f, 0x01, 0x23, 0x45, 0x67,
            0x89, 0xab
        ]
    );
    assert_eq!(
        column(&b, "j").as_string::<i32>().value(0),
        r#"{"a": [1, 2]}"#
    );
    assert_eq!(column(&b, "b").as_binary::<i64>().value(0), [0, 1, 2]);
    let tags = column(&b, "tags").as_list::<i32>().value(0);
    let tags = tags.as_string::<i32>();
    assert_eq!(
        (tags.value(0), tags.is_null(1), tags.value(2)),
        ("x", true, "z")
    );
}

#[test]
fn deletes_and_tombstones_delete_the_key_and_other_operations_are_not_rows() {
    let schema = envelope_schema(&[]);
    let columns = typed_columns(&event(Some(&schema), "c", row()));
    let mut d = decoder(&columns);
    let delete = event(Some(&schema), "d", serde_json::Value::Null);
    let kind = |d: &mut BatchDecoder, v: Option<&str>| {
        d.append(&record(5, r#"{"id":1}"#, v)).unwrap_err().kind
    };
    assert_eq!(kind(&mut d, Some(&delete)), DecodeErrorKind::Tombstone);
    assert_eq!(kind(&mut d, None), DecodeErrorKind::Tombstone);
    let truncate = event(Some(&schema), "t", serde_json::Value::Null);
    let e = d.append(&record(6, "{}", Some(&truncate))).unwrap_err();
    assert_eq!(e.kind, DecodeErrorKind::Truncate);
    assert_eq!(d.change_lsn(), Some(1));
    let message = event(Some(&schema), "m", serde_json::Value::Null);
    let e = d.append(&record(6, "{}", Some(&message))).unwrap_err();
    assert_eq!(
        e.to_string(),
        "p.public.t[0]@6: change event: `op` \"m\" is not a row change"
    );
    // An `op` without an object `source` is a column of a flattened
    // record, as are `source` and `payload` of other forms.
    for row in [
        r#"{"id": 1, "op": "c"}"#,
        r#"{"id": 1, "source": "web"}"#,
        r#"{"id": 1, "payload": "{}"}"#,
    ] {
        let e = d.append(&record(7, "{}", Some(row))).unwrap_err();
        let DecodeErrorKind::UnknownFields(fields) = &e.kind else {
            panic!("{row}: {e}")
        };
        assert_eq!(fields.len(), 1, "{row}");
    }
    assert_eq!(d.len(), 0);
}

#[test]
fn the_placeholder_of_an_unsent_value_fails_the_event_naming_the_field() {
    let schema = envelope_schema(&[field("note", "string", None)]);
    let columns = typed_columns(&event(Some(&schema), "c", row()));
    let mut d = decoder(&columns);
    let mut after = row();
    after["note"] = json!(super::UNAVAILABLE);
    let e = d
        .append(&record(
            9,
            r#"{"id":1}"#,
            Some(&event(Some(&schema), "u", after)),
        ))
        .unwrap_err();
    assert_eq!(e.field.as_deref(), Some("note"));
    assert!(e.to_string().contains("REPLICA IDENTITY FULL"), "{e}");
    assert_eq!(d.len(), 0, "nothing of the event is left in the batch");
    d.append(&record(
        10,
        r#"{"id":1}"#,
        Some(&event(Some(&schema), "u", row())),
    ))
    .unwrap();
    assert_eq!(d.len(), 1);
}

/// An upsert table's decoder, which keeps unsent values.
fn keeping_decoder(payload: &[(String, ColumnType)]) -> BatchDecoder {
    let mut options = DecoderOptions::append(0);
    options.id_mode = IdMode::Upsert {
        key_columns: vec![ALL_KEY_FIELDS.to_owned()],
    };
    options.change_events = ChangeEvents::Debezium;
    options.keep_unsent = true;
    BatchDecoder::new(&TableColumns::for_new_table(payload).unwrap(), options).unwrap()
}

/// (row, column) of the unsent values of the batch just finished.
fn unsent(d: &mut BatchDecoder) -> Vec<(u32, String)> {
    d.take_unsent()
        .into_iter()
        .map(|u| (u.row, u.column.to_string()))
        .collect()
}

#[test]
fn an_upsert_decoder_writes_unsent_values_as_nulls_and_lists_them() {
    let schema = envelope_schema(&[field("note", "string", None)]);
    let columns = typed_columns(&event(Some(&schema), "c", row()));
    let mut d = keeping_decoder(&columns);
    let mut after = row();
    after["note"] = json!(super::UNAVAILABLE);
    after["b"] = json!(super::value::UNAVAILABLE_BASE64);
    after["tags"] = json!([super::UNAVAILABLE]);
    let key = r#"{"id":1}"#;
    d.append(&record(8, key, Some(&event(Some(&schema), "c", row()))))
        .unwrap();
    d.append(&record(9, key, Some(&event(Some(&schema), "u", after))))
        .unwrap();
    // A failed event leaves nothing listed.
    let mut bad = row();
    bad["note"] = json!(super::UNAVAILABLE);
    bad["d"] = json!("not a date");
    d.append(&record(10, key, Some(&event(Some(&schema), "u", bad))))
        .unwrap_err();
    let batch = d.finish();
    assert_eq!(batch.num_rows(), 2);
    for name in ["note", "b", "tags"] {
        assert!(column(&batch, name).is_null(1), "{name}");
    }
    assert!(column(&batch, "b").is_valid(0) && column(&batch, "tags").is_valid(0));
    assert_eq!(
        unsent(&mut d),
        vec![(1, "b".into()), (1, "tags".into()), (1, "note".into())]
    );
    assert_eq!(unsent(&mut d), vec![], "taken once");
}

#[test]
fn the_placeholder_without_the_schema_is_unsent_or_fails_naming_the_field() {
    let columns = vec![
        ("id".to_owned(), ColumnType::Long),
        ("n".to_owned(), ColumnType::Long),
        ("big".to_owned(), ColumnType::String),
        ("b".to_owned(), ColumnType::String),
    ];
    let after = json!({"id": 1, "n": 2, "big": super::UNAVAILABLE,
                       "b": super::value::UNAVAILABLE_BASE64});
    let value = event(None, "u", after);
    let message = record(4, r#"{"id":1}"#, Some(&value));
    let mut d = keeping_decoder(&columns);
    d.append(&message).unwrap();
    let batch = d.finish();
    assert!(column(&batch, "big").is_null(0) && column(&batch, "b").is_null(0));
    assert_eq!(
        column(&batch, "n")
            .as_primitive::<arrow_array::types::Int64Type>()
            .value(0),
        2
    );
    assert_eq!(unsent(&mut d), vec![(0, "b".into()), (0, "big".into())]);

    // Without keeping unsent values (an append table), never the text.
    let mut d = decoder(&columns);
    let e = d.append(&message).unwrap_err();
    assert!(matches!(e.field.as_deref(), Some("big" | "b")), "{e}");
    assert!(e.to_string().contains("REPLICA IDENTITY FULL"), "{e}");
    assert_eq!(d.len(), 0);
}

#[test]
fn a_new_field_of_a_later_schema_is_an_unknown_field_of_its_type() {
    let first = envelope_schema(&[]);
    let columns = typed_columns(&event(Some(&first), "r", row()));
    let mut d = decoder(&columns);
    let mut grown = envelope_schema(&[field(
        "at_local",
        "int64",
        Some("io.debezium.time.MicroTimestamp"),
    )]);
    grown["name"] = json!("p.public.t.Envelope");
    let mut after = row();
    after["at_local"] = json!(1_000_001);
    let e = d
        .append(&record(
            3,
            r#"{"id":1}"#,
            Some(&event(Some(&grown), "u", after)),
        ))
        .unwrap_err();
    let DecodeErrorKind::UnknownFields(fields) = e.kind else {
        panic!("{e}")
    };
    assert_eq!(fields[0].name, "at_local");
    assert_eq!(fields[0].column_type(), ColumnType::Timestamp);
}

#[test]
fn without_the_schema_after_is_read_as_plain_json() {
    let value = event(None, "u", json!({"id": 3, "name": "ann"}));
    let columns = typed_columns(&value);
    assert_eq!(
        columns,
        [
            ("id".to_owned(), ColumnType::Long),
            ("name".to_owned(), ColumnType::String)
        ]
    );
    let mut d = decoder(&columns);
    d.append(&record(0, r#"{"id":3}"#, Some(&value))).unwrap();
    assert_eq!(d.len(), 1);
}

#[test]
fn a_key_with_and_without_its_connect_schema_gives_one_id() {
    let value = event(None, "c", json!({"id": 3, "name": "ann"}));
    let columns = typed_columns(&value);
    let id_of = |key: &str| {
        let mut d = decoder(&columns);
        d.append(&record(0, key, Some(&value))).unwrap();
        let b = d.finish();
        column(&b, "_olake_id")
            .as_string::<i32>()
            .value(0)
            .to_owned()
    };
    let plain = id_of(r#"{"id":3}"#);
    let wrapped = id_of(
        r#"{"schema":{"type":"struct","fields":[{"type":"int32","field":"id"}]},"payload":{"id":3}}"#,
    );
    assert_eq!(plain, wrapped);
    assert_ne!(plain, id_of(r#"{"id":4}"#));
}

#[test]
fn the_cdc_timestamp_is_the_sources_change_time_and_the_kafka_timestamp_stays() {
    let value = json!({"payload": {"after": {"id": 1}, "op": "u",
                       "source": {"ts_ms": 1_796_605_323_456_i64, "lsn": 7}},
                       "schema": null})
    .to_string();
    let plain = json!({"after": {"id": 2}, "op": "c", "source": {"ts_ms": 5}}).to_string();
    let columns = typed_columns(&plain);
    let mut d = decoder(&columns);
    d.append(&record(0, r#"{"id":1}"#, Some(&value))).unwrap();
    d.append(&record(1, r#"{"id":2}"#, Some(&plain))).unwrap();
    let b = d.finish();
    let micros = |name: &str| {
        let a = column(&b, name).as_primitive::<TimestampMicrosecondType>();
        (a.value(0), a.value(1))
    };
    assert_eq!(micros("_cdc_timestamp"), (1_796_605_323_456_000, 5_000));
    assert_eq!(micros("_kafka_timestamp"), (1_000_000, 1_000_000));
}

#[test]
fn events_in_the_json_converters_byte_order_read_alike_through_the_known_schema() {
    // Kafka Connect writes {"schema":S,"payload":P}; json! sorts the keys.
    let connect = |schema: &serde_json::Value, after: serde_json::Value| {
        let payload = json!({"before": null, "after": after, "source": {"ts_ms": 1}, "op": "u"});
        format!(r#"{{"schema":{schema},"payload":{payload}}}"#)
    };
    let schema = envelope_schema(&[]);
    let columns = typed_columns(&event(Some(&schema), "c", row()));
    let mut rows = [row(), row(), row()];
    rows[1]["id"] = json!(2);
    rows[2]["amount"] = json!("/+I=");
    let read = |values: &[String]| {
        let mut d = decoder(&columns);
        for (i, v) in values.iter().enumerate() {
            d.append(&record(i as i64, r#"{"id":1}"#, Some(v))).unwrap();
        }
        d.finish()
    };
    let in_connect_order: Vec<String> = rows.iter().map(|r| connect(&schema, r.clone())).collect();
    let sorted: Vec<String> = rows
        .iter()
        .map(|r| event(Some(&schema), "u", r.clone()))
        .collect();
    let (a, b) = (read(&in_connect_order), read(&sorted));
    for name in ["id", "amount", "at", "tags", "_cdc_timestamp"] {
        assert_eq!(column(&a, name), column(&b, name), "{name}");
    }
    assert_eq!(
        column(&a, "amount")
            .as_primitive::<Decimal128Type>()
            .value_as_string(2),
        "-0.030"
    );
    // A changed schema is not mistaken for the known one.
    let grown = envelope_schema(&[field("note", "string", None)]);
    let mut d = decoder(&columns);
    d.append(&record(0, r#"{"id":1}"#, Some(&in_connect_order[0])))
        .unwrap();
    let e = d
        .append(&record(1, r#"{"id":1}"#, Some(&connect(&grown, row()))))
        .unwrap_err();
    assert!(matches!(e.kind, DecodeErrorKind::UnknownFields(_)), "{e}");
}

#[test]
fn an_events_log_position_fills_cdc_lsn_and_orders_its_delete() {
    let schema = envelope_schema(&[]);
    let mut d = lsn_decoder(&typed_columns(&event(Some(&schema), "c", row())));
    assert!(d.has_change_lsn());
    let at = |op: &str, lsn: Option<i64>, after: serde_json::Value| {
        let mut v: serde_json::Value =
            serde_json::from_str(&event(Some(&schema), op, after)).unwrap();
        v["payload"]["source"]["lsn"] = json!(lsn);
        v.to_string()
    };
    d.append(&record(
        0,
        r#"{"id":1}"#,
        Some(&at("c", Some(4_200), row())),
    ))
    .unwrap();
    d.append(&record(1, r#"{"id":1}"#, Some(&at("u", None, row()))))
        .unwrap();
    let delete = at("d", Some(4_300), serde_json::Value::Null);
    let e = d
        .append(&record(2, r#"{"id":1}"#, Some(&delete)))
        .unwrap_err();
    assert_eq!(e.kind, DecodeErrorKind::Tombstone);
    assert_eq!(d.change_lsn(), Some(4_300));
    // The Kafka tombstone after it has no position of its own.
    d.append(&record(3, r#"{"id":1}"#, None)).unwrap_err();
    assert_eq!(d.change_lsn(), None);
    let b = d.finish();
    let lsn = column(&b, "_cdc_lsn").as_primitive::<arrow_array::types::Int64Type>();
    assert_eq!((lsn.value(0), lsn.is_null(1)), (4_200, true));
}

#[test]
fn a_flattened_record_is_the_row_and_its_markers_say_delete_position_and_time() {
    // Debezium's ExtractNewRecordState with add.fields=op,lsn,source.ts_ms
    // and delete.handling.mode=rewrite, with and without the schema.
    let flat = |deleted: &str| {
        json!({"id": 7, "name": "x", "__op": "u", "__lsn": 900, "__source_ts_ms": 2_000,
               "__deleted": deleted})
    };
    let fields = [
        ("id", "int32"),
        ("name", "string"),
        ("__op", "string"),
        ("__lsn", "int64"),
        ("__source_ts_ms", "int64"),
        ("__deleted", "string"),
    ];
    let schema = json!({"type": "struct", "name": "p.public.t.Value", "fields": fields
        .iter()
        .map(|(n, t)| json!({"type": t, "optional": true, "field": n}))
        .collect::<Vec<_>>()});
    for with_schema in [false, true] {
        let value = |deleted: &str| match with_schema {
            true => json!({"schema": schema, "payload": flat(deleted)}).to_string(),
            false => flat(deleted).to_string(),
        };
        let columns = if with_schema {
            typed_columns(&value("false"))
        } else {
            let e = decoder(&[])
                .append(&record(0, "{}", Some(&value("false"))))
                .unwrap_err();
            let DecodeErrorKind::UnknownFields(fields) = e.kind else {
                panic!("{e}")
            };
            fields
                .iter()
                .map(|f| (f.name.clone(), f.column_type()))
                .collect()
        };
        let mut names: Vec<&str> = columns.iter().map(|(n, _)| n.as_str()).collect();
        names.sort_unstable();
        assert_eq!(
            names,
            ["__deleted", "__lsn", "__op", "__source_ts_ms", "id", "name"],
            "{with_schema}"
        );
        let mut d = lsn_decoder(&columns);
        d.append(&record(1, r#"{"id":7}"#, Some(&value("false"))))
            .unwrap();
        let e = d
            .append(&record(2, r#"{"id":7}"#, Some(&value("true"))))
            .unwrap_err();
        assert_eq!(e.kind, DecodeErrorKind::Tombstone, "{with_schema}");
        let b = d.finish();
        assert_eq!(b.num_rows(), 1);
        let lsn = column(&b, "_cdc_lsn").as_primitive::<arrow_array::types::Int64Type>();
        assert_eq!(lsn.value(0), 900);
        let at = column(&b, "_cdc_timestamp").as_primitive::<TimestampMicrosecondType>();
        assert_eq!(at.value(0), 2_000_000);
        assert_eq!(column(&b, "name").as_string::<i32>().value(0), "x");
    }
}

#[test]
fn cdc_op_is_the_events_operation_from_the_envelope_the_field_or_the_op_header() {
    use crate::record::{wire_headers, Headers};
    let payload = [
        ("id".to_owned(), ColumnType::Long),
        ("__op".to_owned(), ColumnType::String),
    ];
    let mut d = lsn_decoder(&payload);
    for (offset, op) in ["r", "c", "u"].iter().enumerate() {
        d.append(&record(
            offset as i64,
            r#"{"id":1}"#,
            Some(&event(None, op, json!({"id": 1}))),
        ))
        .unwrap();
    }
    // Flattened records: the `__op` field, else the `__op` header (as
    // Connect's default header converter writes it, or as JSON), else
    // unknown. A header `d` deletes.
    let flat = |op: Option<&str>| match op {
        Some(op) => json!({"id": 2, "__op": op}).to_string(),
        None => json!({"id": 2}).to_string(),
    };
    let (with_field, plain) = (flat(Some("c")), flat(None));
    let raw = wire_headers(&[(b"__op", Some(b"x")), (b"__op", Some(b"u"))]);
    let json_text = wire_headers(&[(b"__op", Some(b"\"r\""))]);
    let delete = wire_headers(&[(b"__op", Some(b"d"))]);
    let with = |offset, value: &'static str, headers| SourceRecord {
        headers,
        ..record(offset, r#"{"id":2}"#, Some(value))
    };
    let leak = |s: String| -> &'static str { Box::leak(s.into_boxed_str()) };
    let (with_field, plain) = (leak(with_field), leak(plain));
    d.append(&with(3, with_field, Headers::Wire(&raw))).unwrap();
    d.append(&with(4, plain, Headers::Wire(&raw))).unwrap();
    d.append(&with(5, plain, Headers::Wire(&json_text)))
        .unwrap();
    d.append(&with(6, plain, Headers::None)).unwrap();
    let e = d
        .append(&with(7, plain, Headers::Wire(&delete)))
        .unwrap_err();
    assert_eq!(e.kind, DecodeErrorKind::Tombstone);
    let b = d.finish();
    let ops: Vec<Option<&str>> = column(&b, "_cdc_op").as_string::<i32>().iter().collect();
    assert_eq!(
        ops,
        [
            Some("r"),
            Some("c"),
            Some("u"),
            Some("c"),
            Some("u"),
            Some("r"),
            None
        ]
    );
}

/// A Debezium event without the schema: `op` with `before` and `after`.
fn change(op: &str, before: serde_json::Value, after: serde_json::Value) -> String {
    json!({"before": before, "after": after, "source": {"lsn": 5, "ts_ms": 1}, "op": op})
        .to_string()
}

#[test]
fn payload_keys_name_a_deletes_row_by_its_before_and_a_moved_rows_old_key() {
    let columns = TableColumns::for_new_table(&[
        ("id".to_owned(), ColumnType::Long),
        ("code".to_owned(), ColumnType::String),
        ("__op".to_owned(), ColumnType::String),
    ])
    .unwrap();
    // `_kafka_key` as the key is the message key's, not the payload's.
    let mut options = DecoderOptions::append(0);
    options.id_mode = IdMode::Upsert {
        key_columns: vec!["_kafka_key".to_owned()],
    };
    options.change_events = ChangeEvents::Debezium;
    assert!(!BatchDecoder::new(&columns, options)
        .unwrap()
        .key_in_payload());
    let mut options = DecoderOptions::append(0);
    options.id_mode = IdMode::Upsert {
        key_columns: vec!["code".to_owned()],
    };
    options.change_events = ChangeEvents::Debezium;
    let mut d = BatchDecoder::new(&columns, options).unwrap();
    let append =
        |d: &mut BatchDecoder, offset, value: &str| d.append(&record(offset, "{}", Some(value)));
    let (a, b) = (json!({"id": 1, "code": "a"}), json!({"id": 1, "code": "b"}));
    append(&mut d, 0, &change("c", json!(null), a.clone())).unwrap();
    append(&mut d, 1, &change("u", json!(null), b.clone())).unwrap();
    assert_eq!(
        d.take_replaced_key(),
        None,
        "no `before`: nothing known moved"
    );
    append(&mut d, 2, &change("u", a.clone(), b.clone())).unwrap();
    let moved = d.take_replaced_key().expect("the row moved from code a");
    append(&mut d, 3, &change("u", b.clone(), b.clone())).unwrap();
    assert_eq!(d.take_replaced_key(), None, "the same key");
    // A `before` without a key value names no row the table has: the
    // update stands, nothing moved.
    let keyless = json!({"id": 1, "code": null});
    append(&mut d, 3, &change("u", keyless, b.clone())).unwrap();
    assert_eq!(d.take_replaced_key(), None);
    let e = append(&mut d, 4, &change("d", b.clone(), json!(null))).unwrap_err();
    let DecodeErrorKind::DeleteKey {
        olake_id: deleted_b,
    } = e.kind
    else {
        panic!("{e}")
    };
    let e = append(&mut d, 5, &change("d", a.clone(), json!(null))).unwrap_err();
    assert_eq!(
        e.kind,
        DecodeErrorKind::DeleteKey {
            olake_id: moved.clone()
        }
    );
    assert_ne!(deleted_b, moved);
    // Without `before`, or without the key in it: named, with the fix.
    for before in [json!(null), json!({"id": 1, "code": null})] {
        let e = append(&mut d, 6, &change("d", before, json!(null))).unwrap_err();
        assert!(e.to_string().contains("REPLICA IDENTITY FULL"), "{e}");
    }
    // The Kafka tombstone after a delete names no row.
    let e = d.append(&record(7, "{}", None)).unwrap_err();
    assert_eq!(e.kind, DecodeErrorKind::Tombstone);
    // A flattened record saying `__op` d (without `__deleted`) is its row.
    let flat = json!({"id": 1, "code": "b", "__op": "d"}).to_string();
    let e = append(&mut d, 8, &flat).unwrap_err();
    assert_eq!(
        e.kind,
        DecodeErrorKind::DeleteKey {
            olake_id: deleted_b.clone()
        }
    );
    let batch = d.finish();
    assert_eq!(batch.num_rows(), 5, "deletes leave no row");
    let ids = column(&batch, "_olake_id").as_string::<i32>();
    assert_eq!(ids.value(0), moved, "the row of code a has the moved key");
    assert_eq!(
        ids.value(1),
        deleted_b,
        "the row of code b has the deleted key"
    );
}

#[test]
fn soft_deletes_keep_the_deletes_before_as_the_row_marked_d() {
    let payload = [
        ("id".to_owned(), ColumnType::Long),
        ("name".to_owned(), ColumnType::String),
        ("__deleted".to_owned(), ColumnType::String),
    ];
    let columns = TableColumns::for_new_table(&payload).unwrap();
    let mut options = DecoderOptions::append(0);
    options.id_mode = IdMode::Upsert {
        key_columns: vec![ALL_KEY_FIELDS.to_owned()],
    };
    options.change_events = ChangeEvents::Debezium;
    options.soft_deletes = true;
    let mut d = BatchDecoder::new(&columns.with_change_columns().unwrap(), options).unwrap();
    assert!(d.keeps_deleted_rows());
    let row = json!({"id": 1, "name": "ann"});
    let key = r#"{"id":1}"#;
    d.append(&record(
        0,
        key,
        Some(&change("c", json!(null), row.clone())),
    ))
    .unwrap();
    d.append(&record(
        1,
        key,
        Some(&change("d", row.clone(), json!(null))),
    ))
    .unwrap();
    // A flattened record of a delete (`rewrite` mode) is itself the row.
    let flat = json!({"id": 1, "name": "ann", "__deleted": "true"}).to_string();
    d.append(&record(2, key, Some(&flat))).unwrap();
    let e = d
        .append(&record(
            3,
            key,
            Some(&change("d", json!(null), json!(null))),
        ))
        .unwrap_err();
    assert!(e.to_string().contains("REPLICA IDENTITY FULL"), "{e}");
    let e = d.append(&record(4, key, None)).unwrap_err();
    assert_eq!(e.kind, DecodeErrorKind::Tombstone, "the chunk passes it");
    let b = d.finish();
    let ops: Vec<_> = column(&b, "_cdc_op").as_string::<i32>().iter().collect();
    assert_eq!(ops, [Some("c"), Some("d"), Some("d")]);
    let names: Vec<_> = column(&b, "name").as_string::<i32>().iter().collect();
    assert_eq!(names, [Some("ann"); 3], "the deleted row keeps its values");
}

#[test]
fn in_append_mode_every_event_is_a_row_deletes_and_truncates_included() {
    let payload = [
        ("id".to_owned(), ColumnType::Long),
        ("name".to_owned(), ColumnType::String),
    ];
    let columns = TableColumns::for_new_table(&payload).unwrap();
    for truncates_as_rows in [true, false] {
        let mut options = DecoderOptions::append(0);
        options.change_events = ChangeEvents::Debezium;
        options.events_as_rows = true;
        options.truncates_as_rows = truncates_as_rows;
        let mut d = BatchDecoder::new(&columns.with_change_columns().unwrap(), options).unwrap();
        let row = json!({"id": 1, "name": "ann"});
        let append = |d: &mut BatchDecoder, offset, value: &str| {
            d.append(&record(offset, r#"{"id":1}"#, Some(value)))
        };
        append(&mut d, 0, &change("c", json!(null), row.clone())).unwrap();
        append(&mut d, 1, &change("d", row.clone(), json!(null))).unwrap();
        let e = d.append(&record(2, r#"{"id":1}"#, None)).unwrap_err();
        assert_eq!(e.kind, DecodeErrorKind::Tombstone, "passed by the chunk");
        let truncate = change("t", json!(null), json!(null));
        match append(&mut d, 3, &truncate) {
            Ok(()) => assert!(truncates_as_rows),
            Err(e) => {
                assert!(!truncates_as_rows);
                assert_eq!(e.kind, DecodeErrorKind::Truncate);
            }
        }
        let b = d.finish();
        let ops: Vec<_> = column(&b, "_cdc_op").as_string::<i32>().iter().collect();
        let names: Vec<_> = column(&b, "name").as_string::<i32>().iter().collect();
        if truncates_as_rows {
            assert_eq!(ops, [Some("c"), Some("d"), Some("t")]);
            assert_eq!(names, [Some("ann"), Some("ann"), None]);
        } else {
            assert_eq!(ops, [Some("c"), Some("d")]);
        }
    }
}

#[test]
fn a_null_payload_with_its_schema_is_a_tombstone() {
    // Kafka Connect's JSON converter writes a null value that has a
    // schema as `{"schema": .., "payload": null}`.
    let schema = json!({"type": "struct", "optional": true, "fields": []});
    let value = json!({"schema": schema, "payload": null}).to_string();
    let mut d = lsn_decoder(&[("id".to_owned(), ColumnType::Long)]);
    let e = d
        .append(&record(0, r#"{"id":1}"#, Some(&value)))
        .unwrap_err();
    assert_eq!(e.kind, DecodeErrorKind::Tombstone);
    assert!(matches!(super::change_columns(value.as_bytes()), Ok(None)));
    // A flattened row with columns named `schema` and `payload` is a row.
    let row = json!({"id": 1, "schema": "public", "payload": null}).to_string();
    let e = d.append(&record(1, r#"{"id":1}"#, Some(&row))).unwrap_err();
    assert!(matches!(e.kind, DecodeErrorKind::UnknownFields(_)), "{e}");
}

#[test]
fn the_old_key_of_a_moved_row_takes_the_fields_a_transform_added_to_the_message_key() {
    let old = |key: &str, header: &str| {
        String::from_utf8(super::old_key(Some(key.as_bytes()), header.as_bytes())).unwrap()
    };
    // ByLogicalTableRouter's field is the message key's; the id the header's.
    let merged: serde_json::Value = serde_json::from_str(&old(
        r#"{"id":2,"__dbz__physicalTableIdentifier":"p.public.a"}"#,
        r#"{"id":1}"#,
    ))
    .unwrap();
    assert_eq!(
        merged,
        json!({"id": 1, "__dbz__physicalTableIdentifier": "p.public.a"})
    );
    // A key with its Connect schema is read inside its payload.
    let merged: serde_json::Value = serde_json::from_str(&old(
        r#"{"schema":{"type":"struct"},"payload":{"id":2,"t":"x"}}"#,
        r#"{"id":1}"#,
    ))
    .unwrap();
    assert_eq!(merged, json!({"id": 1, "t": "x"}));
    // The same fields: the header as it is; keys that are not objects too.
    assert_eq!(old(r#"{"id":2}"#, r#"{"id":1}"#), r#"{"id":1}"#);
    assert_eq!(old("7", r#"{"id":1}"#), r#"{"id":1}"#);
}

#[test]
fn a_mysql_events_binlog_position_orders_as_the_log_does() {
    let pos = |file: &str, pos: i64, row: Option<i64>| super::binlog_position(file, pos, row);
    let order = [
        pos("mysql-bin.000003", 4_015, Some(0)),
        pos("mysql-bin.000003", 4_015, Some(1)),
        pos("mysql-bin.000003", 9_000, Some(0)),
        pos("mysql-bin.000004", 4, None),
        pos("binlog.999999", 4_294_967_295, Some(2_047)),
    ];
    assert!(order.iter().all(Option::is_some), "{order:?}");
    assert!(order.windows(2).all(|w| w[0] < w[1]), "{order:?}");
    // A part that does not fit, or a file without a number: no position.
    assert_eq!(pos("mysql-bin.000003", 1 << 32, None), None);
    assert_eq!(pos("mysql-bin.000003", 5, Some(2_048)), None);
    assert_eq!(pos("mysql-bin.1048576", 5, None), None);
    assert_eq!(pos("mysql-bin", 5, None), None);
    // From an event: the envelope's source.
    let schema = envelope_schema(&[]);
    let mut d = lsn_decoder(&typed_columns(&event(Some(&schema), "c", row())));
    let mut v: serde_json::Value = serde_json::from_str(&event(Some(&schema), "u", row())).unwrap();
    v["payload"]["source"] = json!({"connector": "mysql", "file": "mysql-bin.000003", "pos": 4_015, "row": 1, "ts_ms": 1});
    d.append(&record(0, r#"{"id":1}"#, Some(&v.to_string())))
        .unwrap();
    assert_eq!(d.change_lsn(), pos("mysql-bin.000003", 4_015, Some(1)));
}
