//! The table columns topicberg writes, as Iceberg and Arrow schemas.
//!
//! The caller describes a table as a list of [`Column`]s; [`iceberg_schema`]
//! turns it into the Iceberg schema sent to the catalog, and [`arrow_schema()`]
//! into the Arrow schema the decoder builds its arrays in: each Arrow field
//! carries its Iceberg field id under `PARQUET:field_id`, which the Parquet
//! writer copies into the file so that engines match columns by id.
//!
//! A catalog may renumber field ids when it creates a table (Java catalogs
//! assign fresh ids in field order), so writes always use the schema of the
//! loaded table ([`crate::TableHandle::arrow_schema`]), never the requested one.

use std::sync::Arc;

use arrow_schema::{DataType, SchemaRef as ArrowSchemaRef};
use iceberg::spec::{ListType, MapType, NestedField, PrimitiveType, Schema, StructType, Type};
/// The Arrow field metadata key that holds an Iceberg field id.
pub use parquet::arrow::PARQUET_FIELD_ID_META_KEY;
use topicberg_core::columns::{MapFields, NestedField as NestedColumn};

use crate::error::{IcebergError, IcebergErrorKind};

/// The time zone Iceberg `timestamptz` columns carry in Arrow.
pub const UTC: &str = "+00:00";

/// The column types topicberg writes: the core column model's
/// ([`topicberg_core::ColumnType`]), stored as the Iceberg types below.
pub use topicberg_core::ColumnType;

/// The field doc that marks a `string` column as holding JSON text, so a
/// reloaded table still knows the column takes any JSON value.
pub const JSON_COLUMN_DOC: &str = "JSON text (topicberg)";

/// The Iceberg type that stores a column type (`json` is a `string` whose
/// field doc is [`JSON_COLUMN_DOC`]; nested fields keep their ids).
pub fn iceberg_type(ty: &ColumnType) -> Type {
    let nested = |f: &NestedColumn| {
        let field = NestedField::new(f.field_id, &f.name, iceberg_type(&f.ty), f.required);
        Arc::new(if f.ty == ColumnType::Json {
            field.with_doc(JSON_COLUMN_DOC)
        } else {
            field
        })
    };
    Type::Primitive(match ty {
        ColumnType::Int => PrimitiveType::Int,
        ColumnType::Long => PrimitiveType::Long,
        ColumnType::Double => PrimitiveType::Double,
        ColumnType::Float => PrimitiveType::Float,
        ColumnType::Boolean => PrimitiveType::Boolean,
        ColumnType::String | ColumnType::Json => PrimitiveType::String,
        ColumnType::TimestampTz => PrimitiveType::Timestamptz,
        ColumnType::Decimal { precision, scale } => PrimitiveType::Decimal {
            precision: u32::from(*precision),
            scale: u32::from(*scale),
        },
        ColumnType::Date => PrimitiveType::Date,
        ColumnType::Time => PrimitiveType::Time,
        ColumnType::Timestamp => PrimitiveType::Timestamp,
        ColumnType::Uuid => PrimitiveType::Uuid,
        ColumnType::Binary => PrimitiveType::Binary,
        ColumnType::Struct(fields) => {
            return Type::Struct(StructType::new(fields.iter().map(nested).collect()))
        }
        ColumnType::List(element) => return Type::List(ListType::new(nested(element))),
        ColumnType::Map(kv) => return Type::Map(MapType::new(nested(&kv.key), nested(&kv.value))),
    })
}

/// The Arrow type arrays of a column are built in for the table
/// (`timestamptz` in the zone [`UTC`]; nested fields with their ids).
pub fn arrow_type(ty: &ColumnType) -> DataType {
    ty.arrow_type()
}

