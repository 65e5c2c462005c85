//! Registry-framed Avro values, encoded by the Apache Avro Rust crate (an
//! independent encoder) with the physical schema, decoded with the logical
//! one the registry holds.

use std::collections::HashMap;

use apache_avro::types::Value as Avro;
use arrow_array::types::{Date32Type, Decimal128Type, Time64MicrosecondType};

use super::*;
use crate::registry::{RegisteredSchema, RegistryError, SchemaKind, SchemaSource};
use crate::{RegistryErrorKind, ValueFormat};

#[derive(Debug, Default)]
struct Schemas(HashMap<u32, String>);

impl SchemaSource for Schemas {
    fn schema_by_id(&self, id: u32) -> Result<Arc<RegisteredSchema>, RegistryError> {
        let schema = self.0.get(&id).ok_or_else(|| RegistryError {
            kind: RegistryErrorKind::NotFound,
            registry: "http://registry".into(),
            what: format!("schema id {id}"),
            message: "Schema not found".into(),
        })?;
        Ok(Arc::new(RegisteredSchema {
            id,
            kind: SchemaKind::Avro,
            schema: schema.clone(),
            references: Vec::new(),
        }))
    }
}

const ORDER_V1: &str = r#"{"type":"record","name":"Order","fields":[
  {"name":"id","type":"long"},
  {"name":"qty","type":"int"},
  {"name":"amount","type":{"type":"bytes","logicalType":"decimal","precision":10,"scale":2}},
  {"name":"created_at","type":{"type":"long","logicalType":"timestamp-millis"}},
  {"name":"day","type":{"type":"int","logicalType":"date"}},
  {"name":"at","type":{"type":"int","logicalType":"time-millis"}},
  {"name":"ref","type":{"type":"string","logicalType":"uuid"}},
  {"name":"status","type":{"type":"enum","name":"Status","symbols":["NEW","PAID"]}},
  {"name":"coupon","type":["null","string"],"default":null},
  {"name":"address","type":{"type":"record","name":"Address","fields":[{"name":"city","type":"string"}]}},
  {"name":"tags","type":{"type":"array","items":"string"}},
  {"name":"attrs","type":{"type":"map","values":"long"}}
]}"#;

/// The same record with only physical types, for the encoder.
const ORDER_V1_PHYSICAL: &str = r#"{"type":"record","name":"Order","fields":[
  {"name":"id","type":"long"},
  {"name":"qty","type":"int"},
  {"name":"amount","type":"bytes"},
  {"name":"created_at","type":"long"},
  {"name":"day","type":"int"},
  {"name":"at","type":"int"},
  {"name":"ref","type":"string"},
  {"name":"status","type":{"type":"enum","name":"Status","symbols":["NEW","PAID"]}},
  {"name":"coupon","type":["null","string"],"default":null},
  {"name":"address","type":{"type":"record","name":"Address","fields":[{"name":"city","type":"string"}]}},
  {"name":"tags","type":{"type":"array","items":"string"}},
  {"name":"attrs","type":{"type":"map","values":"long"}}
]}"#;

fn order_value(id: i64, coupon: Option<&str>) -> Avro {
    Avro::Record(vec![
        ("id".into(), Avro::Long(id)),
        ("qty".into(), Avro::Int(3)),
        ("amount".into(), Avro::Bytes(vec![0x04, 0xd2])), // 12.34
        ("created_at".into(), Avro::Long(1_793_287_324_123)),
        ("day".into(), Avro::Int(20_000)),
        ("at".into(), Avro::Int(3_600_000)),
        (
            "ref".into(),
            Avro::String("123e4567-e89b-12d3-a456-426614174000".into()),
        ),
        ("status".into(), Avro::Enum(1, "PAID".into())),
        (
            "coupon".into(),
            match coupon {
                Some(c) => Avro::Union(1, Box::new(Avro::String(c.into()))),
                None => Avro::Union(0, Box::new(Avro::Null)),
            },
        ),
        (
            "address".into(),
            Avro::Record(vec![("city".into(), Avro::String("Oslo".into()))]),
        ),
        (
            "tags".into(),
            Avro::Array(vec![Avro::String("a".into()), Avro::String("b".into())]),
        ),
        (
            "attrs".into(),
            Avro::Map(HashMap::from([("x".to_owned(), Avro::Long(7))])),
        ),
    ])
}

