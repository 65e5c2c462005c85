//! Avro change events (Kafka Connect's Avro converter through the
//! registry), encoded by the Apache Avro Rust crate (an independent
//! encoder): each decodes into the same row as the JSON converter's form
//! of the same event.

use std::collections::HashMap;
use std::sync::Arc;

use apache_avro::types::Value as Avro;
use serde_json::json;

use super::super::connect_avro::connect_schema;
use super::super::tests::{column, decoder_of, envelope_schema, event, record, row, typed_columns};
use super::*;
use crate::decode::{DecodeErrorKind, RegistryValues};
use crate::registry::{RegisteredSchema, RegistryError, SchemaKind, SchemaSource};
use crate::{RegistryErrorKind, TableColumns, ValueFormat};

/// The envelope of `tests::envelope_schema` as the Avro converter writes
/// it: optional fields as unions with null, semantic types in `connect.*`
/// properties, `after` naming the record `before` defines.
const ENVELOPE: &str = r#"{"type":"record","name":"Envelope","namespace":"p.public.t","fields":[
 {"name":"before","type":["null",{"type":"record","name":"Value","fields":[
   {"name":"id","type":"int"},
   {"name":"amount","type":["null",{"type":"bytes","scale":3,"precision":12,"connect.version":1,
     "connect.parameters":{"scale":"3","connect.decimal.precision":"12"},
     "connect.name":"org.apache.kafka.connect.data.Decimal","logicalType":"decimal"}],"default":null},
   {"name":"at","type":["null",{"type":"string","connect.version":1,"connect.name":"io.debezium.time.ZonedTimestamp"}],"default":null},
   {"name":"d","type":["null",{"type":"int","connect.version":1,"connect.name":"io.debezium.time.Date"}],"default":null},
   {"name":"u","type":["null",{"type":"string","connect.version":1,"connect.name":"io.debezium.data.Uuid"}],"default":null},
   {"name":"j","type":["null",{"type":"string","connect.version":1,"connect.name":"io.debezium.data.Json"}],"default":null},
   {"name":"b","type":["null","bytes"],"default":null},
   {"name":"tags","type":["null",{"type":"array","items":["null","string"]}],"default":null}
  ],"connect.name":"p.public.t.Value"}],"default":null},
 {"name":"after","type":["null","Value"],"default":null},
 {"name":"source","type":{"type":"record","name":"Source","namespace":"io.debezium.connector.postgresql",
   "fields":[{"name":"ts_ms","type":"long"},{"name":"lsn","type":["null","long"],"default":null}],
   "connect.name":"io.debezium.connector.postgresql.Source"}},
 {"name":"op","type":"string"},
 {"name":"ts_ms","type":["null","long"],"default":null}
],"connect.name":"p.public.t.Envelope"}"#;

#[derive(Debug)]
struct Schemas(HashMap<u32, (SchemaKind, String)>);

impl SchemaSource for Schemas {
    fn schema_by_id(&self, id: u32) -> Result<Arc<RegisteredSchema>, RegistryError> {
        let (kind, schema) = self.0.get(&id).ok_or_else(|| RegistryError {
            kind: RegistryErrorKind::NotFound,
            registry: "http://registry".into(),
            what: format!("schema id {id}"),
            message: "Schema not found".into(),
        })?;
        Ok(Arc::new(RegisteredSchema {
            id,
            kind: *kind,
            schema: schema.clone(),
            references: Vec::new(),
        }))
    }
}

fn registry(schemas: &[(u32, SchemaKind, &str)]) -> Arc<RegistryValues> {
    let source = Schemas(
        schemas
            .iter()
            .map(|(i, k, s)| (*i, (*k, s.to_string())))
            .collect(),
    );
    Arc::new(RegistryValues::new(ValueFormat::Avro, Arc::new(source)))
}

fn union(v: Avro) -> Avro {
    match v {
        Avro::Null => Avro::Union(0, Box::new(Avro::Null)),
        v => Avro::Union(1, Box::new(v)),
    }
}

/// `tests::row()` as an Avro `Value` record, its `j` given.
fn avro_row(j: &str) -> Avro {
    let s = |t: &str| union(Avro::String(t.into()));
    Avro::Record(vec![
        ("id".into(), Avro::Int(1)),
        ("amount".into(), union(Avro::Bytes(vec![0x01, 0xe2, 0x40]))),
        ("at".into(), s("2026-12-07T01:02:03.456789Z")),
        ("d".into(), union(Avro::Int(20429))),
        ("u".into(), s("6f1c2c1e-8a7b-4c2d-9e0f-0123456789ab")),
        ("j".into(), s(j)),
        ("b".into(), union(Avro::Bytes(vec![0, 1, 2]))),
        (
            "tags".into(),
            union(Avro::Array(vec![
                union(Avro::String("x".into())),
                union(Avro::Null),
                union(Avro::String("z".into())),
            ])),
        ),
    ])
}

