//! The column model of a topic's table: payload columns from the JSON
//! values, then the metadata columns every row carries.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use arrow_schema::{DataType, Field, Schema, TimeUnit};

/// The Parquet field metadata key that carries an Iceberg field id.
pub const PARQUET_FIELD_ID_KEY: &str = "PARQUET:field_id";

/// The time zone of every `timestamptz` column in Arrow (the one the
/// `iceberg` crate gives, so batches match the table without a cast).
pub const UTC: &str = "+00:00";

/// The type of a column, as inferred from JSON, as a registry schema
/// declares it, and as stored.
///
/// JSON inference produces the first eight (see [`ColumnType::JSON`]);
/// Avro and Protobuf schemas give the others too (see
/// [`crate::decode::registry`]); tables made elsewhere may have any.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ColumnType {
    /// 64-bit integer (Iceberg `long`).
    Long,
    /// 32-bit integer (Iceberg `int`): `_kafka_partition`, registry
    /// schemas' 32-bit integers and columns of tables made elsewhere; JSON
    /// inference never produces it.
    Int,
    /// 64-bit float (Iceberg `double`).
    Double,
    /// 32-bit float (Iceberg `float`); JSON inference never produces it.
    Float,
    /// Iceberg `boolean`.
    Boolean,
    /// UTF-8 text (Iceberg `string`).
    String,
    /// Microseconds since the epoch, UTC (Iceberg `timestamptz`).
    TimestampTz,
    /// Any JSON value stored as its JSON text in a string column: nested
    /// objects and arrays, and fields whose scalar types disagree.
    Json,
    /// A fixed-point decimal (Iceberg `decimal(P,S)`, precision 1..=38).
    Decimal {
        /// Total digits.
        precision: u8,
        /// Digits after the point.
        scale: u8,
    },
    /// Days since 1970-01-01 (Iceberg `date`).
    Date,
    /// Microseconds since midnight (Iceberg `time`).
    Time,
    /// Microseconds since the epoch, no zone (Iceberg `timestamp`).
    Timestamp,
    /// A 16-byte UUID (Iceberg `uuid`).
    Uuid,
    /// Bytes (Iceberg `binary`; Avro `fixed` too).
    Binary,
    /// Named fields (Iceberg `struct`).
    Struct(Arc<[NestedField]>),
    /// A list of the element field's type (Iceberg `list`).
    List(Arc<NestedField>),
    /// Keys to values (Iceberg `map`; keys are required).
    Map(Arc<MapFields>),
}

/// A field inside a nested type: a struct's field, a list's element, a
/// map's key or value. Every one has its own Iceberg field id.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct NestedField {
    /// The Iceberg field id (unique in the table).
    pub field_id: i32,
    /// The name: the struct field's, or `element`, `key`, `value`.
    pub name: String,
    /// Its type.
    pub ty: ColumnType,
    /// Whether it may not be null (only map keys are, in tables
    /// topicberg makes).
    pub required: bool,
}

impl NestedField {
    /// An optional field.
    pub fn optional(field_id: i32, name: impl Into<String>, ty: ColumnType) -> Self {
        Self {
            field_id,
            name: name.into(),
            ty,
            required: false,
        }
    }
}

/// A map's key and value fields.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MapFields {
    /// The key (named `key`, required).
    pub key: NestedField,
    /// The value (named `value`).
    pub value: NestedField,
}

/// The Arrow name of a list's element field (Iceberg's).
pub const LIST_ELEMENT: &str = "element";
/// The Arrow name of a map's entries field (Iceberg's).
pub const MAP_ENTRIES: &str = "key_value";

impl ColumnType {
    /// The types JSON inference and the JSON decoder's widening deal in.
    pub const JSON: [ColumnType; 8] = [
        ColumnType::Long,
        ColumnType::Int,
        ColumnType::Double,
        ColumnType::Float,
        ColumnType::Boolean,
        ColumnType::String,
        ColumnType::TimestampTz,
        ColumnType::Json,
    ];

