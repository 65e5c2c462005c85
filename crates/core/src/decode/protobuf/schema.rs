//! Protobuf schemas as a registry holds them (`.proto` source text, or a
//! base64 serialized `FileDescriptorProto`, with imports as references),
//! compiled with `protox` and walked with `prost-reflect` into the types
//! the decoder reads, and the column type each one is stored as.

use std::collections::HashMap;
use std::sync::Arc;

use base64::Engine as _;
use prost_reflect::prost::Message as _;
use prost_reflect::{Cardinality, DescriptorPool, FieldDescriptor, Kind, MessageDescriptor};
use protox::file::{ChainFileResolver, File, FileResolver, GoogleFileResolver};

use crate::columns::{ColumnType, MapFields, NestedField};
use crate::decode::schema_error::SchemaError;
use crate::registry::SchemaReference;

/// The name the registered schema itself is compiled under (imports name
/// the references by their own names).
const MAIN_FILE: &str = "topicberg/registered-schema.proto";

/// A registered Protobuf schema, compiled: the messages of its file and
/// everything they import.
#[derive(Debug)]
pub struct ProtoSchema {
    pool: DescriptorPool,
}

impl ProtoSchema {
    /// Compiles a schema's text with its references (import path and
    /// text). Each text is `.proto` source or, failing that, a base64
    /// serialized `FileDescriptorProto`. The well-known
    /// `google/protobuf/*.proto` files need no reference.
    pub fn parse(text: &str, references: &[SchemaReference]) -> Result<ProtoSchema, SchemaError> {
        let mut sources = HashMap::with_capacity(references.len() + 1);
        for r in references {
            sources.insert(r.name.clone(), r.schema.clone());
        }
        sources.insert(MAIN_FILE.to_owned(), text.to_owned());
        let mut resolver = ChainFileResolver::new();
        resolver.add(Sources(sources));
        resolver.add(GoogleFileResolver::new());
        let mut compiler = protox::Compiler::with_file_resolver(resolver);
        compiler
            .include_imports(true)
            .open_file(MAIN_FILE)
            .map_err(|e| SchemaError::NotProtobuf {
                source: Arc::new(e),
            })?;
        Ok(ProtoSchema {
            pool: compiler.descriptor_pool(),
        })
    }

    /// The message at a Confluent message-index path (the index of a
    /// top-level message of the file, then of a nested type in each), with
    /// every type it uses; `None` if there is none, `Err` if an Iceberg
    /// table cannot hold it (a message that contains itself, a proto2
    /// group). Its top-level fields' [`ProtoField::column_type`] are the
    /// columns it is read into.
    pub fn message(&self, path: &[i32]) -> Option<Result<ProtoMessage, SchemaError>> {
        Some(ProtoMessage::from_descriptor(&self.message_at(path)?))
    }

    /// The message at a Confluent message-index path: the index of a
    /// top-level message of the file, then of a nested type in each
    /// (map entries count, as in the descriptor). `None` if there is none.
    pub(crate) fn message_at(&self, path: &[i32]) -> Option<MessageDescriptor> {
        let file = self.pool.get_file_by_name(MAIN_FILE)?;
        let (&first, rest) = path.split_first()?;
        let mut message = file.messages().nth(usize::try_from(first).ok()?)?;
        for &i in rest {
            let child = message.child_messages().nth(usize::try_from(i).ok()?)?;
            message = child;
        }
        Some(message)
    }
}

/// The schema texts by import path.
struct Sources(HashMap<String, String>);

impl FileResolver for Sources {
    fn open_file(&self, name: &str) -> Result<File, protox::Error> {
        let text = self
            .0
            .get(name)
            .ok_or_else(|| protox::Error::file_not_found(name))?;
        let parsed = File::from_source(name, text);
        if parsed.is_ok() {
            return parsed;
        }
        match descriptor_from_base64(text) {
            Some(mut descriptor) => {
                descriptor.name = Some(name.to_owned());
                Ok(File::from_file_descriptor_proto(descriptor))
            }
            None => parsed,
        }
    }
}

/// A base64 (standard, padded or not) serialized `FileDescriptorProto`.
fn descriptor_from_base64(text: &str) -> Option<prost_reflect::prost_types::FileDescriptorProto> {
    let text = text.trim();
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text)
        .or_else(|_| base64::engine::general_purpose::STANDARD_NO_PAD.decode(text))
        .ok()?;
    prost_reflect::prost_types::FileDescriptorProto::decode(bytes.as_slice()).ok()
}

