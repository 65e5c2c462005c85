//! Registry-framed Protobuf values, encoded by prost-reflect's
//! `DynamicMessage` (an independent encoder) from the same `.proto` text,
//! framed with the magic byte, the schema id and the message indexes.

use std::collections::HashMap;

use arrow_array::types::{Decimal128Type, Float64Type};
use prost_reflect::prost::Message as _;
use prost_reflect::{DescriptorPool, DynamicMessage, MapKey, Value};
use protox::file::{ChainFileResolver, File, FileResolver, GoogleFileResolver};

use super::*;
use crate::registry::{RegisteredSchema, RegistryError, SchemaKind, SchemaReference, SchemaSource};
use crate::{RegistryErrorKind, ValueFormat};

mod edges;

const ORDER_V1: &str = r#"
syntax = "proto3";
package shop;
import "google/protobuf/timestamp.proto";
import "google/protobuf/wrappers.proto";

message Order {
  enum Status { PLACED = 0; SHIPPED = 1; DELIVERED = 2; }
  message Line { string sku = 1; int32 count = 2; }
  int64 id = 1;
  int32 customer_id = 2;
  string product = 3;
  double amount = 4;
  Status status = 5;
  google.protobuf.Timestamp created_at = 6;
  Customer.Address ship_to = 7;
  repeated string tags = 8;
  map<string, int64> attrs = 9;
  oneof payment { string card = 10; string voucher = 11; }
  google.protobuf.StringValue coupon = 12;
  uint64 big = 13;
  optional int32 qty = 14;
  repeated Line lines = 15;
  repeated int32 counts = 16;
}

message Customer {
  message Address { string city = 1; string zip = 2; }
  int64 id = 1;
  string name = 2;
  Address home = 3;
}
"#;

/// Schemas by id, with their references.
#[derive(Debug, Default)]
struct Schemas(HashMap<u32, (String, Vec<SchemaReference>)>);

impl SchemaSource for Schemas {
    fn schema_by_id(&self, id: u32) -> Result<Arc<RegisteredSchema>, RegistryError> {
        let (schema, references) = self.0.get(&id).ok_or_else(|| RegistryError {
            kind: RegistryErrorKind::NotFound,
            registry: "http://registry".into(),
            what: format!("schema id {id}"),
            message: "Schema not found".into(),
        })?;
        Ok(Arc::new(RegisteredSchema {
            id,
            kind: SchemaKind::Protobuf,
            schema: schema.clone(),
            references: references.clone(),
        }))
    }
}

fn registry(schemas: &[(u32, &str, Vec<SchemaReference>)]) -> Arc<RegistryValues> {
    let source = Schemas(
        schemas
            .iter()
            .map(|(i, s, r)| (*i, (s.to_string(), r.clone())))
            .collect(),
    );
    Arc::new(RegistryValues::new(ValueFormat::Protobuf, Arc::new(source)))
}

/// The encoder's own files: `.proto` texts by name.
struct Texts(HashMap<String, String>);

impl FileResolver for Texts {
    fn open_file(&self, name: &str) -> Result<File, protox::Error> {
        match self.0.get(name) {
            Some(text) => File::from_source(name, text),
            None => Err(protox::Error::file_not_found(name)),
        }
    }
}

/// The encoder's descriptors of `text` (file `main.proto`) and `imports`.
fn pool(text: &str, imports: &[(&str, &str)]) -> DescriptorPool {
    let mut texts: HashMap<String, String> = imports
        .iter()
        .map(|(n, t)| (n.to_string(), t.to_string()))
        .collect();
    texts.insert("main.proto".into(), text.into());
    let mut resolver = ChainFileResolver::new();
    resolver.add(Texts(texts));
    resolver.add(GoogleFileResolver::new());
    let mut compiler = protox::Compiler::with_file_resolver(resolver);
    compiler.open_file("main.proto").unwrap();
    compiler.descriptor_pool()
}