    /// The name used in messages and reports: `long`, `int`, `double`,
    /// `boolean`, `string`, `timestamptz`, `json`, `decimal(10,2)`, `date`,
    /// ..., `struct<a: long>`, `list<string>`, `map<string, long>`.
    /// [`FromStr`] reads back the primitive ones.
    pub fn name(&self) -> String {
        self.to_string()
    }

    /// The Iceberg type that stores it (`json` is a `string`), as the
    /// REST schema JSON spells a primitive; nested types as [`Self::name`].
    pub fn iceberg_type(&self) -> String {
        match self {
            ColumnType::Json => "string".to_owned(),
            other => other.name(),
        }
    }

    /// Whether it is a struct, list or map.
    pub fn is_nested(&self) -> bool {
        matches!(
            self,
            ColumnType::Struct(_) | ColumnType::List(_) | ColumnType::Map(_)
        )
    }

    /// The Arrow type of its column (nested fields carry their field ids
    /// in `PARQUET:field_id`, named as Iceberg names them).
    pub fn arrow_type(&self) -> DataType {
        match self {
            ColumnType::Long => DataType::Int64,
            ColumnType::Int => DataType::Int32,
            ColumnType::Double => DataType::Float64,
            ColumnType::Float => DataType::Float32,
            ColumnType::Boolean => DataType::Boolean,
            ColumnType::String | ColumnType::Json => DataType::Utf8,
            ColumnType::TimestampTz => DataType::Timestamp(TimeUnit::Microsecond, Some(UTC.into())),
            ColumnType::Decimal { precision, scale } => {
                DataType::Decimal128(*precision, *scale as i8)
            }
            ColumnType::Date => DataType::Date32,
            ColumnType::Time => DataType::Time64(TimeUnit::Microsecond),
            ColumnType::Timestamp => DataType::Timestamp(TimeUnit::Microsecond, None),
            ColumnType::Uuid => DataType::FixedSizeBinary(16),
            ColumnType::Binary => DataType::LargeBinary,
            ColumnType::Struct(fields) => {
                DataType::Struct(fields.iter().map(NestedField::arrow_field).collect())
            }
            ColumnType::List(element) => DataType::List(Arc::new(element.arrow_field())),
            ColumnType::Map(kv) => DataType::Map(
                Arc::new(Field::new(
                    MAP_ENTRIES,
                    DataType::Struct(vec![kv.key.arrow_field(), kv.value.arrow_field()].into()),
                    false,
                )),
                false,
            ),
        }
    }

    /// The highest field id inside it (0 for a primitive type).
    pub fn max_nested_field_id(&self) -> i32 {
        self.nested_fields()
            .map(|f| f.field_id.max(f.ty.max_nested_field_id()))
            .max()
            .unwrap_or(0)
    }

    /// The type with every nested field whose id is 0 (not assigned yet:
    /// a type read from a registry schema) numbered from `next_id` on,
    /// depth first; assigned ids are kept.
    pub fn with_field_ids(&self, next_id: &mut i32) -> ColumnType {
        let mut number = |f: &NestedField| {
            let field_id = if f.field_id == 0 {
                *next_id += 1;
                *next_id - 1
            } else {
                f.field_id
            };
            NestedField {
                field_id,
                name: f.name.clone(),
                ty: f.ty.with_field_ids(next_id),
                required: f.required,
            }
        };
        match self {
            ColumnType::Struct(fields) => {
                ColumnType::Struct(fields.iter().map(&mut number).collect())
            }
            ColumnType::List(element) => ColumnType::List(Arc::new(number(element))),
            ColumnType::Map(kv) => {
                let key = number(&kv.key);
                let value = number(&kv.value);
                ColumnType::Map(Arc::new(MapFields { key, value }))
            }
            other => other.clone(),
        }
    }