/// The column type of an Iceberg type (a `string` whose doc is
/// [`JSON_COLUMN_DOC`] reads as [`ColumnType::Json`]), or `None` for one
/// topicberg does not write (`fixed`, nanosecond timestamps).
fn column_type_of(t: &Type, doc: Option<&str>) -> Option<ColumnType> {
    let nested = |f: &NestedField| -> Option<NestedColumn> {
        Some(NestedColumn {
            field_id: f.id,
            name: f.name.clone(),
            ty: column_type_of(&f.field_type, f.doc.as_deref())?,
            required: f.required,
        })
    };
    Some(match t {
        Type::Primitive(p) => match p {
            PrimitiveType::Int => ColumnType::Int,
            PrimitiveType::Long => ColumnType::Long,
            PrimitiveType::Double => ColumnType::Double,
            PrimitiveType::Float => ColumnType::Float,
            PrimitiveType::Boolean => ColumnType::Boolean,
            PrimitiveType::String if doc == Some(JSON_COLUMN_DOC) => ColumnType::Json,
            PrimitiveType::String => ColumnType::String,
            PrimitiveType::Timestamptz => ColumnType::TimestampTz,
            PrimitiveType::Decimal { precision, scale } => ColumnType::Decimal {
                precision: u8::try_from(*precision).ok()?,
                scale: u8::try_from(*scale).ok()?,
            },
            PrimitiveType::Date => ColumnType::Date,
            PrimitiveType::Time => ColumnType::Time,
            PrimitiveType::Timestamp => ColumnType::Timestamp,
            PrimitiveType::Uuid => ColumnType::Uuid,
            PrimitiveType::Binary => ColumnType::Binary,
            _ => return None,
        },
        Type::Struct(s) => ColumnType::Struct(
            s.fields()
                .iter()
                .map(|f| nested(f))
                .collect::<Option<Vec<_>>>()?
                .into(),
        ),
        Type::List(l) => ColumnType::List(Arc::new(nested(&l.element_field)?)),
        Type::Map(m) => ColumnType::Map(Arc::new(MapFields {
            key: nested(&m.key_field)?,
            value: nested(&m.value_field)?,
        })),
    })
}

/// One top-level column of a table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Column {
    /// The column name.
    pub name: String,
    /// The Iceberg field id (unique, > 0).
    pub field_id: i32,
    /// The column type.
    pub column_type: ColumnType,
    /// Whether the column may not hold nulls (topicberg writes `false`).
    pub required: bool,
}

impl Column {
    /// An optional (nullable) column.
    pub fn optional(name: impl Into<String>, field_id: i32, column_type: ColumnType) -> Self {
        Self {
            name: name.into(),
            field_id,
            column_type,
            required: false,
        }
    }
}

/// A table column of the core column model, as an optional column.
impl From<&topicberg_core::Column> for Column {
    fn from(c: &topicberg_core::Column) -> Self {
        Column::optional(c.name.clone(), c.field_id, c.ty.clone())
    }
}

/// A table column in the core column model (which has no `required`).
impl From<Column> for topicberg_core::Column {
    fn from(c: Column) -> Self {
        topicberg_core::Column::new(c.field_id, c.name, c.column_type)
    }
}

/// The Iceberg schema (schema id 0) of a column list.
pub fn iceberg_schema(columns: &[Column]) -> Result<Schema, IcebergError> {
    let fields = columns.iter().map(|c| {
        let field = NestedField::new(
            c.field_id,
            &c.name,
            iceberg_type(&c.column_type),
            c.required,
        );
        Arc::new(if c.column_type == ColumnType::Json {
            field.with_doc(JSON_COLUMN_DOC)
        } else {
            field
        })
    });
    Schema::builder()
        .with_schema_id(0)
        .with_fields(fields)
        .build()
        .map_err(|e| {
            IcebergError::new(
                IcebergErrorKind::Config,
                "building the Iceberg schema",
                e.to_string(),
            )
            .with_source(e)
        })
}

/// The columns of an Iceberg schema, if every top-level field has a type
/// topicberg writes.
pub fn columns_of(schema: &Schema) -> Result<Vec<Column>, IcebergError> {
    schema
        .as_struct()
        .fields()
        .iter()
        .map(|f| {
            let column_type = column_type_of(&f.field_type, f.doc.as_deref()).ok_or_else(|| {
                IcebergError::new(
                    IcebergErrorKind::Data,
                    "reading the table schema",
                    format!(
                        "column {} has type {}, which topicberg does not write",
                        f.name, f.field_type
                    ),
                )
            })?;
            Ok(Column {
                name: f.name.clone(),
                field_id: f.id,
                column_type,
                required: f.required,
            })
        })
        .collect()
}

/// The Arrow schema of an Iceberg schema, each field with its field id in
/// `PARQUET:field_id` metadata: the `iceberg` crate's own conversion (the one
/// its Parquet writer uses), which for topicberg's types gives
/// [`arrow_type`]. Works for any Iceberg schema, so tables created by
/// other engines load too.
pub fn arrow_schema(schema: &Schema) -> Result<ArrowSchemaRef, IcebergError> {
    iceberg::arrow::schema_to_arrow_schema(schema)
        .map(Arc::new)
        .map_err(|e| {
            IcebergError::new(
                IcebergErrorKind::Data,
                "converting the table schema to Arrow",
                e.message().to_string(),
            )
            .with_source(e)
        })
}