/// A scalar value type, as it is encoded on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scalar {
    Int32,
    Sint32,
    Sfixed32,
    Int64,
    Sint64,
    Sfixed64,
    Uint32,
    Fixed32,
    Uint64,
    Fixed64,
    Float,
    Double,
    Bool,
    String,
    Bytes,
}

/// The unsigned 64-bit integers, exact: `decimal(20,0)`.
pub const UNSIGNED_64: ColumnType = ColumnType::Decimal {
    precision: 20,
    scale: 0,
};

impl Scalar {
    /// The column type it is stored as.
    pub fn column_type(self) -> ColumnType {
        use Scalar::*;
        match self {
            Int32 | Sint32 | Sfixed32 => ColumnType::Int,
            Int64 | Sint64 | Sfixed64 | Uint32 | Fixed32 => ColumnType::Long,
            Uint64 | Fixed64 => UNSIGNED_64,
            Float => ColumnType::Float,
            Double => ColumnType::Double,
            Bool => ColumnType::Boolean,
            String => ColumnType::String,
            Bytes => ColumnType::Binary,
        }
    }

    /// Its name in `.proto` files.
    pub fn name(self) -> &'static str {
        use Scalar::*;
        match self {
            Int32 => "int32",
            Sint32 => "sint32",
            Sfixed32 => "sfixed32",
            Int64 => "int64",
            Sint64 => "sint64",
            Sfixed64 => "sfixed64",
            Uint32 => "uint32",
            Fixed32 => "fixed32",
            Uint64 => "uint64",
            Fixed64 => "fixed64",
            Float => "float",
            Double => "double",
            Bool => "bool",
            String => "string",
            Bytes => "bytes",
        }
    }

    fn of(kind: &Kind) -> Option<Scalar> {
        Some(match kind {
            Kind::Int32 => Scalar::Int32,
            Kind::Sint32 => Scalar::Sint32,
            Kind::Sfixed32 => Scalar::Sfixed32,
            Kind::Int64 => Scalar::Int64,
            Kind::Sint64 => Scalar::Sint64,
            Kind::Sfixed64 => Scalar::Sfixed64,
            Kind::Uint32 => Scalar::Uint32,
            Kind::Fixed32 => Scalar::Fixed32,
            Kind::Uint64 => Scalar::Uint64,
            Kind::Fixed64 => Scalar::Fixed64,
            Kind::Float => Scalar::Float,
            Kind::Double => Scalar::Double,
            Kind::Bool => Scalar::Bool,
            Kind::String => Scalar::String,
            Kind::Bytes => Scalar::Bytes,
            Kind::Message(_) | Kind::Enum(_) => return None,
        })
    }
}

/// An enum: its value names by number (the first declared name of a
/// number, when aliases share it), and the name of its first value (the
/// default).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtoEnum {
    /// `(number, name)`, sorted by number.
    pub values: Vec<(i32, String)>,
    /// The first declared value's name.
    pub default: String,
}

impl ProtoEnum {
    /// The name of `number`, if the enum defines it.
    pub fn name_of(&self, number: i32) -> Option<&str> {
        let i = self.values.binary_search_by_key(&number, |v| v.0).ok()?;
        Some(&self.values[i].1)
    }
}

/// A value type as the decoder reads it.
#[derive(Debug, Clone, PartialEq)]
pub enum ProtoType {
    Scalar(Scalar),
    Enum(Arc<ProtoEnum>),
    /// `google.protobuf.Timestamp`.
    Timestamp,
    /// A `google.protobuf` wrapper (`Int64Value`, ...) of this scalar.
    Wrapper(Scalar),
    Message(Arc<ProtoMessage>),
}

/// How many values a field holds.
#[derive(Debug, Clone, PartialEq)]
pub enum Label {
    /// At most one; with presence (proto3 `optional`, proto2, messages,
    /// oneof members) an absent field is null, else its default.
    Singular { presence: bool },
    /// `repeated` (packed or not); absent: an empty list.
    Repeated,
    /// `map<key, ty>`; absent: an empty map.
    Map(Scalar),
}

/// One field of a message.
#[derive(Debug, Clone, PartialEq)]
pub struct ProtoField {
    pub name: String,
    pub number: u32,
    pub ty: ProtoType,
    pub label: Label,
    /// The oneof it belongs to (an index among the message's real oneofs).
    pub oneof: Option<usize>,
}

/// A message: its full name, fields in declaration order, and how many
/// oneofs they form.
#[derive(Debug, Clone, PartialEq)]
pub struct ProtoMessage {
    pub name: String,
    pub fields: Vec<ProtoField>,
    pub oneofs: usize,
}