    /// The type with every nested field id 0: what two types that differ
    /// only in how a catalog numbered their fields have in common.
    pub fn without_field_ids(&self) -> ColumnType {
        let cleared = |f: &NestedField| NestedField {
            field_id: 0,
            ty: f.ty.without_field_ids(),
            ..f.clone()
        };
        match self {
            ColumnType::Struct(fields) => ColumnType::Struct(fields.iter().map(cleared).collect()),
            ColumnType::List(element) => ColumnType::List(Arc::new(cleared(element))),
            ColumnType::Map(kv) => ColumnType::Map(Arc::new(MapFields {
                key: cleared(&kv.key),
                value: cleared(&kv.value),
            })),
            other => other.clone(),
        }
    }

    /// Its direct nested fields (struct fields, list element, map key and
    /// value).
    pub fn nested_fields(&self) -> Box<dyn Iterator<Item = &NestedField> + '_> {
        match self {
            ColumnType::Struct(fields) => Box::new(fields.iter()),
            ColumnType::List(element) => Box::new(std::iter::once(element.as_ref())),
            ColumnType::Map(kv) => Box::new([&kv.key, &kv.value].into_iter()),
            _ => Box::new(std::iter::empty()),
        }
    }
}

impl NestedField {
    /// Its Arrow field: nullable unless required, with its field id.
    pub fn arrow_field(&self) -> Field {
        Field::new(&self.name, self.ty.arrow_type(), !self.required).with_metadata(HashMap::from([
            (PARQUET_FIELD_ID_KEY.to_owned(), self.field_id.to_string()),
        ]))
    }
}

impl fmt::Display for ColumnType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            ColumnType::Long => "long",
            ColumnType::Int => "int",
            ColumnType::Double => "double",
            ColumnType::Float => "float",
            ColumnType::Boolean => "boolean",
            ColumnType::String => "string",
            ColumnType::TimestampTz => "timestamptz",
            ColumnType::Json => "json",
            ColumnType::Decimal { precision, scale } => {
                return write!(f, "decimal({precision},{scale})")
            }
            ColumnType::Date => "date",
            ColumnType::Time => "time",
            ColumnType::Timestamp => "timestamp",
            ColumnType::Uuid => "uuid",
            ColumnType::Binary => "binary",
            ColumnType::Struct(fields) => {
                f.write_str("struct<")?;
                for (i, field) in fields.iter().enumerate() {
                    let sep = if i == 0 { "" } else { ", " };
                    write!(f, "{sep}{}: {}", field.name, field.ty)?;
                }
                return f.write_str(">");
            }
            ColumnType::List(element) => return write!(f, "list<{}>", element.ty),
            ColumnType::Map(kv) => return write!(f, "map<{}, {}>", kv.key.ty, kv.value.ty),
        };
        f.write_str(name)
    }
}

/// The text is not one of the primitive names [`ColumnType::name`] returns.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown column type {0:?} (expected long, int, double, float, boolean, string, timestamptz, json, decimal(P,S), date, time, timestamp, uuid or binary)"
)]
pub struct UnknownColumnType(pub String);

impl FromStr for ColumnType {
    type Err = UnknownColumnType;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let unknown = || UnknownColumnType(s.to_owned());
        if let Some(args) = s.strip_prefix("decimal(").and_then(|r| r.strip_suffix(')')) {
            let (p, sc) = args.split_once(',').ok_or_else(unknown)?;
            let precision: u8 = p.trim().parse().map_err(|_| unknown())?;
            let scale: u8 = sc.trim().parse().map_err(|_| unknown())?;
            if precision == 0 || precision > 38 || scale > precision {
                return Err(unknown());
            }
            return Ok(ColumnType::Decimal { precision, scale });
        }
        let extra = [
            ColumnType::Date,
            ColumnType::Time,
            ColumnType::Timestamp,
            ColumnType::Uuid,
            ColumnType::Binary,
        ];
        ColumnType::JSON
            .into_iter()
            .chain(extra)
            .find(|t| t.name() == s)
            .ok_or_else(unknown)
    }
}

/// One column of a table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Column {
    /// The Iceberg field id (positive, unique in the table).
    pub field_id: i32,
    /// The column name, exactly as the field is named in the messages.
    pub name: String,
    /// Its type.
    pub ty: ColumnType,
}

