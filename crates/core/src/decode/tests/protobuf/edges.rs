//! Protobuf edges: map keys and absent entry parts, failures inside nested
//! values, mutated bodies, dedup keys read from Protobuf message keys.

use super::*;

#[test]
fn map_keys_keep_their_type_and_absent_entry_parts_read_defaults() {
    const MAPS: &str = r#"syntax = "proto3";
        message Line { string sku = 1; optional int32 count = 2; }
        message Stock { map<int32, Line> lines = 1; map<bool, string> flags = 2;
                        map<uint64, google.protobuf.Timestamp> seen = 3; }
        import "google/protobuf/timestamp.proto";"#;
    let registry = registry(&[(6, MAPS, vec![])]);
    let pool = pool(MAPS, &[]);
    let line = Value::Message(message(
        &pool,
        "Line",
        vec![("sku", Value::String("K".into()))],
    ));
    let stock = message(
        &pool,
        "Stock",
        vec![
            (
                "lines",
                Value::Map(HashMap::from([(MapKey::I32(-2), line)])),
            ),
            (
                "flags",
                Value::Map(HashMap::from([(
                    MapKey::Bool(true),
                    Value::String("on".into()),
                )])),
            ),
        ],
    )
    .encode_to_vec();
    // An entry of `lines` with neither key nor value, and one of `seen`
    // with its key only.
    let body = [stock, vec![0x0a, 0x00, 0x1a, 0x02, 0x08, 0x05]].concat();
    let value = framed(6, &[1], &body);
    let columns = columns_asked(&registry, &value);
    assert_eq!(
        column_types(&columns),
        [
            "lines map<int, struct<sku: string, count: int>>",
            "flags map<boolean, string>",
            "seen map<decimal(20,0), timestamptz>"
        ]
    );
    let mut d = framed_decoder(&columns, registry);
    d.append(&bytes_record(1, &value)).unwrap();
    let batch = d.finish();
    let lines = batch.column_by_name("lines").unwrap().as_map().clone();
    let keys = lines.keys().as_primitive::<Int32Type>().clone();
    assert_eq!(keys.values(), &[-2, 0]);
    let values = lines.values().as_struct();
    let skus = values.column(0).as_string::<i32>().clone();
    assert_eq!(skus.iter().collect::<Vec<_>>(), [Some("K"), Some("")]);
    assert_eq!(values.column(1).null_count(), 2);
    let flags = batch.column_by_name("flags").unwrap().as_map().clone();
    assert!(flags.keys().as_boolean().value(0));
    let seen = batch.column_by_name("seen").unwrap().as_map().clone();
    assert_eq!(seen.keys().as_primitive::<Decimal128Type>().value(0), 5);
    let at = seen
        .values()
        .as_primitive::<TimestampMicrosecondType>()
        .clone();
    assert_eq!((at.value(0), at.is_null(0)), (0, false));
}

proptest::proptest! {
    /// Truncated, flipped and inserted bytes of a valid message: never a
    /// panic, and a refused message leaves the batch as it was.
    #[test]
    fn mutated_protobuf_bodies_never_panic_or_leave_partial_rows(
        cut in 5usize..400,
        flips in proptest::collection::vec((5usize..400, proptest::prelude::any::<u8>()), 0..4),
        insert in proptest::option::of((5usize..400, proptest::prelude::any::<u8>())),
    ) {
        let registry = registry(&[(3, ORDER_V1, vec![])]);
        let pool = pool(ORDER_V1, &[]);
        let good = framed(3, &[0], &full_order(&pool, 1));
        let columns = columns_asked(&registry, &good);
        let mut d = framed_decoder(&columns, registry);
        d.append(&bytes_record(1, &good)).unwrap();
        let mut bad = good.clone();
        for (at, byte) in flips {
            if let Some(b) = bad.get_mut(at) {
                *b ^= byte;
            }
        }
        if let Some((at, byte)) = insert {
            bad.insert(at.min(bad.len()), byte);
        }
        bad.truncate(cut.max(5));
        let appended = d.append(&bytes_record(2, &bad)).is_ok();
        let batch = d.finish();
        let rows = if appended { 2 } else { 1 };
        proptest::prop_assert_eq!(batch.num_rows(), rows);
        for c in batch.columns() {
            proptest::prop_assert_eq!(c.len(), rows);
        }
    }
}

