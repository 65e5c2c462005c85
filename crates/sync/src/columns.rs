//! Between the decoder's column model (`topicberg_core`) and the Iceberg
//! schema (`topicberg_iceberg`).

use topicberg_core::{Column, ColumnType, TableColumns};
use topicberg_iceberg::{Column as IcebergColumn, ColumnType as IcebergType, TableHandle};

/// The Iceberg columns for a new table.
pub fn iceberg_columns(columns: &TableColumns) -> Vec<IcebergColumn> {
    columns
        .columns()
        .iter()
        .map(|c| {
            let ty = match c.ty {
                ColumnType::Long => IcebergType::Long,
                ColumnType::Int => IcebergType::Int,
                ColumnType::Double => IcebergType::Double,
                ColumnType::Float => IcebergType::Float,
                ColumnType::Boolean => IcebergType::Boolean,
                ColumnType::String => IcebergType::String,
                ColumnType::Json => IcebergType::Json,
                ColumnType::TimestampTz => IcebergType::Timestamptz,
            };
            IcebergColumn::optional(c.name.clone(), c.field_id, ty)
        })
        .collect()
}

/// The decoder's columns for a loaded table, with the table's field ids.
pub fn table_columns(handle: &TableHandle) -> Result<TableColumns, String> {
    let columns =
        topicberg_iceberg::schema::columns_of(handle.schema()).map_err(|e| e.to_string())?;
    let columns = columns
        .into_iter()
        .map(|c| {
            let ty = match c.column_type {
                IcebergType::Long => ColumnType::Long,
                IcebergType::Int => ColumnType::Int,
                IcebergType::Double => ColumnType::Double,
                IcebergType::Float => ColumnType::Float,
                IcebergType::Boolean => ColumnType::Boolean,
                IcebergType::String => ColumnType::String,
                IcebergType::Json => ColumnType::Json,
                IcebergType::Timestamptz => ColumnType::TimestampTz,
            };
            Column::new(c.field_id, c.name, ty)
        })
        .collect();
    TableColumns::new(columns).map_err(|e| format!("table {}: {e}", handle.name()))
}