impl Column {
    /// A column.
    pub fn new(field_id: i32, name: impl Into<String>, ty: ColumnType) -> Self {
        Self {
            field_id,
            name: name.into(),
            ty,
        }
    }
}

/// `_kafka_key`: the message key, standard base64 with padding; null key: null.
pub const KAFKA_KEY: &str = "_kafka_key";
/// `_kafka_partition`: the partition the message was read from.
pub const KAFKA_PARTITION: &str = "_kafka_partition";
/// `_kafka_offset`: the message's offset in its partition.
pub const KAFKA_OFFSET: &str = "_kafka_offset";
/// `_kafka_timestamp`: the message timestamp.
pub const KAFKA_TIMESTAMP: &str = "_kafka_timestamp";
/// `_olake_id`: see [`crate::append_olake_id`] and [`crate::upsert_olake_id`].
pub const OLAKE_ID: &str = "_olake_id";
/// `_op_type`: `c` in append mode.
pub const OP_TYPE: &str = "_op_type";
/// `_olake_timestamp`: when the row was written (one value per batch).
pub const OLAKE_TIMESTAMP: &str = "_olake_timestamp";
/// `_cdc_timestamp`: the message timestamp.
pub const CDC_TIMESTAMP: &str = "_cdc_timestamp";
/// `_cdc_lsn`: a change event's place in the source's log (PostgreSQL's
/// `source.lsn`), which orders one key's changes across partitions.
pub const CDC_LSN: &str = "_cdc_lsn";

/// `_kafka_headers`: the message's Kafka headers (`kafka_headers = true`),
/// see [`headers_column_type`].
pub const KAFKA_HEADERS: &str = "_kafka_headers";

/// The type of `_kafka_headers`: a list of `{key: string, value: binary}`
/// structs, in the message's order, repeated keys kept (field ids 0, to be
/// numbered where the column is added).
pub fn headers_column_type() -> ColumnType {
    let header = ColumnType::Struct(Arc::from([
        NestedField::optional(0, "key", ColumnType::String),
        NestedField::optional(0, "value", ColumnType::Binary),
    ]));
    ColumnType::List(Arc::new(NestedField::optional(0, LIST_ELEMENT, header)))
}

/// `_cdc_op`: a change event's operation: `c` (insert), `r` (a row of the
/// initial snapshot) or `u` (update); null when the event does not say.
pub const CDC_OP: &str = "_cdc_op";

/// The metadata columns only a table of change events (`change_events`)
/// has, after [`METADATA_COLUMNS`].
pub const CHANGE_COLUMNS: [(&str, ColumnType); 2] =
    [(CDC_LSN, ColumnType::Long), (CDC_OP, ColumnType::String)];

/// The metadata columns, in the order a new table lists them after the
/// payload, with their types. Their names and types match the product
/// pages users come from and never change.
pub const METADATA_COLUMNS: [(&str, ColumnType); 8] = [
    (KAFKA_KEY, ColumnType::String),
    (KAFKA_PARTITION, ColumnType::Int),
    (KAFKA_OFFSET, ColumnType::Long),
    (KAFKA_TIMESTAMP, ColumnType::TimestampTz),
    (OLAKE_ID, ColumnType::String),
    (OP_TYPE, ColumnType::String),
    (OLAKE_TIMESTAMP, ColumnType::TimestampTz),
    (CDC_TIMESTAMP, ColumnType::TimestampTz),
];

/// The type of the metadata column `name`, or `None` for a payload name.
pub fn metadata_column_type(name: &str) -> Option<ColumnType> {
    if name == KAFKA_HEADERS {
        return Some(headers_column_type());
    }
    METADATA_COLUMNS
        .iter()
        .chain(&CHANGE_COLUMNS)
        .find(|(n, _)| *n == name)
        .map(|(_, t)| t.clone())
}

