//! Making a decoded batch fit the table's Arrow schema.
//!
//! A batch matches by position when it has the table's columns in the
//! table's order (field metadata may differ, and a UTC timestamp column may
//! name its zone `UTC` or `+00:00`). A batch whose fields carry field ids
//! (`PARQUET:field_id`) that differ from the table's, because it was
//! decoded before the table gained columns during the same sync, matches by
//! field id: columns it lacks become nulls, and an `int` (`float`) column
//! the table widened to `long` (`double`) is widened.

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Float32Type, Float64Type, Int32Type, Int64Type, TimestampMicrosecondType,
};
use arrow_array::{
    new_null_array, Array, ArrayRef, ListArray, MapArray, RecordBatch, RecordBatchOptions,
    StructArray,
};
use arrow_schema::{ArrowError, DataType, Field, SchemaRef as ArrowSchemaRef, TimeUnit};

use crate::write::schema::{PARQUET_FIELD_ID_META_KEY, UTC};

/// Why a batch does not fit the table's Arrow schema (always
/// [`IcebergErrorKind::Data`](crate::IcebergErrorKind::Data) when written).
#[derive(Debug, thiserror::Error)]
pub enum ConformError {
    /// Matched by position, the column counts differ.
    #[error("the batch has {batch} columns, the table {table}")]
    ColumnCount { batch: usize, table: usize },
    /// Matched by field id, a batch column the table does not have.
    #[error(
        "column {column} of the batch has field id {field_id:?}, which the table does not have"
    )]
    UnknownFieldId {
        column: String,
        field_id: Option<i32>,
    },
    /// Nulls in a column the table requires.
    #[error("column {index} ({name}) is required but the batch has {nulls} nulls in it")]
    NullsInRequired {
        index: usize,
        name: String,
        nulls: usize,
    },
    /// A column whose type cannot be read as the table's.
    #[error("column {index} ({name}) is {batch} in the batch, {table} in the table")]
    TypeMismatch {
        index: usize,
        name: String,
        batch: DataType,
        table: DataType,
    },
    /// Arrow refused a converted nested column.
    #[error("column {index} ({name}): {source}")]
    Nested {
        index: usize,
        name: String,
        #[source]
        source: ArrowError,
    },
    /// Arrow refused the converted batch.
    #[error("{0}")]
    Batch(#[source] ArrowError),
}

fn nested(i: usize, field: &Field) -> impl FnOnce(ArrowError) -> ConformError + '_ {
    move |source| ConformError::Nested {
        index: i,
        name: field.name().clone(),
        source,
    }
}

fn field_id(field: &Field) -> Option<i32> {
    field
        .metadata()
        .get(PARQUET_FIELD_ID_META_KEY)
        .and_then(|v| v.parse().ok())
}

/// The batch with the table's Arrow schema `schema`, or why it cannot be.
pub fn conform(batch: &RecordBatch, schema: &ArrowSchemaRef) -> Result<RecordBatch, ConformError> {
    let batch_ids: Vec<Option<i32>> = batch
        .schema()
        .fields()
        .iter()
        .map(|f| field_id(f))
        .collect();
    let table_ids: Vec<Option<i32>> = schema.fields().iter().map(|f| field_id(f)).collect();
    let by_position = batch_ids.iter().all(Option::is_none) || batch_ids == table_ids;
    if by_position && batch.num_columns() != schema.fields().len() {
        return Err(ConformError::ColumnCount {
            batch: batch.num_columns(),
            table: schema.fields().len(),
        });
    }
    if !by_position {
        if let Some((i, _)) = batch_ids
            .iter()
            .enumerate()
            .find(|(_, id)| id.is_none() || !table_ids.contains(id))
        {
            return Err(ConformError::UnknownFieldId {
                column: batch.schema().field(i).name().clone(),
                field_id: batch_ids[i],
            });
        }
    }
    let mut columns: Vec<ArrayRef> = Vec::with_capacity(schema.fields().len());
    for (i, field) in schema.fields().iter().enumerate() {
        let source = if by_position {
            Some(batch.column(i))
        } else {
            batch_ids
                .iter()
                .position(|id| *id == table_ids[i])
                .map(|j| batch.column(j))
        };
        let column = match source {
            None => new_null_array(field.data_type(), batch.num_rows()),
            Some(column) => convert(column, field, i)?,
        };
        if !field.is_nullable() && column.null_count() > 0 {
            return Err(ConformError::NullsInRequired {
                index: i,
                name: field.name().clone(),
                nulls: column.null_count(),
            });
        }
        columns.push(column);
    }
    let options = RecordBatchOptions::new().with_row_count(Some(batch.num_rows()));
    RecordBatch::try_new_with_options(schema.clone(), columns, &options)
        .map_err(ConformError::Batch)
}

