use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, Int32Type, Int64Type, TimestampMicrosecondType};
use arrow_array::{Array, RecordBatch};

use super::*;
use crate::columns::{Column, ColumnType};
use crate::olake_id::{append_olake_id, kafka_key_olake_id, upsert_olake_id, KeyValue};
use crate::record::{wire_headers, Headers};

mod avro;
mod batch;
mod fuzz;
mod protobuf;

const T0: i64 = 1_793_287_324_000_000; // 2026-10-29T15:22:04Z
const WRITTEN: i64 = 1_800_000_000_000_000;

const ORDER: &str = r#"{"id":1,"customer_id":6,"product":"Keyboard","amount":99.19,"status":"shipped","created_at":"2026-10-29T15:22:04+00:00","updated_at":"2026-10-29T15:22:04+00:00"}"#;

fn table(payload: &[(&str, ColumnType)]) -> TableColumns {
    let payload: Vec<_> = payload
        .iter()
        .map(|(n, t)| (n.to_string(), t.clone()))
        .collect();
    TableColumns::for_new_table(&payload).unwrap()
}

fn orders() -> TableColumns {
    use ColumnType::*;
    table(&[
        ("id", Long),
        ("customer_id", Long),
        ("product", String),
        ("amount", Double),
        ("status", String),
        ("created_at", TimestampTz),
        ("updated_at", TimestampTz),
    ])
}

fn decoder(columns: &TableColumns) -> BatchDecoder {
    BatchDecoder::new(columns, DecoderOptions::append(WRITTEN)).unwrap()
}

fn record(offset: i64, value: &str) -> SourceRecord<'_> {
    SourceRecord {
        topic: "orders",
        partition: 2,
        offset,
        timestamp_ms: Some(T0 / 1000),
        key: Some(b"3"),
        value: Some(value.as_bytes()),
        headers: Default::default(),
    }
}

/// Decodes `values` into a one-column table of type `ty` (field `v`).
fn one(ty: ColumnType, values: &[&str]) -> Result<RecordBatch, DecodeError> {
    let mut d = decoder(&table(&[("v", ty)]));
    for (i, v) in values.iter().enumerate() {
        d.append(&record(i as i64, v))?;
    }
    Ok(d.finish())
}

fn err(ty: ColumnType, value: &str) -> DecodeError {
    let mut d = decoder(&table(&[("v", ty)]));
    let e = d.append(&record(1234, value)).unwrap_err();
    assert_eq!(d.len(), 0);
    e
}

fn strings(batch: &RecordBatch, name: &str) -> Vec<Option<String>> {
    let a = batch.column_by_name(name).unwrap().as_string::<i32>();
    a.iter().map(|v| v.map(str::to_owned)).collect()
}

fn longs(batch: &RecordBatch, name: &str) -> Vec<Option<i64>> {
    let a = batch.column_by_name(name).unwrap();
    match a.data_type() {
        arrow_schema::DataType::Timestamp(..) => a
            .as_primitive::<TimestampMicrosecondType>()
            .iter()
            .collect(),
        _ => a.as_primitive::<Int64Type>().iter().collect(),
    }
}

#[test]
fn seed_order_decodes_to_long_string_double_timestamptz() {
    let mut d = decoder(&orders());
    d.append(&record(1234, ORDER)).unwrap();
    assert_eq!(d.len(), 1);
    let b = d.finish();
    assert_eq!(b.num_rows(), 1);
    assert_eq!(b.schema(), Arc::new(orders().arrow_schema()));
    assert_eq!(longs(&b, "id"), [Some(1)]);
    assert_eq!(longs(&b, "customer_id"), [Some(6)]);
    assert_eq!(strings(&b, "product"), [Some("Keyboard".into())]);
    let amount = b
        .column_by_name("amount")
        .unwrap()
        .as_primitive::<Float64Type>();
    assert_eq!(amount.value(0), 99.19);
    assert_eq!(longs(&b, "created_at"), [Some(T0)]);
    assert_eq!(longs(&b, "updated_at"), [Some(T0)]);
}