/// A framed event of schema id 9: `op` with `after` (or, for a delete,
/// `before`).
fn framed_event(op: &str, row: Avro) -> Vec<u8> {
    let (before, after) = match op {
        "d" => (union(row), union(Avro::Null)),
        _ => (union(Avro::Null), union(row)),
    };
    let value = Avro::Record(vec![
        ("before".into(), before),
        ("after".into(), after),
        (
            "source".into(),
            Avro::Record(vec![
                ("ts_ms".into(), Avro::Long(1)),
                ("lsn".into(), union(Avro::Long(1))),
            ]),
        ),
        ("op".into(), Avro::String(op.into())),
        ("ts_ms".into(), union(Avro::Long(1))),
    ]);
    // The encoder checks decimals against their logical type: encode the bytes.
    let physical = ENVELOPE.replace(r#","logicalType":"decimal""#, "");
    let schema = apache_avro::Schema::parse_str(&physical).unwrap();
    let mut out = vec![0, 0, 0, 0, 9];
    out.extend(apache_avro::to_avro_datum(&schema, value).unwrap());
    out
}

fn avro_decoder(columns: &[(String, crate::ColumnType)]) -> crate::decode::BatchDecoder {
    let mut d = decoder_of(&TableColumns::for_new_table(columns).unwrap());
    d.registry = Some(registry(&[(9, SchemaKind::Avro, ENVELOPE)]));
    d
}

#[test]
fn an_avro_change_event_decodes_into_the_row_of_its_json_form() {
    let json_value = event(Some(&envelope_schema(&[])), "c", row());
    let columns = typed_columns(&json_value);
    let avro_value = framed_event("c", avro_row(r#"{"a": [1, 2]}"#));
    let registry = registry(&[(9, SchemaKind::Avro, ENVELOPE)]);
    // The same columns, from the writer schema.
    let Some(ChangeColumns::Typed(asked)) =
        change_columns_in(&avro_value, Some(&registry)).unwrap()
    else {
        panic!("typed columns")
    };
    assert_eq!(asked, columns);

    let mut from_json = decoder_of(&TableColumns::for_new_table(&columns).unwrap());
    from_json
        .append(&record(0, r#"{"id":1}"#, Some(&json_value)))
        .unwrap();
    let mut from_avro = avro_decoder(&columns);
    let mut avro_record = record(0, r#"{"id":1}"#, None);
    avro_record.value = Some(&avro_value);
    from_avro.append(&avro_record).unwrap();
    // And again: the schema and the buffer are reused.
    avro_record.offset = 1;
    from_avro.append(&avro_record).unwrap();
    let (a, j) = (from_avro.finish(), from_json.finish());
    assert_eq!(a.num_rows(), 2);
    for name in [
        "id",
        "amount",
        "at",
        "d",
        "u",
        "j",
        "b",
        "tags",
        "_olake_id",
    ] {
        assert_eq!(
            column(&a, name).slice(0, 1).to_data(),
            column(&j, name).to_data(),
            "column {name}"
        );
    }
}

#[test]
fn an_avro_delete_deletes_its_key_and_the_placeholder_is_never_written() {
    let columns = typed_columns(&event(Some(&envelope_schema(&[])), "c", row()));
    let mut d = avro_decoder(&columns);
    let value = framed_event("d", avro_row("{}"));
    let mut r = record(0, r#"{"id":1}"#, None);
    r.value = Some(&value);
    assert_eq!(d.append(&r).unwrap_err().kind, DecodeErrorKind::Tombstone);

    let value = framed_event("u", avro_row(super::super::UNAVAILABLE));
    r.value = Some(&value);
    let e = d.append(&r).unwrap_err();
    assert_eq!(e.field.as_deref(), Some("j"), "{e}");
    assert!(e.to_string().contains("REPLICA IDENTITY FULL"), "{e}");
    assert_eq!(d.finish().num_rows(), 0);
}

#[test]
fn a_body_that_does_not_match_its_schema_fails_naming_the_schema_id() {
    let columns = typed_columns(&event(Some(&envelope_schema(&[])), "c", row()));
    let mut d = avro_decoder(&columns);
    let mut value = framed_event("c", avro_row("{}"));
    value.truncate(value.len() - 3);
    let mut r = record(0, r#"{"id":1}"#, None);
    r.value = Some(&value);
    let e = d.append(&r).unwrap_err();
    assert!(
        matches!(e.kind, DecodeErrorKind::BadBody { schema_id: 9, .. }),
        "{e}"
    );
}

#[test]
fn logical_types_without_connect_names_become_connect_semantic_types() {
    let avro = r#"{"type":"record","name":"R","fields":[
      {"name":"small","type":{"type":"int","connect.type":"int16"}},
      {"name":"price","type":{"type":"bytes","logicalType":"decimal","precision":9,"scale":2}},
      {"name":"day","type":{"type":"int","logicalType":"date"}},
      {"name":"at","type":{"type":"long","logicalType":"timestamp-micros"}},
      {"name":"id","type":{"type":"string","logicalType":"uuid"}},
      {"name":"kind","type":{"type":"enum","name":"Kind","symbols":["A","B"]}},
      {"name":"again","type":["null","Kind"]},
      {"name":"attrs","type":{"type":"map","values":"long"}},
      {"name":"ref","type":{"type":"fixed","name":"U","size":16,"logicalType":"uuid"}}
    ]}"#;
    let connect: serde_json::Value =
        serde_json::from_str(&connect_schema(avro, &[]).unwrap()).unwrap();
    let fields: Vec<(String, String, Option<String>)> = connect["fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["field"].as_str().unwrap().to_owned(),
                f["type"].as_str().unwrap().to_owned(),
                f["name"].as_str().map(str::to_owned),
            )
        })
        .collect();
    let named = |f: &str, t: &str, n: Option<&str>| (f.into(), t.into(), n.map(str::to_owned));
    assert_eq!(
        fields,
        [
            named("small", "int16", None),
            named(
                "price",
                "bytes",
                Some("org.apache.kafka.connect.data.Decimal")
            ),
            named("day", "int32", Some("org.apache.kafka.connect.data.Date")),
            named("at", "int64", Some("io.debezium.time.MicroTimestamp")),
            named("id", "string", Some("io.debezium.data.Uuid")),
            named("kind", "string", None),
            named("again", "string", None),
            named("attrs", "map", None),
            named("ref", "string", Some("io.debezium.data.Uuid")),
        ]
    );
    assert_eq!(
        connect["fields"][1]["parameters"],
        json!({"scale": "2", "connect.decimal.precision": "9"})
    );
    assert_eq!(connect["fields"][6]["optional"], json!(true));
}

#[test]
fn values_are_written_as_the_json_converter_writes_them() {
    let avro = r#"{"type":"record","name":"R","fields":[
      {"name":"f","type":"float"},{"name":"nan","type":"double"},
      {"name":"kind","type":{"type":"enum","name":"Kind","symbols":["A","B"]}},
      {"name":"raw","type":{"type":"fixed","name":"F","size":2}},
      {"name":"attrs","type":{"type":"map","values":["null","string"]}},
      {"name":"text","type":"string"}
    ]}"#;
    let schema = apache_avro::Schema::parse_str(avro).unwrap();
    let value = Avro::Record(vec![
        ("f".into(), Avro::Float(0.1)),
        ("nan".into(), Avro::Double(f64::NAN)),
        ("kind".into(), Avro::Enum(1, "B".into())),
        ("raw".into(), Avro::Fixed(2, vec![0xff, 0])),
        (
            "attrs".into(),
            Avro::Map(HashMap::from([(
                "k".to_owned(),
                union(Avro::String("v".into())),
            )])),
        ),
        ("text".into(), Avro::String("a \"quoted\"\nline".into())),
    ]);
    let body = apache_avro::to_avro_datum(&schema, value).unwrap();
    let writer = AvroType::parse(avro, &[]).unwrap();
    let mut out = Vec::new();
    transcode(&writer, &body, &mut out).unwrap();
    let json: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(
        json,
        json!({"f": 0.1, "nan": "NaN", "kind": "B", "raw": "/wA=", "attrs": {"k": "v"},
               "text": "a \"quoted\"\nline"})
    );
}

#[test]
fn unions_of_several_types_protobuf_and_json_schema_events_are_refused_with_the_reason() {
    let avro =
        r#"{"type":"record","name":"R","fields":[{"name":"x","type":["null","int","string"]}]}"#;
    let e = connect_schema(avro, &[]).unwrap_err().to_string();
    assert!(
        e.contains("field x") && e.contains("union of 2 types"),
        "{e}"
    );

    let columns = typed_columns(&event(Some(&envelope_schema(&[])), "c", row()));
    let mut d = avro_decoder(&columns);
    d.registry = Some(registry(&[(
        9,
        SchemaKind::Protobuf,
        "syntax = \"proto3\";",
    )]));
    let value = framed_event("c", avro_row("{}"));
    let mut r = record(0, r#"{"id":1}"#, None);
    r.value = Some(&value);
    let e = d.append(&r).unwrap_err();
    assert!(e.to_string().contains("Protobuf change events"), "{e}");
    // A JSON Schema's values come without the Connect schema that types them.
    d.registry = Some(registry(&[(9, SchemaKind::Json, "{}")]));
    d.change_schema = None;
    let e = d.append(&r).unwrap_err();
    assert!(e.to_string().contains("under a JSON Schema"), "{e}");
}