#[test]
fn a_failure_inside_a_nested_value_leaves_no_part_of_it_behind() {
    let registry = registry(&[(3, ORDER_V1, vec![])]);
    let pool = pool(ORDER_V1, &[]);
    let good = framed(3, &[0], &full_order(&pool, 1));
    let columns = columns_asked(&registry, &good);
    let mut d = framed_decoder(&columns, registry);
    // ship_to (7) whose city is read before its zip fails (not UTF-8);
    // then lines (15) whose first element is read before the second fails.
    let bad_struct = [0x3a, 0x06, 0x0a, 0x01, b'X', 0x12, 0x01, 0xff];
    let bad_list = [0x7a, 0x03, 0x0a, 0x01, b'A', 0x7a, 0x03, 0x0a, 0x01, 0xff];
    for (offset, bad) in [(1, &bad_struct[..]), (2, &bad_list[..])] {
        let e = d
            .append(&bytes_record(offset, &framed(3, &[0], bad)))
            .unwrap_err();
        assert!(matches!(e.kind, DecodeErrorKind::BadBody { .. }), "{e}");
    }
    d.append(&bytes_record(3, &good)).unwrap();
    let batch = d.finish();
    let ship_to = batch.column_by_name("ship_to").unwrap().as_struct().clone();
    assert_eq!(ship_to.column(0).as_string::<i32>().value(0), "Oslo");
    let lines = batch
        .column_by_name("lines")
        .unwrap()
        .as_list::<i32>()
        .clone();
    assert_eq!(lines.value(0).len(), 1);
    let sku = lines
        .value(0)
        .as_struct()
        .column(0)
        .as_string::<i32>()
        .value(0)
        .to_owned();
    assert_eq!(sku, "K-1");
}

#[test]
fn a_dedup_key_field_of_a_protobuf_message_key_hashes_like_its_column() {
    const KEY: &str = r#"syntax = "proto3";
        message OrderKey { string region = 1; int64 id = 2; optional int64 shard = 3; }"#;
    let schemas = registry(&[(3, ORDER_V1, vec![]), (4, KEY, vec![])]);
    let pool_v = pool(ORDER_V1, &[]);
    let value = framed(3, &[0], &full_order(&pool_v, 1));
    let columns = columns_asked(&schemas, &value);
    let mut options = DecoderOptions::append(WRITTEN);
    options.registry = Some(schemas);
    options.id_mode = IdMode::Upsert {
        key_columns: vec!["_kafka_key.id".into(), "_kafka_key.region".into()],
    };
    let mut d = BatchDecoder::new(&columns, options).unwrap();
    let pool_k = pool(KEY, &[]);
    let key = |fields| {
        framed(
            4,
            &[0],
            &message(&pool_k, "OrderKey", fields).encode_to_vec(),
        )
    };
    let full = key(vec![
        ("region", Value::String("eu".into())),
        ("id", Value::I64(42)),
    ]);
    // proto3 scalars without presence read their default: region "".
    let no_region = key(vec![("id", Value::I64(42))]);
    for k in [&full, &no_region] {
        let mut r = bytes_record(1, &value);
        r.key = Some(k);
        d.append(&r).unwrap();
    }
    let batch = d.finish();
    let ids = batch
        .column_by_name("_olake_id")
        .unwrap()
        .as_string::<i32>()
        .clone();
    let id = |region| upsert_olake_id(&[KeyValue::Long(42), KeyValue::String(region)]);
    assert_eq!(ids.value(0), id("eu"));
    assert_eq!(ids.value(1), id(""));

    // A field with presence that is absent is a null key.
    let options = |keys: &[&str]| {
        let mut o = DecoderOptions::append(WRITTEN);
        o.registry = Some(registry(&[(3, ORDER_V1, vec![]), (4, KEY, vec![])]));
        o.id_mode = IdMode::Upsert {
            key_columns: keys.iter().map(|k| k.to_string()).collect(),
        };
        o
    };
    let mut d = BatchDecoder::new(&columns, options(&["_kafka_key.shard"])).unwrap();
    let mut r = bytes_record(2, &value);
    r.key = Some(&full);
    let e = d.append(&r).unwrap_err();
    assert_eq!(e.kind, DecodeErrorKind::NullKey);
    assert_eq!(e.field.as_deref(), Some("_kafka_key.shard"));

    let mut d = BatchDecoder::new(&columns, options(&["_kafka_key.nope"])).unwrap();
    let e = d.append(&r).unwrap_err();
    assert!(e.to_string().contains("has no field \"nope\""), "{e}");
    let truncated = &full[..full.len() - 1];
    let mut d = BatchDecoder::new(&columns, options(&["_kafka_key.id"])).unwrap();
    r.key = Some(truncated);
    let e = d.append(&r).unwrap_err();
    assert!(
        matches!(e.kind, DecodeErrorKind::BadBody { schema_id: 4, .. }),
        "{e}"
    );
    assert_eq!(d.len(), 0);
}

#[test]
fn fields_of_a_protobuf_schema_are_its_first_message_columns() {
    let registry = registry(&[(3, ORDER_V1, vec![])]);
    let fields = registry.fields_of(3).unwrap().unwrap();
    let pool = pool(ORDER_V1, &[]);
    let columns = columns_asked(&registry, &framed(3, &[0], &full_order(&pool, 1)));
    let fields: Vec<_> = fields.iter().map(|(n, t)| format!("{n} {t}")).collect();
    assert_eq!(fields, column_types(&columns));
}