impl ProtoMessage {
    /// The message `descriptor` describes, with every type it uses. `Err`
    /// names a message that contains itself (an Iceberg table cannot hold
    /// it) or a proto2 group.
    pub(crate) fn from_descriptor(
        descriptor: &MessageDescriptor,
    ) -> Result<ProtoMessage, SchemaError> {
        let mut within = Vec::new();
        message(descriptor, &mut within)
    }

    /// The struct it is stored as; `None` when no field has a column (a
    /// message without fields, such as `google.protobuf.Empty`: Parquet
    /// cannot hold an empty struct).
    pub fn column_type(&self) -> Option<ColumnType> {
        let fields: Vec<NestedField> = self
            .fields
            .iter()
            .filter_map(|f| Some(NestedField::optional(0, &f.name, f.column_type()?)))
            .collect();
        (!fields.is_empty()).then(|| ColumnType::Struct(fields.into()))
    }
}

impl ProtoField {
    /// The column type the field is stored as; `None`: no column (see
    /// [`ProtoMessage::column_type`]).
    pub fn column_type(&self) -> Option<ColumnType> {
        let value = self.ty.column_type()?;
        Some(match &self.label {
            Label::Singular { .. } => value,
            Label::Repeated => {
                ColumnType::List(Arc::new(NestedField::optional(0, "element", value)))
            }
            Label::Map(key) => ColumnType::Map(Arc::new(MapFields {
                key: NestedField {
                    field_id: 0,
                    name: "key".into(),
                    ty: key.column_type(),
                    required: true,
                },
                value: NestedField::optional(0, "value", value),
            })),
        })
    }
}

impl ProtoType {
    /// The column type values of this type are stored as.
    pub fn column_type(&self) -> Option<ColumnType> {
        Some(match self {
            ProtoType::Scalar(s) | ProtoType::Wrapper(s) => s.column_type(),
            ProtoType::Enum(_) => ColumnType::String,
            ProtoType::Timestamp => ColumnType::TimestampTz,
            ProtoType::Message(m) => return m.column_type(),
        })
    }

    /// The type's name in messages (`message shop.Address`, `int32`, ...).
    pub fn describe(&self) -> String {
        match self {
            ProtoType::Scalar(s) => s.name().to_owned(),
            ProtoType::Enum(_) => "enum".to_owned(),
            ProtoType::Timestamp => "google.protobuf.Timestamp".to_owned(),
            ProtoType::Wrapper(s) => format!("wrapper of {}", s.name()),
            ProtoType::Message(m) => format!("message {}", m.name),
        }
    }
}

/// `descriptor` as a [`ProtoMessage`]; `within` are the messages being
/// converted around it (a message met again there contains itself).
fn message(
    descriptor: &MessageDescriptor,
    within: &mut Vec<String>,
) -> Result<ProtoMessage, SchemaError> {
    let name = descriptor.full_name().to_owned();
    if within.contains(&name) {
        return Err(SchemaError::ContainsItself {
            what: "message",
            name,
        });
    }
    within.push(name.clone());
    // Real oneofs (not proto3 `optional`'s synthetic ones), numbered.
    let oneofs: Vec<String> = descriptor
        .oneofs()
        .filter(|o| !o.is_synthetic())
        .map(|o| o.name().to_owned())
        .collect();
    // Declaration order: the descriptor's field list.
    let fields = descriptor
        .descriptor_proto()
        .field
        .iter()
        .filter_map(|f| descriptor.get_field(f.number() as u32))
        .map(|f| field(&f, &oneofs, within))
        .collect::<Result<Vec<_>, SchemaError>>()?;
    within.pop();
    Ok(ProtoMessage {
        name,
        fields,
        oneofs: oneofs.len(),
    })
}

/// The key and value fields of a map field: one declared `map<K, V>`, or
/// the same written out as a registry may give it back (Karapace turns
/// `map<string, int64> attrs = 6` into `repeated AttrsEntry attrs = 6` with
/// a nested `message AttrsEntry { string key = 1; int64 value = 2; }`
/// and no `map_entry` option): identical on the wire, so read as a map.
fn map_entry(f: &FieldDescriptor) -> Option<(FieldDescriptor, FieldDescriptor)> {
    let Kind::Message(entry) = f.kind() else {
        return None;
    };
    if f.is_map() {
        return Some((entry.map_entry_key_field(), entry.map_entry_value_field()));
    }
    let written_out = f.cardinality() == Cardinality::Repeated
        && entry.parent_message().as_ref() == Some(f.parent_message())
        && entry.name() == map_entry_name(f.name())
        && entry.fields().count() == 2
        && entry.child_messages().count() == 0;
    let key = entry.get_field(1).filter(|k| k.name() == "key")?;
    let value = entry.get_field(2).filter(|v| v.name() == "value")?;
    written_out.then_some((key, value))
}