fn convert(column: &ArrayRef, field: &Field, i: usize) -> Result<ArrayRef, ConformError> {
    Ok(match (column.data_type(), field.data_type()) {
        (a, b) if a == b => column.clone(),
        (
            DataType::Timestamp(TimeUnit::Microsecond, Some(tz)),
            DataType::Timestamp(TimeUnit::Microsecond, Some(_)),
        ) if tz.as_ref() == "UTC" || tz.as_ref() == "+00:00" => Arc::new(
            column
                .as_primitive::<TimestampMicrosecondType>()
                .clone()
                .with_timezone(UTC),
        ),
        (DataType::Float32, DataType::Float64) => Arc::new(
            column
                .as_primitive::<Float32Type>()
                .unary::<_, Float64Type>(f64::from),
        ),
        (DataType::Int32, DataType::Int64) => Arc::new(
            column
                .as_primitive::<Int32Type>()
                .unary::<_, Int64Type>(i64::from),
        ),
        (DataType::Struct(_), DataType::Struct(fields)) => {
            let source = column.as_struct();
            let children = fields
                .iter()
                .map(|f| match source_child(source, f) {
                    Some(child) => convert(child, f, i),
                    None => Ok(new_null_array(f.data_type(), source.len())),
                })
                .collect::<Result<Vec<_>, _>>()?;
            let nulls = source.nulls().cloned();
            Arc::new(
                StructArray::try_new(fields.clone(), children, nulls).map_err(nested(i, field))?,
            )
        }
        (DataType::List(_), DataType::List(element)) => {
            let source = column.as_list::<i32>();
            let values = convert(source.values(), element, i)?;
            let (offsets, nulls) = (source.offsets().clone(), source.nulls().cloned());
            Arc::new(
                ListArray::try_new(element.clone(), offsets, values, nulls)
                    .map_err(nested(i, field))?,
            )
        }
        (DataType::Map(_, _), DataType::Map(entries, sorted)) => {
            let source = column.as_map();
            let pairs: ArrayRef = Arc::new(source.entries().clone());
            let pairs = convert(&pairs, entries, i)?;
            let (offsets, nulls) = (source.offsets().clone(), source.nulls().cloned());
            Arc::new(
                MapArray::try_new(
                    entries.clone(),
                    offsets,
                    pairs.as_struct().clone(),
                    nulls,
                    *sorted,
                )
                .map_err(nested(i, field))?,
            )
        }
        // Nested fields that differ only in metadata (field ids, docs) or a
        // decimal whose precision the table widened: same layout, new type.
        (a, b) if same_layout(a, b) => {
            let data = column
                .to_data()
                .into_builder()
                .data_type(b.clone())
                .build()
                .map_err(nested(i, field))?;
            arrow_array::make_array(data)
        }
        (a, b) => {
            return Err(ConformError::TypeMismatch {
                index: i,
                name: field.name().clone(),
                batch: a.clone(),
                table: b.clone(),
            })
        }
    })
}

/// The child of `source` that holds `field`: same field id, else same name.
fn source_child<'a>(source: &'a StructArray, field: &Field) -> Option<&'a ArrayRef> {
    let id = field_id(field);
    let names = source.fields();
    let position = names
        .iter()
        .position(|f| id.is_some() && field_id(f) == id)
        .or_else(|| names.iter().position(|f| f.name() == field.name()))?;
    Some(source.column(position))
}

