//! Avro values: schemas ([`schema`]), compiled plans ([`plan`]) and the
//! binary reader ([`read`]), written from the Avro 1.12 specification.

mod plan;
mod read;
mod schema;

pub(crate) use plan::{compile, skipper, FieldOp};
pub use read::parse_uuid;
pub(crate) use read::{read_fields, Bad, Cursor};
pub use schema::AvroType;