#[test]
fn metadata_columns() {
    let mut d = decoder(&orders());
    d.append(&record(1234, ORDER)).unwrap();
    let no_key = SourceRecord {
        key: None,
        timestamp_ms: None,
        ..record(1235, ORDER)
    };
    d.append(&no_key).unwrap();
    let b = d.finish();
    assert_eq!(strings(&b, "_kafka_key"), [Some("Mw==".into()), None]);
    let partition = b.column_by_name("_kafka_partition").unwrap();
    let partition: Vec<_> = partition.as_primitive::<Int32Type>().iter().collect();
    assert_eq!(partition, [Some(2), Some(2)]);
    assert_eq!(longs(&b, "_kafka_offset"), [Some(1234), Some(1235)]);
    assert_eq!(longs(&b, "_kafka_timestamp"), [Some(T0), None]);
    assert_eq!(longs(&b, "_cdc_timestamp"), [Some(T0), None]);
    assert_eq!(
        longs(&b, "_olake_timestamp"),
        [Some(WRITTEN), Some(WRITTEN)]
    );
    assert_eq!(
        strings(&b, "_op_type"),
        [Some("c".into()), Some("c".into())]
    );
    assert_eq!(
        strings(&b, "_olake_id"),
        [
            Some(append_olake_id("orders", 2, 1234)),
            Some(append_olake_id("orders", 2, 1235))
        ]
    );
    assert_eq!(
        strings(&b, "_olake_id")[0].as_deref(),
        Some("3f90d9d99d2d701856ca5888fc6b9169")
    );
}

/// The append-mode id keeps the topic's bytes from the previous record:
/// another topic of the same length, another partition, or an offset
/// that changes in its high bytes must each give the id of its own place.
#[test]
fn append_ids_follow_each_record_place_in_one_decoder() {
    let mut d = decoder(&orders());
    let places = [
        ("orders", 2, 1234),
        ("orders", 2, 1235),
        ("ordres", 2, 1235),
        ("ordres", -1, 1 << 40),
        ("orders", 0, 0),
        ("o", 0, 0),
    ];
    for (topic, partition, offset) in places {
        let r = SourceRecord {
            topic,
            partition,
            offset,
            ..record(0, ORDER)
        };
        d.append(&r).unwrap();
    }
    let expected: Vec<_> = places
        .iter()
        .map(|&(t, p, o)| Some(append_olake_id(t, p, o)))
        .collect();
    assert_eq!(strings(&d.finish(), "_olake_id"), expected);
}

#[test]
fn base64_keys() {
    let mut d = decoder(&table(&[]));
    for key in [&b""[..], b"3", b"42", b"abc", &[0, 255, 254, 1]] {
        d.append(&SourceRecord {
            key: Some(key),
            ..record(0, "{}")
        })
        .unwrap();
    }
    let b = d.finish();
    let expected = ["", "Mw==", "NDI=", "YWJj", "AP/+AQ=="];
    assert_eq!(
        strings(&b, "_kafka_key"),
        expected.map(|s| Some(s.to_owned()))
    );
}

