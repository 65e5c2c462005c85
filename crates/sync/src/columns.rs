//! Between the decoder's columns (`topicberg_core`) and a table's Iceberg
//! columns (`topicberg_iceberg`): one column type model, so only the
//! column lists convert.

use topicberg_core::{Column, TableColumns};
use topicberg_iceberg::{Column as IcebergColumn, TableHandle};

/// The Iceberg columns for a new table.
pub fn iceberg_columns(columns: &TableColumns) -> Vec<IcebergColumn> {
    columns.columns().iter().map(IcebergColumn::from).collect()
}

/// The decoder's columns for a loaded table, with the table's field ids.
pub fn table_columns(handle: &TableHandle) -> Result<TableColumns, String> {
    let columns =
        topicberg_iceberg::schema::columns_of(handle.schema()).map_err(|e| e.to_string())?;
    TableColumns::new(columns.into_iter().map(Column::from).collect())
        .map_err(|e| format!("table {}: {e}", handle.name()))
}