/// The entry message name protoc gives a map field: `attrs` ->
/// `AttrsEntry`, `line_items` -> `LineItemsEntry`.
fn map_entry_name(field: &str) -> String {
    let mut name = String::with_capacity(field.len() + 5);
    let mut upper = true;
    for c in field.chars() {
        if c == '_' {
            upper = true;
        } else if upper {
            name.extend(c.to_uppercase());
            upper = false;
        } else {
            name.push(c);
        }
    }
    name + "Entry"
}

fn field(
    f: &FieldDescriptor,
    oneofs: &[String],
    within: &mut Vec<String>,
) -> Result<ProtoField, SchemaError> {
    if f.is_group() {
        return Err(SchemaError::Group {
            field: f.full_name().to_owned(),
        });
    }
    let (ty, label) = match map_entry(f) {
        Some((key, value)) => {
            let key = Scalar::of(&key.kind()).ok_or_else(|| SchemaError::MapKeyNotScalar {
                field: f.name().to_owned(),
            })?;
            (value_type(&value, within)?, Label::Map(key))
        }
        _ if f.cardinality() == Cardinality::Repeated => (value_type(f, within)?, Label::Repeated),
        _ => (
            value_type(f, within)?,
            Label::Singular {
                presence: f.supports_presence(),
            },
        ),
    };
    let oneof = f
        .containing_oneof()
        .filter(|o| !o.is_synthetic())
        .and_then(|o| oneofs.iter().position(|n| n == o.name()));
    Ok(ProtoField {
        name: f.name().to_owned(),
        number: f.number(),
        ty,
        label,
        oneof,
    })
}

/// The type of one value of field `f` (an element, for a repeated field).
fn value_type(f: &FieldDescriptor, within: &mut Vec<String>) -> Result<ProtoType, SchemaError> {
    Ok(match f.kind() {
        Kind::Enum(e) => ProtoType::Enum(Arc::new(enumeration(&e))),
        Kind::Message(m) => match well_known(m.full_name()) {
            Some(t) => t,
            None => ProtoType::Message(Arc::new(message(&m, within)?)),
        },
        scalar => ProtoType::Scalar(Scalar::of(&scalar).expect("neither message nor enum")),
    })
}

/// The well-known types read as something other than a plain message.
fn well_known(full_name: &str) -> Option<ProtoType> {
    let wrapped = match full_name {
        "google.protobuf.Timestamp" => return Some(ProtoType::Timestamp),
        "google.protobuf.DoubleValue" => Scalar::Double,
        "google.protobuf.FloatValue" => Scalar::Float,
        "google.protobuf.Int64Value" => Scalar::Int64,
        "google.protobuf.UInt64Value" => Scalar::Uint64,
        "google.protobuf.Int32Value" => Scalar::Int32,
        "google.protobuf.UInt32Value" => Scalar::Uint32,
        "google.protobuf.BoolValue" => Scalar::Bool,
        "google.protobuf.StringValue" => Scalar::String,
        "google.protobuf.BytesValue" => Scalar::Bytes,
        _ => return None,
    };
    Some(ProtoType::Wrapper(wrapped))
}