fn framed(id: u32, physical: &str, value: Avro) -> Vec<u8> {
    let schema = apache_avro::Schema::parse_str(physical).unwrap();
    let mut out = vec![0];
    out.extend_from_slice(&id.to_be_bytes());
    out.extend(apache_avro::to_avro_datum(&schema, value).unwrap());
    out
}

fn registry(format: ValueFormat, schemas: &[(u32, &str)]) -> Arc<RegistryValues> {
    let source = Schemas(schemas.iter().map(|(i, s)| (*i, s.to_string())).collect());
    Arc::new(RegistryValues::new(format, Arc::new(source)))
}

#[test]
fn avro_values_decode_into_typed_columns() {
    let registry = registry(ValueFormat::Avro, &[(7, ORDER_V1)]);
    let v1 = framed(7, ORDER_V1_PHYSICAL, order_value(1, Some("SAVE")));
    let columns = columns_asked(&registry, &v1);
    let types: Vec<String> = columns
        .payload()
        .map(|c| format!("{} {}", c.name, c.ty))
        .collect();
    assert_eq!(
        types,
        [
            "id long",
            "qty int",
            "amount decimal(10,2)",
            "created_at timestamptz",
            "day date",
            "at time",
            "ref uuid",
            "status string",
            "coupon string",
            "address struct<city: string>",
            "tags list<string>",
            "attrs map<string, long>"
        ]
    );
    let mut d = framed_decoder(&columns, registry);
    d.append(&bytes_record(10, &v1)).unwrap();
    let v2 = framed(7, ORDER_V1_PHYSICAL, order_value(2, None));
    d.append(&bytes_record(11, &v2)).unwrap();
    let batch = d.finish();
    let col = |n: &str| batch.column_by_name(n).unwrap().clone();
    assert_eq!(col("id").as_primitive::<Int64Type>().values(), &[1, 2]);
    assert_eq!(col("qty").as_primitive::<Int32Type>().value(0), 3);
    let amount = col("amount");
    assert_eq!(amount.as_primitive::<Decimal128Type>().value(0), 1234);
    assert_eq!(
        amount.data_type(),
        &arrow_schema::DataType::Decimal128(10, 2)
    );
    assert_eq!(
        col("created_at")
            .as_primitive::<TimestampMicrosecondType>()
            .value(0),
        1_793_287_324_123_000
    );
    assert_eq!(col("day").as_primitive::<Date32Type>().value(0), 20_000);
    assert_eq!(
        col("at").as_primitive::<Time64MicrosecondType>().value(0),
        3_600_000_000
    );
    assert_eq!(
        col("ref").as_fixed_size_binary().value(0)[..2],
        [0x12, 0x3e]
    );
    assert_eq!(col("status").as_string::<i32>().value(0), "PAID");
    assert_eq!(col("coupon").as_string::<i32>().value(0), "SAVE");
    assert!(col("coupon").is_null(1));
    let address = col("address");
    let city = address.as_struct().column(0).as_string::<i32>().clone();
    assert_eq!(city.value(1), "Oslo");
    let tags = col("tags");
    let tags = tags.as_list::<i32>();
    assert_eq!(tags.value(0).as_string::<i32>().value(1), "b");
    let attrs = col("attrs");
    let attrs = attrs.as_map();
    assert_eq!(attrs.keys().as_string::<i32>().value(0), "x");
    assert_eq!(attrs.values().as_primitive::<Int64Type>().value(0), 7);
    assert_eq!(
        col("_kafka_offset").as_primitive::<Int64Type>().values(),
        &[10, 11]
    );
}