/// Differences between the columns a caller asked for and a table's schema,
/// compared by position, name, type and nullability (not field id: catalogs
/// may renumber); empty when they agree.
pub fn schema_differences(wanted: &[Column], table: &Schema) -> Vec<String> {
    let have = match columns_of(table) {
        Ok(have) => have,
        Err(e) => return vec![e.detail],
    };
    let mut out = Vec::new();
    for i in 0..wanted.len().max(have.len()) {
        match (wanted.get(i), have.get(i)) {
            (Some(w), Some(h)) => {
                let same_type =
                    w.column_type.without_field_ids() == h.column_type.without_field_ids();
                if w.name != h.name || !same_type || w.required != h.required {
                    out.push(format!(
                        "column {i}: wanted {} {:?}{}, table has {} {:?}{}",
                        w.name,
                        w.column_type,
                        if w.required { " required" } else { "" },
                        h.name,
                        h.column_type,
                        if h.required { " required" } else { "" },
                    ));
                }
            }
            (Some(w), None) => {
                out.push(format!("column {i}: {} is missing from the table", w.name))
            }
            (None, Some(h)) => out.push(format!(
                "column {i}: the table has an extra column {}",
                h.name
            )),
            (None, None) => {}
        }
    }
    out
}

#[cfg(test)]
mod json_doc_tests {
    use super::*;

    #[test]
    fn json_columns_survive_a_round_trip_through_the_iceberg_schema() {
        let columns = vec![
            Column::optional("payload", 1, ColumnType::Json),
            Column::optional("name", 2, ColumnType::String),
        ];
        let schema = iceberg_schema(&columns).unwrap();
        let json = serde_json::to_string(&schema).unwrap();
        let reloaded: Schema = serde_json::from_str(&json).unwrap();
        assert_eq!(columns_of(&reloaded).unwrap(), columns);
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use arrow_schema::{Field, Schema as ArrowSchema};

    use super::*;

    fn columns() -> Vec<Column> {
        vec![
            Column::optional("id", 1, ColumnType::Long),
            Column::optional("n", 2, ColumnType::Int),
            Column::optional("amount", 3, ColumnType::Double),
            Column::optional("name", 4, ColumnType::String),
            Column::optional("at", 5, ColumnType::TimestampTz),
            Column::optional("flag", 6, ColumnType::Boolean),
        ]
    }

    #[test]
    fn iceberg_schema_keeps_ids_and_types_and_serializes_as_spec_json() {
        let schema = iceberg_schema(&columns()).unwrap();
        let json = serde_json::to_value(&schema).unwrap();
        assert_eq!(json["type"], "struct");
        assert_eq!(json["fields"][4]["type"], "timestamptz");
        assert_eq!(json["fields"][4]["id"], 5);
        assert_eq!(json["fields"][0]["required"], false);
        assert_eq!(columns_of(&schema).unwrap(), columns());
    }

    #[test]
    fn arrow_schema_carries_field_ids_and_utc_micros() {
        let schema = iceberg_schema(&columns()).unwrap();
        let arrow = arrow_schema(&schema).unwrap();
        let at = arrow.field_with_name("at").unwrap();
        assert_eq!(
            at.data_type(),
            &DataType::Timestamp(arrow_schema::TimeUnit::Microsecond, Some("+00:00".into()))
        );
        assert!(at.is_nullable());
        assert_eq!(at.metadata()[PARQUET_FIELD_ID_META_KEY], "5");
        // Each field is arrow_type() with the field id, nullable unless required.
        let ours: Vec<Field> = columns()
            .iter()
            .map(|c| {
                Field::new(&c.name, arrow_type(&c.column_type), !c.required).with_metadata(
                    HashMap::from([(
                        PARQUET_FIELD_ID_META_KEY.to_string(),
                        c.field_id.to_string(),
                    )]),
                )
            })
            .collect();
        assert_eq!(arrow.as_ref(), &ArrowSchema::new(ours));
    }

    #[test]
    fn differences_name_the_column() {
        let schema = iceberg_schema(&columns()).unwrap();
        assert!(schema_differences(&columns(), &schema).is_empty());
        let mut wanted = columns();
        wanted[1].column_type = ColumnType::Long;
        wanted.push(Column::optional("extra", 7, ColumnType::String));
        let diff = schema_differences(&wanted, &schema);
        assert_eq!(diff.len(), 2, "{diff:?}");
        assert!(diff[0].contains("column 1"), "{diff:?}");
        assert!(diff[1].contains("extra"), "{diff:?}");
    }
}
