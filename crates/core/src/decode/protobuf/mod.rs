//! Protobuf values: schemas ([`schema`]: `.proto` text compiled with
//! `protox`), compiled plans ([`plan`]) and the wire reader ([`read`]),
//! written from the Protobuf encoding specification (protobuf.dev).
//!
//! Rules (the type table of docs/src/how-to/schema-registry.md copies them):
//!
//! | Protobuf | column |
//! |---|---|
//! | `int32`, `sint32`, `sfixed32` | `int` |
//! | `int64`, `sint64`, `sfixed64` | `long` |
//! | `uint32`, `fixed32` | `long` |
//! | `uint64`, `fixed64` | `decimal(20,0)` (exact) |
//! | `float` / `double` | `float` / `double` |
//! | `bool` | `boolean` |
//! | `string` | `string` |
//! | `bytes` | `binary` |
//! | enum | `string`: the value's name; a number the enum does not define: the number as text |
//! | message | `struct` (fields in declaration order, all optional) |
//! | `repeated T` | `list<T>` |
//! | `map<K, V>` | `map<K, V>` (string keys `string`, integer and bool keys keep their type) |
//! | oneof members | optional fields; only the member sent last is set |
//! | `google.protobuf.Timestamp` | `timestamptz` (microseconds; nanoseconds below a microsecond dropped) |
//! | `google.protobuf.*Value` wrappers | the wrapped scalar's type, null when absent |
//! | `google.protobuf.Duration`, other well-known types | a plain message: `struct<seconds: long, nanos: int>` |
//! | a message without fields (`google.protobuf.Empty`) | no column (read past: Parquet has no empty struct) |
//! | a message that contains itself | the schema is refused (`UnsupportedSchema`, naming it) |
//! | proto2 groups | the schema is refused |
//!
//! - **Framing**: magic byte 0, the 4-byte schema id, then the message
//!   indexes: a zigzag varint count and that many zigzag varint indexes
//!   (the top-level message, then nested types; map entries count, as in
//!   the descriptor); a count of 0 (the single byte 0) means `[0]`. The
//!   plan is made per schema id and message.
//! - **Schema text**: `.proto` source, or a base64 serialized
//!   `FileDescriptorProto`; references are the imported files (by import
//!   path); `google/protobuf/*.proto` are built in.
//! - **Presence**: a proto3 field without `optional` that is not sent
//!   reads its default (0, `""`, false, the enum's first value, empty
//!   bytes): what every Protobuf reader sees. A field with presence (proto3
//!   `optional`, proto2 fields, messages, oneof members, wrappers) reads
//!   null when not sent. A repeated field or map not sent is empty, not
//!   null. A map entry without its key or value reads the default (a
//!   message value: the message with every field absent).
//! - **Wire**: unknown field numbers are read past (groups included);
//!   packed and unpacked repeated scalars are both read; a singular field
//!   sent more than once: the last value wins, and messages merge (every
//!   occurrence is read, in order). A map key sent twice (which encoders
//!   never do) is kept twice. A value with another wire type than its
//!   field's, a truncated value, a varint past 10 bytes, invalid UTF-8 in
//!   a string or message indexes naming no message make the message
//!   invalid (`BadBody`, naming the field as a dotted path).
//! - **Keys**: a `_kafka_key.<field>` dedup key reads a top-level scalar
//!   field of a Protobuf message key the same way (message indexes, then
//!   the field; an absent proto3 scalar is its default, an absent field
//!   with presence a null key).
//! - **Discover**: a schema's columns are its first message's (`[0]`).
//! - **Evolution**: as for Avro (see `framed`): a new field asks for a
//!   column (typed), `int32` -> `int64` widens the column, a change
//!   Iceberg cannot follow is refused naming both schema ids.

mod append;
mod key;
mod plan;
mod read;
mod schema;

pub(crate) use key::ProtoKey;
pub(crate) use plan::{compile_top, MessageOp};
pub(crate) use read::Scratch;
pub use schema::{ProtoField, ProtoMessage, ProtoSchema};