/// Whether arrays of `a` can be read as `b` without touching their data:
/// equal but for nested field metadata, or decimals of one scale whose
/// precision only grew.
fn same_layout(a: &DataType, b: &DataType) -> bool {
    match (a, b) {
        (DataType::Decimal128(p1, s1), DataType::Decimal128(p2, s2)) => s1 == s2 && p1 <= p2,
        _ => a.equals_datatype(b),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::Arc;

    use arrow_array::{Int32Array, Int64Array, StringArray, TimestampMicrosecondArray};
    use arrow_schema::{Field, Schema};

    use super::*;
    use crate::write::schema::{arrow_schema, iceberg_schema, Column, ColumnType};

    fn table_schema() -> ArrowSchemaRef {
        let columns = vec![
            Column::optional("id", 1, ColumnType::Long),
            Column::optional("at", 2, ColumnType::TimestampTz),
        ];
        arrow_schema(&iceberg_schema(&columns).unwrap()).unwrap()
    }

    fn with_id(field: Field, id: i32) -> Field {
        field.with_metadata(HashMap::from([(
            PARQUET_FIELD_ID_META_KEY.to_string(),
            id.to_string(),
        )]))
    }

    #[test]
    fn conform_accepts_plain_fields_and_utc_alias() {
        let plain = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, true),
            Field::new(
                "at",
                DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
                true,
            ),
        ]));
        let batch = RecordBatch::try_new(
            plain,
            vec![
                Arc::new(Int64Array::from(vec![1, 2])),
                Arc::new(TimestampMicrosecondArray::from(vec![5, 6]).with_timezone("UTC")),
            ],
        )
        .unwrap();
        let out = conform(&batch, &table_schema()).unwrap();
        assert_eq!(out.schema(), table_schema());
    }

    #[test]
    fn conform_names_a_mismatched_column() {
        let wrong = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Utf8, true),
            Field::new("at", DataType::Int64, true),
        ]));
        let batch = RecordBatch::try_new(
            wrong,
            vec![
                Arc::new(StringArray::from(vec!["x"])),
                Arc::new(Int64Array::from(vec![1])),
            ],
        )
        .unwrap();
        let err = conform(&batch, &table_schema()).unwrap_err();
        assert!(err.to_string().contains("column 0 (id)"), "{err}");
    }

    #[test]
    fn a_batch_decoded_before_the_table_evolved_gets_nulls_and_widened_ints() {
        let table = arrow_schema(
            &iceberg_schema(&[
                Column::optional("qty", 1, ColumnType::Long),
                Column::optional("id", 2, ColumnType::Long),
                Column::optional("coupon", 3, ColumnType::String),
            ])
            .unwrap(),
        )
        .unwrap();
        let old = Arc::new(Schema::new(vec![
            with_id(Field::new("qty", DataType::Int32, true), 1),
            with_id(Field::new("id", DataType::Int64, true), 2),
        ]));
        let batch = RecordBatch::try_new(
            old,
            vec![
                Arc::new(Int32Array::from(vec![Some(7), None])),
                Arc::new(Int64Array::from(vec![1, 2])),
            ],
        )
        .unwrap();
        let out = conform(&batch, &table).unwrap();
        assert_eq!(out.schema(), table);
        assert_eq!(
            out.column(0).as_primitive::<Int64Type>(),
            &Int64Array::from(vec![Some(7), None])
        );
        assert_eq!(out.column(2).null_count(), 2);

        let unknown = Arc::new(Schema::new(vec![with_id(
            Field::new("other", DataType::Int64, true),
            9,
        )]));
        let batch =
            RecordBatch::try_new(unknown, vec![Arc::new(Int64Array::from(vec![1]))]).unwrap();
        let err = conform(&batch, &table).unwrap_err();
        assert!(err.to_string().contains("other"), "{err}");
    }

    #[test]
    fn a_struct_batch_from_before_the_table_grew_gets_the_new_field_as_null_and_wider_ints() {
        use topicberg_core::columns::NestedField;
        let strukt = |fields: Vec<NestedField>| ColumnType::Struct(fields.into());
        let old = strukt(vec![NestedField::optional(2, "qty", ColumnType::Int)]);
        let new = strukt(vec![
            NestedField::optional(2, "qty", ColumnType::Long),
            NestedField::optional(3, "note", ColumnType::String),
        ]);
        let table =
            arrow_schema(&iceberg_schema(&[Column::optional("line", 1, new)]).unwrap()).unwrap();
        let DataType::Struct(old_fields) = old.arrow_type() else {
            unreachable!()
        };
        let qty: ArrayRef = Arc::new(Int32Array::from(vec![Some(4), None]));
        let column = StructArray::new(old_fields, vec![qty], None);
        let batch_schema =
            Schema::new(vec![with_id(Field::new("line", old.arrow_type(), true), 1)]);
        let batch = RecordBatch::try_new(Arc::new(batch_schema), vec![Arc::new(column)]).unwrap();
        let out = conform(&batch, &table).unwrap();
        let line = out.column(0).as_struct();
        let qty = line
            .column(0)
            .as_primitive::<arrow_array::types::Int64Type>();
        assert_eq!(qty.value(0), 4);
        assert!(qty.is_null(1));
        assert_eq!(line.column(1).null_count(), 2);
        assert_eq!(out.schema(), table);
    }
}