fn enumeration(e: &prost_reflect::EnumDescriptor) -> ProtoEnum {
    let mut values: Vec<(i32, String)> = e
        .values()
        .map(|v| (v.number(), v.name().to_owned()))
        .collect();
    // Stable: the first declared name of an aliased number stays first.
    values.sort_by_key(|v| v.0);
    values.dedup_by_key(|v| v.0);
    ProtoEnum {
        values,
        default: e.default_value().name().to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn top(text: &str, path: &[i32]) -> Result<ProtoMessage, SchemaError> {
        let schema = ProtoSchema::parse(text, &[])?;
        schema.message(path).expect("message")
    }

    fn types(m: &ProtoMessage) -> Vec<String> {
        m.fields
            .iter()
            .map(|f| match f.column_type() {
                Some(t) => format!("{} {t}", f.name),
                None => format!("{} -", f.name),
            })
            .collect()
    }

    #[test]
    fn scalars_well_known_types_and_nested_messages_map_to_columns() {
        let text = r#"
            syntax = "proto3";
            package shop;
            import "google/protobuf/timestamp.proto";
            import "google/protobuf/wrappers.proto";
            import "google/protobuf/duration.proto";
            import "google/protobuf/empty.proto";
            message Order {
              int32 a = 1; sint32 b = 2; sfixed32 c = 3; int64 d = 4; sint64 e = 5;
              sfixed64 f = 6; uint32 g = 7; fixed32 h = 8; uint64 i = 9; fixed64 j = 10;
              float k = 11; double l = 12; bool m = 13; string n = 14; bytes o = 15;
              enum Status { NEW = 0; PAID = 1; }
              Status status = 16;
              google.protobuf.Timestamp at = 17;
              google.protobuf.UInt64Value big = 18;
              google.protobuf.Duration took = 19;
              google.protobuf.Empty nothing = 20;
              repeated string tags = 21;
              map<int32, Line> lines = 22;
              message Line { string sku = 1; }
            }"#;
        let m = top(text, &[0]).unwrap();
        assert_eq!(m.name, "shop.Order");
        assert_eq!(
            types(&m),
            [
                "a int",
                "b int",
                "c int",
                "d long",
                "e long",
                "f long",
                "g long",
                "h long",
                "i decimal(20,0)",
                "j decimal(20,0)",
                "k float",
                "l double",
                "m boolean",
                "n string",
                "o binary",
                "status string",
                "at timestamptz",
                "big decimal(20,0)",
                "took struct<seconds: long, nanos: int>",
                "nothing -",
                "tags list<string>",
                "lines map<int, struct<sku: string>>",
            ]
        );
        let nested = top(text, &[0, 1]).unwrap();
        assert_eq!(nested.name, "shop.Order.Line");
    }

    #[test]
    fn presence_follows_the_syntax_and_oneofs_are_numbered() {
        let text = r#"
            syntax = "proto3";
            message M {
              int32 plain = 1;
              optional int32 opt = 2;
              oneof choice { string s = 3; int64 n = 4; }
              M2 msg = 5;
            }
            message M2 { int32 x = 1; }"#;
        let m = top(text, &[0]).unwrap();
        let presence: Vec<_> = m
            .fields
            .iter()
            .map(|f| (f.label.clone(), f.oneof))
            .collect();
        assert_eq!(
            presence,
            [
                (Label::Singular { presence: false }, None),
                (Label::Singular { presence: true }, None),
                (Label::Singular { presence: true }, Some(0)),
                (Label::Singular { presence: true }, Some(0)),
                (Label::Singular { presence: true }, None),
            ]
        );
        assert_eq!(m.oneofs, 1);
    }

    #[test]
    fn recursion_and_unknown_paths_are_refused() {
        let text =
            r#"syntax = "proto3"; message Node { Node next = 1; } message Ok { int32 x = 1; }"#;
        let e = top(text, &[0]).unwrap_err();
        assert!(
            e.to_string().contains("message Node contains itself"),
            "{e}"
        );
        assert_eq!(types(&top(text, &[1]).unwrap()), ["x int"]);
        let schema = ProtoSchema::parse(text, &[]).unwrap();
        assert!(schema.message_at(&[2]).is_none());
        assert!(schema.message_at(&[1, 0]).is_none());
        assert!(schema.message_at(&[-1]).is_none());
        assert!(ProtoSchema::parse("message {", &[]).is_err());
    }

    #[test]
    fn imports_come_from_references_as_text_or_base64_descriptors() {
        let address = r#"syntax = "proto3"; package shop; message Address { string city = 1; }"#;
        let text = r#"syntax = "proto3"; package shop; import "address.proto";
            message Customer { Address home = 1; }"#;
        let reference = |schema: String| SchemaReference {
            name: "address.proto".into(),
            subject: "address.proto".into(),
            version: 1,
            schema,
        };
        let schema = ProtoSchema::parse(text, &[reference(address.into())]).unwrap();
        let m = ProtoMessage::from_descriptor(&schema.message_at(&[0]).unwrap()).unwrap();
        assert_eq!(types(&m), ["home struct<city: string>"]);

        let descriptor = File::from_source("address.proto", address).unwrap();
        let encoded = base64::engine::general_purpose::STANDARD
            .encode(descriptor.file_descriptor_proto().encode_to_vec());
        let schema = ProtoSchema::parse(text, &[reference(encoded)]).unwrap();
        assert!(schema.message_at(&[0]).is_some());
        let e = ProtoSchema::parse(text, &[]).unwrap_err();
        assert!(e.to_string().contains("address.proto"), "{e}");
    }
}
