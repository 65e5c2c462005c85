//! Batch-level behaviour: rollback, unknown fields, upsert ids, reuse.

use super::*;

#[test]
fn a_failed_record_leaves_the_batch_as_it_was() {
    let good = [
        r#"{"id":1,"product":"Keyboard","amount":1.5,"status":"placed","created_at":"2026-10-29T15:22:04Z"}"#,
        r#"{"id":2,"customer_id":null,"product":"Mouse é","amount":2}"#,
    ];
    let bad = [
        // Fails at the last field, after five columns were appended.
        r#"{"id":7,"customer_id":1,"product":"xxxxxxxx","amount":3.5,"status":"zz","created_at":"nope"}"#,
        r#"{"id":7,"product":"yyyy","amount":3.5,"status":"zz","created_at":"2026-10-29T15:22:04Z"} x"#,
        r#"{"id":7,"product":"yyyy","status":"#,
        r#"{"product":"yyyy","id":7,"id":8,"coupon":"SAVE"}"#,
        r#"{"id":7,"product":"yyyy","amount":1e999}"#,
        "[1]",
    ];
    let mut reference = decoder(&orders());
    for (i, g) in good.iter().enumerate() {
        reference.append(&record(i as i64, g)).unwrap();
    }
    let expected = reference.finish();

    let mut d = decoder(&orders());
    d.append(&record(0, good[0])).unwrap();
    let bytes_before = d.approx_bytes();
    for b in bad {
        assert!(d.append(&record(99, b)).is_err(), "{b}");
        assert_eq!(d.len(), 1);
        assert_eq!(d.approx_bytes(), bytes_before, "{b}");
    }
    d.append(&record(1, good[1])).unwrap();
    assert_eq!(d.finish(), expected);
}