#[test]
fn bad_avro_input_is_refused_naming_offset_and_reason_and_changes_nothing() {
    let registry = registry(ValueFormat::Avro, &[(7, ORDER_V1)]);
    let v1 = framed(7, ORDER_V1_PHYSICAL, order_value(1, None));
    let columns = columns_asked(&registry, &v1);
    let mut d = framed_decoder(&columns, registry);
    d.append(&bytes_record(1, &v1)).unwrap();

    let truncated = &v1[..v1.len() - 3];
    let e = d.append(&bytes_record(2, truncated)).unwrap_err();
    assert!(
        matches!(e.kind, DecodeErrorKind::BadBody { schema_id: 7, .. }),
        "{e}"
    );
    assert!(
        e.to_string().starts_with("orders[0]@2: field \"attrs\""),
        "{e}"
    );

    let e = d.append(&bytes_record(3, br#"{"id":1}"#)).unwrap_err();
    assert!(matches!(e.kind, DecodeErrorKind::NotFramed { .. }), "{e}");

    let mut unknown = v1.clone();
    unknown[4] = 99;
    let e = d.append(&bytes_record(4, &unknown)).unwrap_err();
    assert!(
        matches!(e.kind, DecodeErrorKind::UnknownSchema { schema_id: 99, .. }),
        "{e}"
    );

    let mut trailing = v1.clone();
    trailing.push(0);
    let e = d.append(&bytes_record(5, &trailing)).unwrap_err();
    assert!(e.to_string().contains("1 bytes left"), "{e}");

    assert_eq!(d.len(), 1);
    let batch = d.finish();
    assert_eq!(batch.num_rows(), 1);
    for c in batch.columns() {
        assert_eq!(c.len(), 1);
    }
}

#[test]
fn auto_reads_framed_values_by_schema_and_plain_json_as_json() {
    let registry = registry(ValueFormat::Auto, &[(7, ORDER_V1)]);
    let v1 = framed(7, ORDER_V1_PHYSICAL, order_value(5, None));
    let columns = columns_asked(&registry, &v1);
    let mut d = framed_decoder(&columns, registry);
    d.append(&bytes_record(1, &v1)).unwrap();
    d.append(&bytes_record(2, br#"{"id":6,"status":"NEW"}"#))
        .unwrap();
    let batch = d.finish();
    let ids = batch
        .column_by_name("id")
        .unwrap()
        .as_primitive::<Int64Type>()
        .clone();
    assert_eq!(ids.values(), &[5, 6]);
}

#[test]
fn a_new_schema_version_adds_a_column_widens_int_and_refuses_what_iceberg_cannot_follow() {
    const V2: &str = r#"{"type":"record","name":"Order","fields":[
      {"name":"id","type":"long"},{"name":"qty","type":"long"},
      {"name":"note","type":["null","string"],"default":null}]}"#;
    const V3: &str = r#"{"type":"record","name":"Order","fields":[{"name":"id","type":"string"}]}"#;
    let registry = registry(ValueFormat::Avro, &[(7, ORDER_V1), (8, V2), (9, V3)]);
    let v1 = framed(7, ORDER_V1_PHYSICAL, order_value(1, None));
    let columns = columns_asked(&registry, &v1);
    let mut d = framed_decoder(&columns, registry.clone());
    d.append(&bytes_record(1, &v1)).unwrap();

    let v2_value = Avro::Record(vec![
        ("id".into(), Avro::Long(2)),
        ("qty".into(), Avro::Long(1 << 40)),
        (
            "note".into(),
            Avro::Union(1, Box::new(Avro::String("hi".into()))),
        ),
    ]);
    let v2 = framed(8, V2, v2_value);
    let e = d.append(&bytes_record(2, &v2)).unwrap_err();
    let DecodeErrorKind::UnknownFields(added) = &e.kind else {
        panic!("{e}")
    };
    assert_eq!(added[0].name, "note");
    assert_eq!(added[0].column_type(), ColumnType::String);
    let columns = columns
        .with_added(&[("note".into(), ColumnType::String)], false)
        .unwrap();
    let mut d = framed_decoder(&columns, registry.clone());
    let e = d.append(&bytes_record(2, &v2)).unwrap_err();
    assert_eq!(
        e.kind,
        DecodeErrorKind::Widen(vec![("qty".into(), ColumnType::Long)])
    );
    let widened: Vec<Column> = columns
        .columns()
        .iter()
        .map(|c| match c.name.as_str() {
            "qty" => Column::new(c.field_id, "qty", ColumnType::Long),
            _ => c.clone(),
        })
        .collect();
    let columns = TableColumns::new(widened).unwrap();
    let mut d = framed_decoder(&columns, registry.clone());
    d.append(&bytes_record(2, &v2)).unwrap();
    // An older message into the wider columns: its int widens, note is null.
    d.append(&bytes_record(3, &v1)).unwrap();
    let batch = d.finish();
    let qty = batch
        .column_by_name("qty")
        .unwrap()
        .as_primitive::<Int64Type>()
        .clone();
    assert_eq!(qty.values(), &[1 << 40, 3]);
    assert!(batch.column_by_name("note").unwrap().is_null(1));
    assert!(batch.column_by_name("amount").unwrap().is_null(0));

    let v3 = framed(
        9,
        V3,
        Avro::Record(vec![("id".into(), Avro::String("x".into()))]),
    );
    let e = d.append(&bytes_record(4, &v3)).unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("schema id 9") && text.contains("read with schema id 7"),
        "{text}"
    );
    assert!(text.contains("field id"), "{text}");
}

#[test]
fn a_dedup_key_field_of_an_avro_or_json_message_key_hashes_like_its_column() {
    const KEY: &str = r#"{"type":"record","name":"OrderKey","fields":[
      {"name":"region","type":"string"},{"name":"id","type":"long"}]}"#;
    let registry = registry(ValueFormat::Avro, &[(7, ORDER_V1), (3, KEY)]);
    let v1 = framed(7, ORDER_V1_PHYSICAL, order_value(1, None));
    let columns = columns_asked(&registry, &v1);
    let mut options = DecoderOptions::append(WRITTEN);
    options.registry = Some(registry);
    options.id_mode = IdMode::Upsert {
        key_columns: vec!["_kafka_key.id".into()],
    };
    let mut d = BatchDecoder::new(&columns, options).unwrap();
    let key_value = Avro::Record(vec![
        ("region".into(), Avro::String("eu".into())),
        ("id".into(), Avro::Long(42)),
    ]);
    let avro_key = framed(3, KEY, key_value);
    let json_key = br#"{"region":"eu","id":42}"#;
    for key in [avro_key.as_slice(), json_key] {
        let mut r = bytes_record(1, &v1);
        r.key = Some(key);
        d.append(&r).unwrap();
    }
    let mut r = bytes_record(2, &v1);
    r.key = Some(br#"{"region":"eu"}"#);
    let e = d.append(&r).unwrap_err();
    assert_eq!(e.kind, DecodeErrorKind::NullKey);
    assert_eq!(e.field.as_deref(), Some("_kafka_key.id"));
    let batch = d.finish();
    let ids = batch
        .column_by_name("_olake_id")
        .unwrap()
        .as_string::<i32>()
        .clone();
    let expected = upsert_olake_id(&[KeyValue::Long(42)]);
    assert_eq!(ids.value(0), expected);
    assert_eq!(ids.value(1), expected);
}