/// A column list that cannot describe a table.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ColumnsError {
    /// Two columns share a name.
    #[error("column {0:?} appears twice")]
    DuplicateName(String),
    /// Two columns share a field id.
    #[error("field id {0} is used by two columns")]
    DuplicateFieldId(i32),
    /// A field id is zero or negative.
    #[error("column {name:?} has field id {field_id}; field ids must be positive")]
    InvalidFieldId { name: String, field_id: i32 },
    /// A metadata column name with the wrong type.
    #[error("metadata column {name:?} must be {expected}, not {found}")]
    MetadataType {
        name: String,
        expected: ColumnType,
        found: ColumnType,
    },
    /// A new payload column uses a metadata column's name.
    #[error("{0:?} is a metadata column name and cannot be a payload column")]
    ReservedName(String),
}

/// Appends the columns of `wanted` that `columns` lacks, with field ids
/// from `next_id` on.
fn push_missing<const N: usize>(
    columns: &mut Vec<Column>,
    mut next_id: i32,
    wanted: [(&str, ColumnType); N],
) {
    for (name, ty) in wanted {
        if !columns.iter().any(|c| c.name == name) {
            columns.push(Column::new(next_id, name, ty));
            next_id += 1;
        }
    }
}

/// The ordered columns of a table.
///
/// A new table lists the payload columns first (in first-seen order), then
/// [`METADATA_COLUMNS`]. A table that evolved lists columns in whatever
/// order its Iceberg schema has; the decoder finds metadata columns by name
/// and fills any that are present.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableColumns {
    columns: Vec<Column>,
}

impl TableColumns {
    /// Checks and wraps a column list: names and field ids unique, field ids
    /// positive, metadata column names with their metadata types.
    pub fn new(columns: Vec<Column>) -> Result<Self, ColumnsError> {
        let mut names = HashSet::with_capacity(columns.len());
        let mut ids = HashSet::with_capacity(columns.len());
        for c in &columns {
            if c.field_id <= 0 {
                return Err(ColumnsError::InvalidFieldId {
                    name: c.name.clone(),
                    field_id: c.field_id,
                });
            }
            if !names.insert(c.name.as_str()) {
                return Err(ColumnsError::DuplicateName(c.name.clone()));
            }
            if !ids.insert(c.field_id) {
                return Err(ColumnsError::DuplicateFieldId(c.field_id));
            }
            if let Some(expected) = metadata_column_type(&c.name) {
                if expected != c.ty.without_field_ids() {
                    return Err(ColumnsError::MetadataType {
                        name: c.name.clone(),
                        expected,
                        found: c.ty.clone(),
                    });
                }
            }
        }
        Ok(Self { columns })
    }

    /// The columns of a new table: `payload` with field ids 1, 2, ... in
    /// order, then the metadata columns with the next ids.
    pub fn for_new_table(payload: &[(String, ColumnType)]) -> Result<Self, ColumnsError> {
        Self::new(Vec::new())?.with_added(payload, true)
    }

    /// These columns plus `added` payload columns at the end, with field ids
    /// after the highest in use; with `metadata`, then any metadata columns
    /// still missing. For a table whose ids the catalog assigns, build the
    /// list with [`TableColumns::new`] instead.
    pub fn with_added(
        &self,
        added: &[(String, ColumnType)],
        metadata: bool,
    ) -> Result<Self, ColumnsError> {
        let mut columns = self.columns.clone();
        let mut next_id = self.max_field_id() + 1;
        for (name, ty) in added {
            if metadata_column_type(name).is_some() {
                return Err(ColumnsError::ReservedName(name.clone()));
            }
            let id = next_id;
            next_id += 1;
            columns.push(Column::new(
                id,
                name.clone(),
                ty.with_field_ids(&mut next_id),
            ));
        }
        if metadata {
            push_missing(&mut columns, next_id, METADATA_COLUMNS);
        }
        Self::new(columns)
    }

    /// These columns plus any [`CHANGE_COLUMNS`] still missing, with
    /// field ids after the highest in use: a change-event table's.
    pub fn with_change_columns(&self) -> Result<Self, ColumnsError> {
        let mut columns = self.columns.clone();
        push_missing(&mut columns, self.max_field_id() + 1, CHANGE_COLUMNS);
        Self::new(columns)
    }