#[test]
fn unknown_fields_rejected_with_their_types_and_nothing_lost() {
    let columns = orders();
    let mut d = decoder(&columns);
    d.append(&record(0, ORDER)).unwrap();
    let value = r#"{"id":5,"coupon":"SAVE10","gift":null,"tags":["a"],"gift":true}"#;
    let e = d.append(&record(41, value)).unwrap_err();
    assert_eq!(
        e.to_string(),
        r#"orders[2]@41: fields "coupon" (string), "gift" (boolean), "tags" (json) are not columns of the table"#
    );
    let DecodeErrorKind::UnknownFields(fields) = &e.kind else {
        panic!("{e:?}")
    };
    assert_eq!(
        fields[0],
        UnknownField {
            name: "coupon".into(),
            ty: Some(ColumnType::String),
            partition: 2,
            offset: 41
        }
    );
    assert_eq!(d.len(), 1);

    // The caller adds the columns and appends the same record again.
    let added: Vec<_> = fields
        .iter()
        .map(|f| (f.name.clone(), f.column_type()))
        .collect();
    let evolved = columns.with_added(&added, true).unwrap();
    let mut d2 = decoder(&evolved);
    d2.append(&record(41, value)).unwrap();
    let b = d2.finish();
    assert_eq!(strings(&b, "coupon"), [Some("SAVE10".into())]);
    assert!(b.column_by_name("gift").unwrap().as_boolean().value(0));
    assert_eq!(strings(&b, "tags"), [Some(r#"["a"]"#.into())]);

    // A field that is only null needs no column: the row lands without it.
    d.append(&record(42, r#"{"id":6,"note":null}"#)).unwrap();
    assert_eq!(d.len(), 2);
}

#[test]
fn fields_outside_the_streams_columns_list_are_ignored_not_unknown() {
    let options = DecoderOptions {
        payload_fields: Some(std::sync::Arc::new(
            ["id", "coupon"].map(String::from).into_iter().collect(),
        )),
        ..DecoderOptions::append(WRITTEN)
    };
    let mut d = BatchDecoder::new(&orders(), options).unwrap();
    // `secret` is not listed: ignored. `coupon` is listed but not a column yet.
    d.append(&record(1, r#"{"id":1,"secret":"x"}"#)).unwrap();
    let e = d
        .append(&record(2, r#"{"id":2,"secret":"x","coupon":"SAVE"}"#))
        .unwrap_err();
    let DecodeErrorKind::UnknownFields(fields) = &e.kind else {
        panic!("{e:?}")
    };
    assert_eq!(fields.len(), 1);
    assert_eq!(fields[0].name, "coupon");
    assert_eq!(d.len(), 1);
}

#[test]
fn unknown_fields_collected() {
    let options = DecoderOptions {
        unknown_fields: UnknownFieldPolicy::Collect,
        ..DecoderOptions::append(WRITTEN)
    };
    let mut d = BatchDecoder::new(&orders(), options).unwrap();
    d.append(&record(10, r#"{"id":1,"extra":null}"#)).unwrap();
    d.append(&record(11, r#"{"id":2,"extra":3,"more":"x"}"#))
        .unwrap();
    d.append(&record(12, r#"{"id":3,"extra":3.5}"#)).unwrap();
    // A failed record adds no new unknown field.
    assert!(d.append(&record(13, r#"{"id":"x","late":1}"#)).is_err());
    assert_eq!(d.len(), 3);
    assert_eq!(
        d.unknown_fields(),
        [
            UnknownField {
                name: "extra".into(),
                ty: Some(ColumnType::Double),
                partition: 2,
                offset: 10
            },
            UnknownField {
                name: "more".into(),
                ty: Some(ColumnType::String),
                partition: 2,
                offset: 11
            },
        ]
    );
    assert_eq!(d.take_unknown_fields().len(), 2);
    assert!(d.unknown_fields().is_empty());
    assert_eq!(longs(&d.finish(), "id"), [Some(1), Some(2), Some(3)]);
}

#[test]
fn fields_named_like_metadata_columns_go_to_their_renamed_columns() {
    // Without a renamed column, the field is new (never dropped).
    let mut d = decoder(&orders());
    let e = d
        .append(&record(5, r#"{"id":1,"_kafka_offset":"fake"}"#))
        .unwrap_err();
    assert_eq!(
        e.kind,
        DecodeErrorKind::UnknownFields(vec![UnknownField {
            name: "_kafka_offset".into(),
            ty: Some(ColumnType::String),
            partition: 2,
            offset: 5
        }])
    );
    let columns = table(&[
        ("id", ColumnType::Long),
        ("_kafka_offset_payload", ColumnType::String),
        ("_olake_id_payload", ColumnType::Json),
        ("ID__2", ColumnType::Long),
    ]);
    let mut d = decoder(&columns);
    for _ in 0..2 {
        d.append(&record(
            5,
            r#"{"id":1,"_kafka_offset":"fake","_olake_id":{"x":1},"ID":7}"#,
        ))
        .unwrap();
    }
    // A field literally named like the renamed column is another field.
    let e = d.append(&record(6, r#"{"id":1,"ID__2":3}"#)).unwrap_err();
    assert!(matches!(e.kind, DecodeErrorKind::UnknownFields(_)), "{e}");
    let b = d.finish();
    assert_eq!(longs(&b, "_kafka_offset"), [Some(5), Some(5)]);
    assert_eq!(
        strings(&b, "_kafka_offset_payload")[0].as_deref(),
        Some("fake")
    );
    assert_eq!(
        strings(&b, "_olake_id_payload")[1].as_deref(),
        Some(r#"{"x":1}"#)
    );
    assert_eq!(longs(&b, "ID__2"), [Some(7), Some(7)]);
    assert_eq!(longs(&b, "id"), [Some(1), Some(1)]);
    assert_eq!(
        strings(&b, "_olake_id")[0],
        Some(append_olake_id("orders", 2, 5))
    );
    // Upsert keys name message fields; `_kafka_key` stays the message key.
    let keyed_table = table(&[
        ("id", ColumnType::Long),
        ("_kafka_key_payload", ColumnType::String),
        ("ID__2", ColumnType::Long),
    ]);
    let keyed = |keys: &[&str]| {
        let mut options = DecoderOptions::append(WRITTEN);
        options.id_mode = IdMode::Upsert {
            key_columns: keys.iter().map(|k| k.to_string()).collect(),
        };
        let mut d = BatchDecoder::new(&keyed_table, options).unwrap();
        d.append(&record(5, r#"{"ID":7,"_kafka_key":"payload key"}"#))
            .unwrap_or_else(|e| panic!("{e}"));
        strings(&d.finish(), "_olake_id")[0].clone()
    };
    assert_eq!(keyed(&["ID"]), Some(upsert_olake_id(&[KeyValue::Long(7)])));
    assert_eq!(keyed(&["_kafka_key"]), Some(kafka_key_olake_id(b"3")));
    // Errors name the message field, not the column.
    let e = d.append(&record(7, r#"{"ID":"seven"}"#)).unwrap_err();
    assert_eq!(e.field.as_deref(), Some("ID"));
}

#[test]
fn escaped_field_names_find_their_column() {
    let mut d = decoder(&table(&[
        ("name", ColumnType::String),
        ("città", ColumnType::String),
    ]));
    d.append(&record(0, r#"{"na\u006de":"a","citt\u00e0":"b"}"#))
        .unwrap();
    d.append(&record(1, r#"{"città":"d","name":"c"}"#)).unwrap();
    let b = d.finish();
    assert_eq!(strings(&b, "name"), [Some("a".into()), Some("c".into())]);
    assert_eq!(strings(&b, "città"), [Some("b".into()), Some("d".into())]);
}

#[test]
fn finish_resets_and_the_decoder_is_reusable() {
    let mut d = decoder(&orders());
    assert_eq!(d.approx_bytes(), 0);
    let empty = d.finish();
    assert_eq!(empty.num_rows(), 0);
    for i in 0..3 {
        d.append(&record(i, ORDER)).unwrap();
    }
    assert!(d.approx_bytes() > 3 * 100);
    assert_eq!(d.finish().num_rows(), 3);
    assert!(d.is_empty());
    assert_eq!(d.approx_bytes(), 0);
    d.append(&record(3, ORDER)).unwrap();
    d.set_olake_timestamp(WRITTEN + 1);
    d.append(&record(4, r#"{"id":2}"#)).unwrap();
    let b = d.finish();
    assert_eq!(longs(&b, "_kafka_offset"), [Some(3), Some(4)]);
    assert_eq!(
        longs(&b, "_olake_timestamp"),
        [Some(WRITTEN), Some(WRITTEN + 1)]
    );
    assert_eq!(longs(&b, "id"), [Some(1), Some(2)]);
}

#[test]
fn upsert_ids_hash_the_dedup_key() {
    let options = |keys: &[&str]| DecoderOptions {
        id_mode: IdMode::Upsert {
            key_columns: keys.iter().map(|k| k.to_string()).collect(),
        },
        ..DecoderOptions::append(WRITTEN)
    };
    let mut d = BatchDecoder::new(&orders(), options(&["id"])).unwrap();
    d.append(&record(0, ORDER)).unwrap();
    let e = d.append(&record(1, r#"{"product":"x"}"#)).unwrap_err();
    assert_eq!(
        e.to_string(),
        r#"orders[2]@1: field "id": dedup key value is null"#
    );
    assert_eq!(d.len(), 1);
    let b = d.finish();
    assert_eq!(
        strings(&b, "_olake_id"),
        [Some(upsert_olake_id(&[KeyValue::Long(1)]))]
    );
    assert_eq!(
        strings(&b, "_olake_id")[0].as_deref(),
        Some("b7558a21244999dab39e10a660f2264f")
    );

    let mut d = BatchDecoder::new(&orders(), options(&["_kafka_key"])).unwrap();
    d.append(&record(0, ORDER)).unwrap();
    assert_eq!(
        strings(&d.finish(), "_olake_id")[0].as_deref(),
        Some("38fb311ac7ed2092c0a89e4c546ae0f2")
    );

    let mut d = BatchDecoder::new(
        &orders(),
        options(&["id", "created_at", "amount", "status"]),
    )
    .unwrap();
    d.append(&record(0, ORDER)).unwrap();
    let expected = upsert_olake_id(&[
        KeyValue::Long(1),
        KeyValue::TimestampMicros(T0),
        KeyValue::Double(99.19),
        KeyValue::String("shipped"),
    ]);
    assert_eq!(strings(&d.finish(), "_olake_id"), [Some(expected)]);

    assert_eq!(
        BatchDecoder::new(&orders(), options(&["nope"])).err(),
        Some(DecoderConfigError::UnknownKeyColumn("nope".into()))
    );
    assert_eq!(
        BatchDecoder::new(&orders(), options(&[])).err(),
        Some(DecoderConfigError::EmptyKey)
    );
}

#[test]
fn tables_in_another_order_or_without_some_metadata() {
    let columns = TableColumns::new(vec![
        Column::new(3, "_kafka_offset", ColumnType::Long),
        Column::new(7, "id", ColumnType::Long),
        Column::new(1, "name", ColumnType::String),
    ])
    .unwrap();
    let mut d = decoder(&columns);
    d.append(&record(9, r#"{"name":"x","id":4}"#)).unwrap();
    // A metadata name the table lacks is still a payload field.
    let e = d
        .append(&record(10, r#"{"name":"x","_op_type":"u"}"#))
        .unwrap_err();
    assert!(matches!(e.kind, DecodeErrorKind::UnknownFields(_)), "{e}");
    let b = d.finish();
    assert_eq!(b.num_columns(), 3);
    assert_eq!(longs(&b, "_kafka_offset"), [Some(9)]);
    assert_eq!(longs(&b, "id"), [Some(4)]);
    assert_eq!(strings(&b, "name"), [Some("x".into())]);
    let id_field = b
        .schema()
        .field(1)
        .metadata()
        .get("PARQUET:field_id")
        .cloned();
    assert_eq!(id_field.as_deref(), Some("7"));
}

#[test]
fn nulls_are_tracked_per_column() {
    let mut d = decoder(&orders());
    d.append(&record(0, r#"{"id":1}"#)).unwrap();
    d.append(&record(1, r#"{"product":"p"}"#)).unwrap();
    let b = d.finish();
    assert_eq!(b.column_by_name("id").unwrap().null_count(), 1);
    assert_eq!(b.column_by_name("product").unwrap().null_count(), 1);
    assert_eq!(b.column_by_name("amount").unwrap().null_count(), 2);
    assert_eq!(b.column_by_name("_kafka_offset").unwrap().null_count(), 0);
}

#[test]
fn a_decoder_can_move_to_another_thread() {
    fn assert_send<T: Send>() {}
    assert_send::<BatchDecoder>();
    let d = decoder(&orders());
    assert_eq!(
        format!("{d:?}"),
        "BatchDecoder { columns: 15, rows: 0, approx_bytes: 0, .. }"
    );
}

#[test]
fn keys_that_name_no_column_before_known_ones() {
    let options = DecoderOptions {
        unknown_fields: UnknownFieldPolicy::Collect,
        ..DecoderOptions::append(WRITTEN)
    };
    let mut d = BatchDecoder::new(&orders(), options).unwrap();
    for (i, value) in [
        r#"{"extra":1,"_op_type":"u","id":1}"#,
        r#"{"extra":2,"_op_type":"u","id":2}"#,
        r#"{"id":3,"extra":3,"product":"p"}"#,
        r#"{"product":"q","_kafka_key":"k","id":4}"#,
    ]
    .into_iter()
    .enumerate()
    {
        d.append(&record(i as i64, value)).unwrap();
    }
    let b = d.finish();
    assert_eq!(longs(&b, "id"), [Some(1), Some(2), Some(3), Some(4)]);
    assert_eq!(
        strings(&b, "product"),
        [None, None, Some("p".into()), Some("q".into())]
    );
    assert_eq!(strings(&b, "_op_type"), vec![Some("c".to_owned()); 4]);
}

/// Every prefix and many byte-flipped variants of real messages, between
/// good ones: whatever fails must leave no trace, whatever passes must
/// equal a clean decode of the same values.
#[test]
fn mangled_messages_never_corrupt_the_batch() {
    let sources = [
        ORDER,
        r#"{"id":2,"product":"S\u00e3o \"P\" 😀","amount":-1e-2,"status":null,"extra":[1,{"a":"b"}]}"#,
        r#"{"customer_id":9,"id":3,"id":4,"created_at":"2026-10-29 15:22:04.123456-05:30"}"#,
    ];
    let mut variants: Vec<Vec<u8>> = Vec::new();
    for s in sources {
        let bytes = s.as_bytes();
        for cut in 0..bytes.len() {
            variants.push(bytes[..cut].to_vec());
        }
        let mut x: u32 = 0x1234_5678;
        for _ in 0..300 {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            let mut v = bytes.to_vec();
            let at = x as usize % v.len();
            let replacements = b"\"{}[]:,0-.e\\ nulltrue9x\xff";
            v[at] = replacements[(x >> 20) as usize % replacements.len()];
            variants.push(v);
        }
    }
    let collect = || {
        let options = DecoderOptions {
            unknown_fields: UnknownFieldPolicy::Collect,
            ..DecoderOptions::append(WRITTEN)
        };
        BatchDecoder::new(&orders(), options).unwrap()
    };
    let mut d = collect();
    let mut reference = collect();
    let (mut ok, mut failed) = (0, 0);
    for (i, v) in variants.iter().enumerate() {
        let offset = i as i64;
        let rec = SourceRecord {
            value: Some(v),
            ..record(offset, "")
        };
        match d.append(&rec) {
            Ok(()) => {
                reference.append(&rec).unwrap();
                ok += 1;
            }
            Err(e) => {
                assert_eq!(e.offset, offset);
                failed += 1;
            }
        }
        d.append(&record(offset, sources[i % 3])).unwrap();
        reference.append(&record(offset, sources[i % 3])).unwrap();
    }
    assert!(ok > 50 && failed > 500, "ok {ok}, failed {failed}");
    assert_eq!(d.len(), reference.len());
    assert_eq!(d.unknown_fields().len(), reference.unknown_fields().len());
    assert_eq!(d.finish(), reference.finish());
}