#[test]
fn every_field_of_an_avro_message_key_hashes_as_the_same_json_key_does() {
    const KEY: &str = r#"{"type":"record","name":"OrderKey","fields":[
      {"name":"region","type":"string"},{"name":"id","type":"int"}]}"#;
    let registry = registry(ValueFormat::Avro, &[(7, ORDER_V1), (3, KEY)]);
    let v1 = framed(7, ORDER_V1_PHYSICAL, order_value(1, None));
    let columns = columns_asked(&registry, &v1);
    let mut options = DecoderOptions::append(WRITTEN);
    options.registry = Some(registry);
    options.id_mode = IdMode::Upsert {
        key_columns: vec![ALL_KEY_FIELDS.into()],
    };
    let mut d = BatchDecoder::new(&columns, options).unwrap();
    let key = |region: &str, id: i32| {
        framed(
            3,
            KEY,
            Avro::Record(vec![
                ("region".into(), Avro::String(region.into())),
                ("id".into(), Avro::Int(id)),
            ]),
        )
    };
    let keys = [
        key("eu", 42),
        br#"{"region":"eu","id":42}"#.to_vec(),
        key("eu", 43),
        key("us", 42),
    ];
    for k in &keys {
        let mut r = bytes_record(1, &v1);
        r.key = Some(k);
        d.append(&r).unwrap();
    }
    let batch = d.finish();
    let ids = batch
        .column_by_name("_olake_id")
        .unwrap()
        .as_string::<i32>()
        .clone();
    // The JSON form of a key (Debezium's `__debezium.oldkey` header) names
    // the same row; another value of either field another.
    assert_eq!(ids.value(0), ids.value(1));
    assert_ne!(ids.value(0), ids.value(2));
    assert_ne!(ids.value(0), ids.value(3));
    assert_ne!(ids.value(2), ids.value(3));
}