fn message(pool: &DescriptorPool, name: &str, fields: Vec<(&str, Value)>) -> DynamicMessage {
    let mut m = DynamicMessage::new(pool.get_message_by_name(name).unwrap());
    for (field, value) in fields {
        m.set_field_by_name(field, value);
    }
    m
}

/// Magic byte, schema id, message indexes (`[0]` as the single byte 0),
/// then the message.
fn framed(id: u32, indexes: &[i32], body: &[u8]) -> Vec<u8> {
    let mut out = vec![0];
    out.extend_from_slice(&id.to_be_bytes());
    if indexes == [0] {
        out.push(0);
    } else {
        zigzag(&mut out, indexes.len() as i64);
        for &i in indexes {
            zigzag(&mut out, i64::from(i));
        }
    }
    out.extend_from_slice(body);
    out
}

fn zigzag(out: &mut Vec<u8>, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    while z >= 0x80 {
        out.push((z as u8) | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
}

fn full_order(pool: &DescriptorPool, id: i64) -> Vec<u8> {
    let msg = |name, fields| Value::Message(message(pool, name, fields));
    let s = |v: &str| Value::String(v.into());
    message(
        pool,
        "shop.Order",
        vec![
            ("id", Value::I64(id)),
            ("customer_id", Value::I32(-6)),
            ("product", s("Keyboard")),
            ("amount", Value::F64(99.19)),
            ("status", Value::EnumNumber(1)),
            (
                "created_at",
                msg(
                    "google.protobuf.Timestamp",
                    vec![
                        ("seconds", Value::I64(1_793_287_324)),
                        ("nanos", Value::I32(123_456_789)),
                    ],
                ),
            ),
            (
                "ship_to",
                msg(
                    "shop.Customer.Address",
                    vec![("city", s("Oslo")), ("zip", s("0150"))],
                ),
            ),
            ("tags", Value::List(vec![s("a"), s("b")])),
            (
                "attrs",
                Value::Map(HashMap::from([(MapKey::String("x".into()), Value::I64(7))])),
            ),
            ("voucher", s("V-1")),
            (
                "coupon",
                msg("google.protobuf.StringValue", vec![("value", s("SAVE"))]),
            ),
            ("big", Value::U64(u64::MAX)),
            ("qty", Value::I32(0)),
            (
                "lines",
                Value::List(vec![msg(
                    "shop.Order.Line",
                    vec![("sku", s("K-1")), ("count", Value::I32(2))],
                )]),
            ),
            ("counts", Value::List(vec![Value::I32(1), Value::I32(-1)])),
        ],
    )
    .encode_to_vec()
}

fn column_types(columns: &TableColumns) -> Vec<String> {
    columns
        .payload()
        .map(|c| format!("{} {}", c.name, c.ty))
        .collect()
}

#[test]
fn protobuf_values_decode_into_typed_columns() {
    let registry = registry(&[(3, ORDER_V1, vec![])]);
    let pool = pool(ORDER_V1, &[]);
    let v1 = framed(3, &[0], &full_order(&pool, 1));
    let columns = columns_asked(&registry, &v1);
    assert_eq!(
        column_types(&columns),
        [
            "id long",
            "customer_id int",
            "product string",
            "amount double",
            "status string",
            "created_at timestamptz",
            "ship_to struct<city: string, zip: string>",
            "tags list<string>",
            "attrs map<string, long>",
            "card string",
            "voucher string",
            "coupon string",
            "big decimal(20,0)",
            "qty int",
            "lines list<struct<sku: string, count: int>>",
            "counts list<int>",
        ]
    );
    let mut d = framed_decoder(&columns, registry);
    d.append(&bytes_record(10, &v1)).unwrap();
    // The full path form of [0] reads the same message.
    let long_form = [&v1[..5], &[2, 0], &v1[6..]].concat();
    d.append(&bytes_record(11, &long_form)).unwrap();
    let batch = d.finish();
    let col = |n: &str| batch.column_by_name(n).unwrap().clone();
    assert_eq!(longs(&batch, "id"), [Some(1), Some(1)]);
    assert_eq!(col("customer_id").as_primitive::<Int32Type>().value(0), -6);
    assert_eq!(strings(&batch, "product")[0].as_deref(), Some("Keyboard"));
    assert_eq!(col("amount").as_primitive::<Float64Type>().value(0), 99.19);
    assert_eq!(strings(&batch, "status")[0].as_deref(), Some("SHIPPED"));
    // Nanoseconds below a microsecond are dropped.
    assert_eq!(longs(&batch, "created_at")[0], Some(1_793_287_324_123_456));
    let ship_to = col("ship_to");
    let ship_to = ship_to.as_struct();
    assert_eq!(ship_to.column(0).as_string::<i32>().value(0), "Oslo");
    assert_eq!(ship_to.column(1).as_string::<i32>().value(0), "0150");
    let tags = col("tags");
    assert_eq!(
        tags.as_list::<i32>().value(0).as_string::<i32>().value(1),
        "b"
    );
    let attrs = col("attrs");
    assert_eq!(attrs.as_map().keys().as_string::<i32>().value(0), "x");
    assert_eq!(
        attrs.as_map().values().as_primitive::<Int64Type>().value(0),
        7
    );
    assert!(col("card").is_null(0));
    assert_eq!(strings(&batch, "voucher")[0].as_deref(), Some("V-1"));
    assert_eq!(strings(&batch, "coupon")[0].as_deref(), Some("SAVE"));
    let big = col("big");
    assert_eq!(
        big.as_primitive::<Decimal128Type>().value(0),
        i128::from(u64::MAX)
    );
    assert_eq!(big.data_type(), &arrow_schema::DataType::Decimal128(20, 0));
    // proto3 `optional` set to its default is sent, and read as 0.
    assert_eq!(col("qty").as_primitive::<Int32Type>().value(0), 0);
    let lines = col("lines");
    let line = lines.as_list::<i32>().value(0);
    assert_eq!(
        line.as_struct().column(0).as_string::<i32>().value(0),
        "K-1"
    );
    assert_eq!(
        line.as_struct()
            .column(1)
            .as_primitive::<Int32Type>()
            .value(0),
        2
    );
    let counts = col("counts");
    let counts = counts.as_list::<i32>().value(0);
    assert_eq!(counts.as_primitive::<Int32Type>().values(), &[1, -1]);
    assert_eq!(longs(&batch, "_kafka_offset"), [Some(10), Some(11)]);
}

#[test]
fn absent_proto3_scalars_read_defaults_and_fields_with_presence_read_null() {
    let registry = registry(&[(3, ORDER_V1, vec![])]);
    let pool = pool(ORDER_V1, &[]);
    let columns = columns_asked(&registry, &framed(3, &[0], &full_order(&pool, 1)));
    let mut d = framed_decoder(&columns, registry);
    d.append(&bytes_record(1, &framed(3, &[0], &[]))).unwrap();
    let batch = d.finish();
    let col = |n: &str| batch.column_by_name(n).unwrap().clone();
    assert_eq!(longs(&batch, "id"), [Some(0)]);
    assert_eq!(col("customer_id").as_primitive::<Int32Type>().value(0), 0);
    assert_eq!(strings(&batch, "product"), [Some(String::new())]);
    assert_eq!(col("amount").as_primitive::<Float64Type>().value(0), 0.0);
    assert_eq!(strings(&batch, "status"), [Some("PLACED".into())]);
    assert_eq!(col("big").as_primitive::<Decimal128Type>().value(0), 0);
    for with_presence in ["created_at", "ship_to", "card", "voucher", "coupon", "qty"] {
        assert!(col(with_presence).is_null(0), "{with_presence}");
    }
    for empty in ["tags", "lines", "counts"] {
        let list = col(empty);
        assert!(!list.is_null(0) && list.as_list::<i32>().value(0).is_empty());
    }
    let attrs = col("attrs");
    assert!(!attrs.is_null(0) && attrs.as_map().value(0).is_empty());
}

#[test]
fn the_last_value_sent_wins_messages_merge_and_unknown_numbers_are_skipped() {
    let registry = registry(&[(3, ORDER_V1, vec![])]);
    let pool = pool(ORDER_V1, &[]);
    let columns = columns_asked(&registry, &framed(3, &[0], &full_order(&pool, 1)));
    let s = |v: &str| Value::String(v.into());
    let part = |fields| message(&pool, "shop.Order", fields).encode_to_vec();
    let address = |fields| Value::Message(message(&pool, "shop.Customer.Address", fields));
    let body = [
        part(vec![
            ("id", Value::I64(1)),
            ("card", s("C-1")),
            ("ship_to", address(vec![("city", s("Oslo"))])),
            ("status", Value::EnumNumber(7)),
        ]),
        // Field 99 is not in the schema: a varint, then a string.
        vec![0x98, 0x06, 0x01, 0x9a, 0x06, 0x02, b'h', b'i'],
        part(vec![
            ("id", Value::I64(2)),
            ("voucher", s("V-2")),
            ("ship_to", address(vec![("zip", s("0150"))])),
            ("tags", Value::List(vec![s("a")])),
        ]),
        part(vec![("tags", Value::List(vec![s("b")]))]),
    ]
    .concat();
    let mut d = framed_decoder(&columns, registry);
    d.append(&bytes_record(1, &framed(3, &[0], &body))).unwrap();
    let batch = d.finish();
    let col = |n: &str| batch.column_by_name(n).unwrap().clone();
    assert_eq!(longs(&batch, "id"), [Some(2)]);
    // Oneof: only the member sent last is set.
    assert!(col("card").is_null(0));
    assert_eq!(strings(&batch, "voucher"), [Some("V-2".into())]);
    let ship_to = col("ship_to");
    assert_eq!(
        ship_to.as_struct().column(0).as_string::<i32>().value(0),
        "Oslo"
    );
    assert_eq!(
        ship_to.as_struct().column(1).as_string::<i32>().value(0),
        "0150"
    );
    let tags = col("tags");
    let tags = tags.as_list::<i32>().value(0);
    assert_eq!(
        tags.as_string::<i32>().iter().collect::<Vec<_>>(),
        [Some("a"), Some("b")]
    );
    // An enum number the enum does not define, as text.
    assert_eq!(strings(&batch, "status"), [Some("7".into())]);
}

#[test]
fn message_indexes_select_a_nested_message_type() {
    let registry = registry(&[(3, ORDER_V1, vec![])]);
    let pool = pool(ORDER_V1, &[]);
    let address = message(
        &pool,
        "shop.Customer.Address",
        vec![("city", Value::String("Bergen".into()))],
    );
    let value = framed(3, &[1, 0], &address.encode_to_vec());
    let columns = columns_asked(&registry, &value);
    assert_eq!(column_types(&columns), ["city string", "zip string"]);
    let mut d = framed_decoder(&columns, registry.clone());
    d.append(&bytes_record(1, &value)).unwrap();
    assert_eq!(strings(&d.finish(), "city"), [Some("Bergen".into())]);

    let customer = message(&pool, "shop.Customer", vec![("id", Value::I64(4))]);
    let columns = columns_asked(&registry, &framed(3, &[1], &customer.encode_to_vec()));
    assert_eq!(
        column_types(&columns),
        [
            "id long",
            "name string",
            "home struct<city: string, zip: string>"
        ]
    );
    let e = d
        .append(&bytes_record(2, &framed(3, &[1, 5], &[])))
        .unwrap_err();
    assert!(
        matches!(e.kind, DecodeErrorKind::BadBody { schema_id: 3, .. }),
        "{e}"
    );
    assert!(e.to_string().contains("[1, 5]"), "{e}");
}

#[test]
fn bad_protobuf_input_is_refused_naming_the_field_and_changes_nothing() {
    let registry = registry(&[(3, ORDER_V1, vec![])]);
    let pool = pool(ORDER_V1, &[]);
    let good = framed(3, &[0], &full_order(&pool, 1));
    let columns = columns_asked(&registry, &good);
    let mut d = framed_decoder(&columns, registry);
    d.append(&bytes_record(1, &good)).unwrap();

    let truncated = &good[..good.len() - 3];
    let e = d.append(&bytes_record(2, truncated)).unwrap_err();
    assert!(
        matches!(e.kind, DecodeErrorKind::BadBody { schema_id: 3, .. }),
        "{e}"
    );
    assert!(
        e.to_string().starts_with("orders[0]@2: field \"counts\""),
        "{e}"
    );
    assert!(e.to_string().contains("truncated"), "{e}");

    // product (3) sent as a varint.
    let wrong_wire = framed(3, &[0], &[0x08, 0x01, 0x18, 0x01]);
    let e = d.append(&bytes_record(3, &wrong_wire)).unwrap_err();
    assert_eq!(e.field.as_deref(), Some("product"), "{e}");
    assert!(e.to_string().contains("wire type 0 (varint)"), "{e}");

    // ship_to.city (7.1) with bytes that are not UTF-8.
    let not_utf8 = framed(3, &[0], &[0x08, 0x01, 0x3a, 0x03, 0x0a, 0x01, 0xff]);
    let e = d.append(&bytes_record(4, &not_utf8)).unwrap_err();
    assert_eq!(e.field.as_deref(), Some("ship_to.city"), "{e}");
    assert!(e.to_string().contains("UTF-8"), "{e}");

    let overlong = framed(
        3,
        &[0],
        &[
            0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
        ],
    );
    let e = d.append(&bytes_record(5, &overlong)).unwrap_err();
    assert!(e.to_string().contains("10 bytes"), "{e}");

    let e = d.append(&bytes_record(6, br#"{"id":1}"#)).unwrap_err();
    assert!(matches!(e.kind, DecodeErrorKind::NotFramed { .. }), "{e}");

    let mut unknown = good.clone();
    unknown[4] = 99;
    let e = d.append(&bytes_record(7, &unknown)).unwrap_err();
    assert!(
        matches!(e.kind, DecodeErrorKind::UnknownSchema { schema_id: 99, .. }),
        "{e}"
    );

    assert_eq!(d.len(), 1);
    let batch = d.finish();
    assert_eq!(batch.num_rows(), 1);
    for c in batch.columns() {
        assert_eq!(c.len(), 1);
    }
}

#[test]
fn a_new_schema_version_adds_a_column_widens_int32_and_refuses_what_iceberg_cannot_follow() {
    const V1: &str = r#"syntax = "proto3"; message Order { int64 id = 1; int32 qty = 2; }"#;
    const V2: &str = r#"syntax = "proto3";
        message Order { int64 id = 1; int64 qty = 2; optional string note = 3; }"#;
    const V3: &str = r#"syntax = "proto3"; message Order { string id = 1; }"#;
    let registry = registry(&[(7, V1, vec![]), (8, V2, vec![]), (9, V3, vec![])]);
    let encode = |text: &str, id: u32, fields| {
        framed(
            id,
            &[0],
            &message(&pool(text, &[]), "Order", fields).encode_to_vec(),
        )
    };
    let v1 = encode(V1, 7, vec![("id", Value::I64(1)), ("qty", Value::I32(3))]);
    let columns = columns_asked(&registry, &v1);
    let mut d = framed_decoder(&columns, registry.clone());
    d.append(&bytes_record(1, &v1)).unwrap();

    let v2 = encode(
        V2,
        8,
        vec![
            ("id", Value::I64(2)),
            ("qty", Value::I64(1 << 40)),
            ("note", Value::String("hi".into())),
        ],
    );
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
    // An older message into the wider columns: its int32 widens, note is null.
    d.append(&bytes_record(3, &v1)).unwrap();
    let batch = d.finish();
    assert_eq!(longs(&batch, "qty"), [Some(1 << 40), Some(3)]);
    assert_eq!(strings(&batch, "note"), [Some("hi".into()), None]);

    let v3 = encode(V3, 9, vec![("id", Value::String("x".into()))]);
    let e = d.append(&bytes_record(4, &v3)).unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("schema id 9") && text.contains("read with schema id 7"),
        "{text}"
    );
    assert!(text.contains("field id"), "{text}");
}

#[test]
fn an_import_given_as_a_reference_is_compiled() {
    const ADDRESS: &str = r#"syntax = "proto3"; package geo; message Address { string city = 1; }"#;
    const CUSTOMER: &str = r#"syntax = "proto3"; package shop; import "geo/address.proto";
        message Customer { int64 id = 1; geo.Address home = 2; repeated geo.Address past = 3; }"#;
    let reference = SchemaReference {
        name: "geo/address.proto".into(),
        subject: "geo/address.proto".into(),
        version: 1,
        schema: ADDRESS.into(),
    };
    let registry = registry(&[(4, CUSTOMER, vec![reference])]);
    let pool = pool(CUSTOMER, &[("geo/address.proto", ADDRESS)]);
    let address = |city: &str| {
        Value::Message(message(
            &pool,
            "geo.Address",
            vec![("city", Value::String(city.into()))],
        ))
    };
    let customer = message(
        &pool,
        "shop.Customer",
        vec![
            ("id", Value::I64(9)),
            ("home", address("Oslo")),
            ("past", Value::List(vec![address("Rome"), address("Lima")])),
        ],
    );
    let value = framed(4, &[0], &customer.encode_to_vec());
    let columns = columns_asked(&registry, &value);
    assert_eq!(
        column_types(&columns),
        [
            "id long",
            "home struct<city: string>",
            "past list<struct<city: string>>"
        ]
    );
    let mut d = framed_decoder(&columns, registry);
    d.append(&bytes_record(1, &value)).unwrap();
    let batch = d.finish();
    let past = batch
        .column_by_name("past")
        .unwrap()
        .as_list::<i32>()
        .value(0);
    let cities = past.as_struct().column(0).as_string::<i32>().clone();
    assert_eq!(
        cities.iter().collect::<Vec<_>>(),
        [Some("Rome"), Some("Lima")]
    );
}

#[test]
fn a_recursive_message_is_refused_naming_it() {
    const TREE: &str = r#"syntax = "proto3"; message Node { string name = 1; Node child = 2; }"#;
    let registry = registry(&[(5, TREE, vec![])]);
    let columns = TableColumns::for_new_table(&[]).unwrap();
    let mut d = framed_decoder(&columns, registry);
    let e = d
        .append(&bytes_record(1, &framed(5, &[0], &[])))
        .unwrap_err();
    assert!(
        matches!(
            e.kind,
            DecodeErrorKind::UnsupportedSchema { schema_id: 5, .. }
        ),
        "{e}"
    );
    assert!(
        e.to_string().contains("message Node contains itself"),
        "{e}"
    );
}

#[test]
fn a_map_written_out_as_the_registry_gives_it_back_still_reads_as_a_map() {
    // Karapace answers `map<string, int64> attrs = 9` as a repeated entry
    // message without the map_entry option: the same bytes on the wire.
    let written_out = ORDER_V1.replace(
        "  map<string, int64> attrs = 9;",
        "  repeated AttrsEntry attrs = 9;\n  message AttrsEntry { string key = 1; int64 value = 2; }",
    );
    assert_ne!(written_out, ORDER_V1);
    let registry = registry(&[(3, &written_out, vec![])]);
    let pool = pool(ORDER_V1, &[]);
    let v1 = framed(3, &[0], &full_order(&pool, 1));
    let columns = columns_asked(&registry, &v1);
    assert!(column_types(&columns).contains(&"attrs map<string, long>".to_owned()));
    let mut d = framed_decoder(&columns, registry);
    d.append(&bytes_record(1, &v1)).unwrap();
    let batch = d.finish();
    let attrs = batch.column_by_name("attrs").unwrap();
    assert_eq!(attrs.as_map().keys().as_string::<i32>().value(0), "x");
}