#[test]
fn long_rules() {
    let b = one(
        ColumnType::Long,
        &[
            r#"{"v":-9223372036854775808}"#,
            r#"{"v":9223372036854775807}"#,
            r#"{"v":null}"#,
            "{}",
        ],
    )
    .unwrap();
    assert_eq!(longs(&b, "v"), [Some(i64::MIN), Some(i64::MAX), None, None]);
    let e = err(ColumnType::Long, r#"{"v":9223372036854775808}"#);
    assert_eq!(
        e.to_string(),
        r#"orders[2]@1234: field "v": expected long, found integer 9223372036854775808, which is out of range"#
    );
    for (value, found) in [
        (r#"{"v":1.5}"#, "number 1.5"),
        (r#"{"v":1.0}"#, "number 1.0"),
        (r#"{"v":1e3}"#, "number 1000.0"),
        (r#"{"v":"1"}"#, r#"string "1""#),
        (r#"{"v":true}"#, "boolean true"),
        (r#"{"v":{"a":1}}"#, "object"),
        (r#"{"v":[1]}"#, "array"),
    ] {
        let e = err(ColumnType::Long, value);
        assert_eq!(e.expected(), Some(ColumnType::Long), "{value}");
        assert_eq!(e.found(), Some(found), "{value}");
        assert_eq!(e.field.as_deref(), Some("v"));
    }
}

#[test]
fn int_rules() {
    let b = one(
        ColumnType::Int,
        &[
            r#"{"v":-2147483648}"#,
            r#"{"v":2147483647}"#,
            r#"{"v":null}"#,
        ],
    )
    .unwrap();
    let v: Vec<_> = b.column(0).as_primitive::<Int32Type>().iter().collect();
    assert_eq!(v, [Some(i32::MIN), Some(i32::MAX), None]);
    for value in [
        r#"{"v":2147483648}"#,
        r#"{"v":-2147483649}"#,
        r#"{"v":18446744073709551615}"#,
    ] {
        assert!(matches!(
            err(ColumnType::Int, value).kind,
            DecodeErrorKind::OutOfRange { .. }
        ));
    }
    assert!(matches!(
        err(ColumnType::Int, r#"{"v":"7"}"#).kind,
        DecodeErrorKind::TypeMismatch { .. }
    ));
}

#[test]
fn float_rules_round_within_range_and_refuse_beyond_it() {
    let b = one(
        ColumnType::Float,
        &[
            r#"{"v":1.5}"#,
            r#"{"v":7}"#,
            r#"{"v":0.1}"#,
            r#"{"v":null}"#,
        ],
    )
    .unwrap();
    let v: Vec<_> = b
        .column(0)
        .as_primitive::<arrow_array::types::Float32Type>()
        .iter()
        .collect();
    assert_eq!(v, [Some(1.5f32), Some(7.0), Some(0.1f32), None]);
    let e = err(ColumnType::Float, r#"{"v":1e300}"#);
    assert!(
        matches!(
            e.kind,
            DecodeErrorKind::OutOfRange {
                expected: ColumnType::Float,
                ..
            }
        ),
        "{e}"
    );
    assert!(matches!(
        err(ColumnType::Float, r#"{"v":"1.5"}"#).kind,
        DecodeErrorKind::TypeMismatch { .. }
    ));
}

/// Rules a faster parser broke (sonic-rs 0.5.10, issue 19): a negative
/// zero keeps its sign, and a `\u` escape that is not four hex digits makes
/// the message not JSON, also in a value only captured or skipped.
#[test]
fn negative_zero_and_bad_escapes_in_skipped_values() {
    let b = one(
        ColumnType::Double,
        &[r#"{"v":-0}"#, r#"{"v":-0.0}"#, r#"{"v":-0e5}"#],
    )
    .unwrap();
    let v = b.column(0).as_primitive::<Float64Type>();
    assert!(v.values().iter().all(|v| *v == 0.0 && v.is_sign_negative()));
    let bad = [r#"{"v":"\uzzzz"}"#, r#"{"v":["\ud83c\udeud804"]}"#];
    for value in bad {
        // A `json` column keeps the value as its text.
        let err = one(ColumnType::Json, &[value]).unwrap_err();
        assert!(
            matches!(err.kind, DecodeErrorKind::NotJson { .. }),
            "{value}: {err}"
        );
        // An unknown field (its type inferred) and an ignored one (not in
        // the stream's `columns`).
        let message = value.replace(r#"{"v""#, r#"{"v":1,"w""#);
        let mut d = decoder(&table(&[("v", ColumnType::Long)]));
        let err = d.append(&record(0, &message)).unwrap_err();
        assert!(
            matches!(err.kind, DecodeErrorKind::NotJson { .. }),
            "{message}: {err}"
        );
        let mut options = DecoderOptions::append(WRITTEN);
        options.payload_fields = Some(std::sync::Arc::new(["v".to_owned()].into()));
        let mut d = BatchDecoder::new(&table(&[("v", ColumnType::Long)]), options).unwrap();
        let err = d.append(&record(0, &message)).unwrap_err();
        assert!(
            matches!(err.kind, DecodeErrorKind::NotJson { .. }),
            "{message}: {err}"
        );
        assert_eq!(d.len(), 0);
    }
}

#[test]
fn double_rules_and_exact_round_trip() {
    let b = one(
        ColumnType::Double,
        &[
            r#"{"v":1}"#,
            r#"{"v":-2.5e-3}"#,
            r#"{"v":9007199254740992}"#,
            r#"{"v":18446744073709551616}"#,
            r#"{"v":null}"#,
        ],
    )
    .unwrap();
    let v: Vec<_> = b.column(0).as_primitive::<Float64Type>().iter().collect();
    assert_eq!(
        v,
        [
            Some(1.0),
            Some(-0.0025),
            Some(9007199254740992.0),
            Some(18446744073709551616.0),
            None
        ]
    );
    // Integers a double cannot hold exactly are refused, never rounded.
    for v in [
        "9007199254740993",
        "-9007199254740993",
        "18446744073709551615",
    ] {
        let e = err(ColumnType::Double, &format!(r#"{{"v":{v}}}"#));
        assert_eq!(
            e.kind,
            DecodeErrorKind::OutOfRange {
                expected: ColumnType::Double,
                found: format!("integer {v}")
            }
        );
    }
    assert_eq!(
        err(ColumnType::Long, r#"{"v":9223372036854775808}"#).to_string(),
        r#"orders[2]@1234: field "v": expected long, found integer 9223372036854775808, which is out of range"#
    );
    assert_eq!(
        err(ColumnType::Double, r#"{"v":"abc"}"#).found(),
        Some(r#"string "abc""#)
    );
    // Every double printed in its shortest form must read back bit for bit.
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut values = Vec::new();
    for i in 0..2000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let f = match i % 3 {
            0 => f64::from_bits(x & !(0x7ff << 52) | (((x >> 52) % 2046 + 1) << 52)),
            1 => (x % 100_000_000) as f64 / 100.0,
            _ => (x % 1_000_000) as f64 / 1000.0 + 0.1,
        };
        values.push(f);
    }
    let texts: Vec<_> = values.iter().map(|f| format!(r#"{{"v":{f:?}}}"#)).collect();
    let refs: Vec<_> = texts.iter().map(String::as_str).collect();
    let b = one(ColumnType::Double, &refs).unwrap();
    let col = b.column(0).as_primitive::<Float64Type>();
    for (i, f) in values.iter().enumerate() {
        assert_eq!(col.value(i).to_bits(), f.to_bits(), "{}", texts[i]);
    }
}

#[test]
fn boolean_rules() {
    let b = one(
        ColumnType::Boolean,
        &[r#"{"v":true}"#, r#"{"v":false}"#, r#"{"v":null}"#],
    )
    .unwrap();
    let v: Vec<_> = b.column(0).as_boolean().iter().collect();
    assert_eq!(v, [Some(true), Some(false), None]);
    assert_eq!(
        err(ColumnType::Boolean, r#"{"v":1}"#).found(),
        Some("integer 1")
    );
    assert_eq!(
        err(ColumnType::Boolean, r#"{"v":"true"}"#).found(),
        Some(r#"string "true""#)
    );
}

#[test]
fn timestamp_rules() {
    let b = one(
        ColumnType::TimestampTz,
        &[
            r#"{"v":"2026-10-29T15:22:04+00:00"}"#,
            r#"{"v":"2026-10-29 16:22:04.5+01:00"}"#,
            r#"{"v":null}"#,
        ],
    )
    .unwrap();
    assert_eq!(longs(&b, "v"), [Some(T0), Some(T0 + 500_000), None]);
    let e = err(ColumnType::TimestampTz, r#"{"v":"tomorrow"}"#);
    assert_eq!(
        e.to_string(),
        r#"orders[2]@1234: field "v": expected timestamptz, found string "tomorrow""#
    );
    assert_eq!(
        err(ColumnType::TimestampTz, r#"{"v":1793287324}"#).found(),
        Some("integer 1793287324")
    );
}

#[test]
fn string_rules_unicode_and_escapes() {
    let b = one(
        ColumnType::String,
        &[
            r#"{"v":"São Paulo"}"#,
            r#"{"v":"Chen Wei 陈伟 😀"}"#,
            r#"{"v":"line\nbreak \"quoted\" back\\slash tab\t"}"#,
            r#"{"v":"\u00e9\u4e2d\ud83d\ude00\u0000"}"#,
            r#"{"v":""}"#,
            r#"{"v":null}"#,
        ],
    )
    .unwrap();
    assert_eq!(
        strings(&b, "v"),
        [
            Some("São Paulo".into()),
            Some("Chen Wei 陈伟 😀".into()),
            Some("line\nbreak \"quoted\" back\\slash tab\t".into()),
            Some("é中😀\0".into()),
            Some(String::new()),
            None
        ]
    );
    assert_eq!(
        err(ColumnType::String, r#"{"v":12}"#).found(),
        Some("integer 12")
    );
    let long = format!(r#"{{"v":{}}}"#, "9".repeat(3));
    assert_eq!(err(ColumnType::String, &long).found(), Some("integer 999"));
    let e = err(
        ColumnType::Long,
        &format!(r#"{{"v":"{}"}}"#, "é".repeat(50)),
    );
    assert_eq!(
        e.found(),
        Some(format!("string {:?}...", "é".repeat(40)).as_str())
    );
}

#[test]
fn json_keeps_each_value_as_its_text() {
    let b = one(
        ColumnType::Json,
        &[
            r#"{"v":{"a":[1,2,{"b":null}],"c":"\u00e9"}}"#,
            r#"{"v": [ 1 , "x" ] }"#,
            r#"{"v":"plain"}"#,
            r#"{"v":12.50}"#,
            r#"{"v":true}"#,
            r#"{"v":null}"#,
            "{}",
        ],
    )
    .unwrap();
    assert_eq!(
        strings(&b, "v"),
        [
            Some(r#"{"a":[1,2,{"b":null}],"c":"\u00e9"}"#.into()),
            Some(r#"[ 1 , "x" ]"#.into()),
            Some(r#""plain""#.into()),
            Some("12.50".into()),
            Some("true".into()),
            None,
            None
        ]
    );
}

#[test]
fn missing_fields_are_null_and_order_does_not_matter() {
    let mut d = decoder(&orders());
    d.append(&record(0, r#"{"amount":5,"id":9}"#)).unwrap();
    d.append(&record(1, r#"{"status":"placed","id":10,"product":null}"#))
        .unwrap();
    d.append(&record(2, ORDER)).unwrap();
    let b = d.finish();
    assert_eq!(longs(&b, "id"), [Some(9), Some(10), Some(1)]);
    assert_eq!(
        strings(&b, "status"),
        [None, Some("placed".into()), Some("shipped".into())]
    );
    assert_eq!(
        strings(&b, "product"),
        [None, None, Some("Keyboard".into())]
    );
    let amount: Vec<_> = b
        .column_by_name("amount")
        .unwrap()
        .as_primitive::<Float64Type>()
        .iter()
        .collect();
    assert_eq!(amount, [Some(5.0), None, Some(99.19)]);
}

#[test]
fn duplicate_keys_last_wins() {
    let mut d = decoder(&orders());
    d.append(&record(
        0,
        r#"{"id":1,"product":"a","id":2,"product":"bb"}"#,
    ))
    .unwrap();
    d.append(&record(
        1,
        r#"{"id":3,"id":null,"product":null,"product":"c"}"#,
    ))
    .unwrap();
    let b = d.finish();
    assert_eq!(longs(&b, "id"), [Some(2), None]);
    assert_eq!(
        strings(&b, "product"),
        [Some("bb".into()), Some("c".into())]
    );
}

#[test]
fn the_error_message_names_topic_partition_offset_and_field() {
    let mut d = decoder(&orders());
    let e = d
        .append(&record(1234, r#"{"id":1,"amount":"abc"}"#))
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        r#"orders[2]@1234: field "amount": expected double, found string "abc""#
    );
    assert_eq!(
        (e.topic.as_str(), e.partition, e.offset),
        ("orders", 2, 1234)
    );
    assert_eq!(e.field.as_deref(), Some("amount"));
}

#[test]
fn values_that_are_not_objects() {
    let cases = [
        (
            "[1,2]",
            "orders[2]@1234: value is not a JSON object, found array",
        ),
        (
            " \"x\"",
            "orders[2]@1234: value is not a JSON object, found string",
        ),
        (
            "null",
            "orders[2]@1234: value is not a JSON object, found null",
        ),
        (
            "42",
            "orders[2]@1234: value is not a JSON object, found number",
        ),
        (
            "",
            "orders[2]@1234: value is not JSON: EOF while parsing a value at line 1 column 0",
        ),
        (
            "not json",
            "orders[2]@1234: value is not JSON: expected ident at line 1 column 2",
        ),
        (
            r#"{"id":1"#,
            "orders[2]@1234: value is not JSON: EOF while parsing an object at line 1 column 7",
        ),
        (
            r#"{"id":1} {}"#,
            "orders[2]@1234: value is not JSON: trailing characters at line 1 column 10",
        ),
    ];
    for (value, message) in cases {
        let mut d = decoder(&orders());
        assert_eq!(
            d.append(&record(1234, value)).unwrap_err().to_string(),
            message
        );
    }
    let mut d = decoder(&orders());
    let latin1 = SourceRecord {
        value: Some(b"{\"product\":\"caf\xe9\"}"),
        ..record(8, "")
    };
    assert_eq!(
        d.append(&latin1).unwrap_err().to_string(),
        "orders[2]@8: value is not JSON: invalid UTF-8 at byte 15"
    );
    let tombstone = SourceRecord {
        value: None,
        ..record(7, "")
    };
    let e = d.append(&tombstone).unwrap_err();
    assert_eq!(e.kind, DecodeErrorKind::Tombstone);
    assert_eq!(e.to_string(), "orders[2]@7: null value (tombstone)");
    assert!(d.is_empty());
}

/// A decoder of registry-framed values (Avro and Protobuf tests).
fn framed_decoder(columns: &TableColumns, registry: Arc<RegistryValues>) -> BatchDecoder {
    let mut options = DecoderOptions::append(WRITTEN);
    options.registry = Some(registry);
    BatchDecoder::new(columns, options).unwrap()
}

/// A message of `orders` partition 0 at `offset` with `value`, no key.
fn bytes_record(offset: i64, value: &[u8]) -> SourceRecord<'_> {
    SourceRecord {
        topic: "orders",
        partition: 0,
        offset,
        timestamp_ms: Some(T0 / 1000),
        key: None,
        value: Some(value),
        headers: Default::default(),
    }
}

/// The columns a framed decoder asks for on an empty table, added as the
/// sync adds them.
fn columns_asked(registry: &Arc<RegistryValues>, value: &[u8]) -> TableColumns {
    let empty = TableColumns::for_new_table(&[]).unwrap();
    let e = framed_decoder(&empty, registry.clone())
        .append(&bytes_record(0, value))
        .unwrap_err();
    let DecodeErrorKind::UnknownFields(fields) = e.kind else {
        panic!("{e}")
    };
    let added: Vec<_> = fields
        .iter()
        .map(|f| (f.name.clone(), f.column_type()))
        .collect();
    empty.with_added(&added, true).unwrap()
}

#[test]
fn kafka_headers_fill_their_column_in_order_with_repeats_and_nulls() {
    let columns = orders()
        .with_metadata_column(crate::columns::KAFKA_HEADERS, 0)
        .unwrap();
    let mut options = DecoderOptions::append(WRITTEN);
    options.kafka_headers = true;
    let mut d = BatchDecoder::new(&columns, options).unwrap();
    let two = wire_headers(&[
        (b"trace", Some(b"abc")),
        (b"trace", None),
        (b"bin", Some(b"\xff\x00")),
    ]);
    // A good header, then a key that is not UTF-8: the row's partial list
    // goes with it.
    let bad_key = wire_headers(&[(b"ok", Some(b"v")), (b"\xff", Some(b"v"))]);
    let with = |offset, headers| SourceRecord {
        headers,
        ..record(offset, ORDER)
    };
    d.append(&with(0, Headers::Wire(&two))).unwrap();
    d.append(&with(1, Headers::None)).unwrap();
    let e = d.append(&with(2, Headers::Wire(&bad_key))).unwrap_err();
    assert_eq!(e.field.as_deref(), Some("_kafka_headers"));
    assert!(e.to_string().contains("orders[2]@2"), "{e}");
    assert!(e.to_string().contains("not UTF-8"), "{e}");
    let e = d.append(&with(3, Headers::Wire(&two[..5]))).unwrap_err();
    assert!(e.to_string().contains("record format"), "{e}");
    d.append(&with(4, Headers::Wire(&two))).unwrap();
    assert_eq!(d.len(), 3, "a failed message leaves no row");
    let b = d.finish();
    let lists = b.column_by_name("_kafka_headers").unwrap().as_list::<i32>();
    assert_eq!(lists.len(), 3);
    assert_eq!(lists.value_length(1), 0, "no headers: an empty list");
    assert_eq!(
        lists.value(2).to_data(),
        lists.value(0).to_data(),
        "nothing of the failed rows left"
    );
    let first = lists.value(0);
    let headers = first.as_struct();
    let keys = headers.column(0).as_string::<i32>();
    let values = headers.column(1).as_binary::<i64>();
    assert_eq!(
        keys.iter().collect::<Vec<_>>(),
        [Some("trace"), Some("trace"), Some("bin")]
    );
    assert_eq!(
        values.iter().collect::<Vec<_>>(),
        [Some(&b"abc"[..]), None, Some(&b"\xff\x00"[..])]
    );
    // The setting off (the column stays): null, whatever the message has.
    let mut off = decoder(&columns);
    off.append(&with(0, Headers::Wire(&two))).unwrap();
    off.append(&with(1, Headers::Wire(&bad_key))).unwrap();
    assert_eq!(
        off.finish()
            .column_by_name("_kafka_headers")
            .unwrap()
            .null_count(),
        2
    );
}