#[test]
fn key_format_decides_how_a_key_field_is_read() {
    const KEY: &str = r#"{"type":"record","name":"K","fields":[{"name":"id","type":"long"}]}"#;
    let registry = registry(ValueFormat::Avro, &[(7, ORDER_V1), (3, KEY)]);
    let v1 = framed(7, ORDER_V1_PHYSICAL, order_value(1, None));
    let columns = columns_asked(&registry, &v1);
    let avro_key = framed(3, KEY, Avro::Record(vec![("id".into(), Avro::Long(9))]));
    let decoder = |format| {
        let mut options = DecoderOptions::append(WRITTEN);
        options.registry = Some(registry.clone());
        options.key_format = format;
        options.id_mode = IdMode::Upsert {
            key_columns: vec!["_kafka_key.id".into()],
        };
        BatchDecoder::new(&columns, options).unwrap()
    };
    let with_key = |key: &'static [u8]| {
        let mut r = bytes_record(1, &v1);
        r.key = Some(key);
        r
    };
    let avro_key: &'static [u8] = Box::leak(avro_key.into_boxed_slice());
    // avro: a JSON key is not what the stream says its keys are.
    let e = decoder(ValueFormat::Avro)
        .append(&with_key(br#"{"id":9}"#))
        .unwrap_err();
    assert!(matches!(e.kind, DecodeErrorKind::NotFramed { .. }), "{e}");
    decoder(ValueFormat::Avro)
        .append(&with_key(avro_key))
        .unwrap();
    // json: a framed key is read as JSON, and is not JSON.
    let e = decoder(ValueFormat::Json)
        .append(&with_key(avro_key))
        .unwrap_err();
    assert!(matches!(e.kind, DecodeErrorKind::NotJson { .. }), "{e}");
    // auto: either.
    let mut d = decoder(ValueFormat::Auto);
    d.append(&with_key(avro_key)).unwrap();
    d.append(&with_key(br#"{"id":9}"#)).unwrap();
    let batch = d.finish();
    let ids = batch
        .column_by_name("_olake_id")
        .unwrap()
        .as_string::<i32>()
        .clone();
    assert_eq!(ids.value(0), ids.value(1));
}

#[test]
fn json_values_for_registry_typed_columns_are_refused_not_guessed() {
    // `auto`: a plain JSON message on a table whose columns an Avro schema made.
    let registry = registry(ValueFormat::Auto, &[(7, ORDER_V1)]);
    let v1 = framed(7, ORDER_V1_PHYSICAL, order_value(1, None));
    let columns = columns_asked(&registry, &v1);
    let mut d = framed_decoder(&columns, registry);
    let e = d
        .append(&bytes_record(1, br#"{"id":2,"amount":1.5}"#))
        .unwrap_err();
    assert_eq!(e.field.as_deref(), Some("amount"));
    assert!(
        e.to_string()
            .ends_with("expected decimal(10,2), found number 1.5"),
        "{e}"
    );
    let e = d
        .append(&bytes_record(2, br#"{"id":2,"address":{"city":"Oslo"}}"#))
        .unwrap_err();
    assert!(
        e.to_string().contains("expected struct<city: string>"),
        "{e}"
    );
    assert!(d.is_empty());
}