    /// These columns plus the metadata column `name` (of
    /// [`metadata_column_type`]) if missing, with field ids after the
    /// highest in use (or after `last_column_id` when higher). A name that
    /// is not a metadata column's is left out.
    pub fn with_metadata_column(
        &self,
        name: &str,
        last_column_id: i32,
    ) -> Result<Self, ColumnsError> {
        let mut columns = self.columns.clone();
        if let Some(ty) = metadata_column_type(name).filter(|_| self.get(name).is_none()) {
            let mut next_id = self.max_field_id().max(last_column_id) + 1;
            let id = next_id;
            next_id += 1;
            columns.push(Column::new(id, name, ty.with_field_ids(&mut next_id)));
        }
        Self::new(columns)
    }

    /// All columns, in table order.
    pub fn columns(&self) -> &[Column] {
        &self.columns
    }

    /// The column called `name`.
    pub fn get(&self, name: &str) -> Option<&Column> {
        self.columns.iter().find(|c| c.name == name)
    }

    /// The payload columns (every column that is not a metadata column).
    pub fn payload(&self) -> impl Iterator<Item = &Column> {
        self.columns
            .iter()
            .filter(|c| metadata_column_type(&c.name).is_none())
    }

    /// The number of columns.
    pub fn len(&self) -> usize {
        self.columns.len()
    }

    /// Whether there are no columns.
    pub fn is_empty(&self) -> bool {
        self.columns.is_empty()
    }

    /// The highest field id, nested fields included; 0 when empty.
    pub fn max_field_id(&self) -> i32 {
        self.columns
            .iter()
            .map(|c| c.field_id.max(c.ty.max_nested_field_id()))
            .max()
            .unwrap_or(0)
    }

    /// The Arrow schema of the batches the decoder produces: every field
    /// nullable, with its field id in the `PARQUET:field_id` metadata.
    pub fn arrow_schema(&self) -> Schema {
        Schema::new(
            self.columns
                .iter()
                .map(|c| {
                    Field::new(&c.name, c.ty.arrow_type(), true).with_metadata(HashMap::from([(
                        PARQUET_FIELD_ID_KEY.to_owned(),
                        c.field_id.to_string(),
                    )]))
                })
                .collect::<Vec<_>>(),
        )
    }
}

/// The values of a string column, in any of Arrow's string layouts (what
/// Parquet readers hand back varies), `None` for nulls; `None` when the
/// column does not hold strings.
pub fn str_values(column: &dyn arrow_array::Array) -> Option<Vec<Option<&str>>> {
    use arrow_array::cast::AsArray;
    Some(match column.data_type() {
        DataType::Utf8 => column.as_string::<i32>().iter().collect(),
        DataType::LargeUtf8 => column.as_string::<i64>().iter().collect(),
        DataType::Utf8View => column.as_string_view().iter().collect(),
        _ => return None,
    })
}

/// [`str_values`] as owned text.
pub fn string_values(column: &dyn arrow_array::Array) -> Option<Vec<Option<String>>> {
    let values = str_values(column)?;
    Some(values.into_iter().map(|v| v.map(str::to_string)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn orders_payload() -> Vec<(String, ColumnType)> {
        [
            ("id", ColumnType::Long),
            ("amount", ColumnType::Double),
            ("created_at", ColumnType::TimestampTz),
        ]
        .into_iter()
        .map(|(n, t)| (n.to_owned(), t))
        .collect()
    }

    #[test]
    fn new_table_lists_payload_then_metadata_with_ids_in_order() {
        let t = TableColumns::for_new_table(&orders_payload()).unwrap();
        let names: Vec<_> = t.columns().iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "id",
                "amount",
                "created_at",
                "_kafka_key",
                "_kafka_partition",
                "_kafka_offset",
                "_kafka_timestamp",
                "_olake_id",
                "_op_type",
                "_olake_timestamp",
                "_cdc_timestamp"
            ]
        );
        let ids: Vec<_> = t.columns().iter().map(|c| c.field_id).collect();
        assert_eq!(ids, (1..=11).collect::<Vec<_>>());
        assert_eq!(t.payload().count(), 3);
        assert_eq!(t.get("_kafka_partition").unwrap().ty, ColumnType::Int);
    }

    #[test]
    fn arrow_schema_types_nullability_and_field_ids() {
        let t = TableColumns::for_new_table(&orders_payload()).unwrap();
        let s = t.arrow_schema();
        let utc = DataType::Timestamp(TimeUnit::Microsecond, Some("+00:00".into()));
        let expected = [
            ("id", DataType::Int64),
            ("amount", DataType::Float64),
            ("created_at", utc.clone()),
            ("_kafka_key", DataType::Utf8),
            ("_kafka_partition", DataType::Int32),
            ("_kafka_offset", DataType::Int64),
            ("_kafka_timestamp", utc.clone()),
            ("_olake_id", DataType::Utf8),
            ("_op_type", DataType::Utf8),
            ("_olake_timestamp", utc.clone()),
            ("_cdc_timestamp", utc),
        ];
        assert_eq!(s.fields().len(), expected.len());
        for (i, (f, (name, ty))) in s.fields().iter().zip(expected).enumerate() {
            assert_eq!(f.name(), name);
            assert_eq!(f.data_type(), &ty);
            assert!(f.is_nullable());
            assert_eq!(
                f.metadata().get("PARQUET:field_id"),
                Some(&(i + 1).to_string())
            );
        }
        assert_eq!(ColumnType::Json.arrow_type(), DataType::Utf8);
        assert_eq!(ColumnType::Boolean.arrow_type(), DataType::Boolean);
    }

    #[test]
    fn type_names_round_trip() {
        for t in ColumnType::JSON {
            assert_eq!(t.name().parse::<ColumnType>(), Ok(t.clone()));
            assert_eq!(t.to_string(), t.name());
        }
        assert_eq!(ColumnType::Json.iceberg_type(), "string");
        assert_eq!(ColumnType::TimestampTz.iceberg_type(), "timestamptz");
        assert!("bigint".parse::<ColumnType>().is_err());
    }

    #[test]
    fn invalid_column_lists_are_rejected() {
        let dup = vec![
            Column::new(1, "a", ColumnType::Long),
            Column::new(2, "a", ColumnType::Long),
        ];
        assert_eq!(
            TableColumns::new(dup),
            Err(ColumnsError::DuplicateName("a".into()))
        );
        let dup_id = vec![
            Column::new(1, "a", ColumnType::Long),
            Column::new(1, "b", ColumnType::Long),
        ];
        assert_eq!(
            TableColumns::new(dup_id),
            Err(ColumnsError::DuplicateFieldId(1))
        );
        assert!(matches!(
            TableColumns::new(vec![Column::new(0, "a", ColumnType::Long)]),
            Err(ColumnsError::InvalidFieldId { .. })
        ));
        let wrong_meta = vec![Column::new(1, "_kafka_offset", ColumnType::String)];
        assert_eq!(
            TableColumns::new(wrong_meta).unwrap_err().to_string(),
            "metadata column \"_kafka_offset\" must be long, not string"
        );
        assert_eq!(
            TableColumns::for_new_table(&[("_op_type".into(), ColumnType::String)]),
            Err(ColumnsError::ReservedName("_op_type".into()))
        );
    }

    #[test]
    fn evolving_adds_columns_after_the_highest_id() {
        let t = TableColumns::for_new_table(&orders_payload()).unwrap();
        let t2 = t
            .with_added(&[("coupon".into(), ColumnType::String)], true)
            .unwrap();
        assert_eq!(t2.len(), 12);
        assert_eq!(
            t2.columns()[11],
            Column::new(12, "coupon", ColumnType::String)
        );
        assert_eq!(t2.max_field_id(), 12);
    }
}
