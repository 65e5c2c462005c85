//! Between the decoder's columns (`topicberg_core`) and a table's Iceberg
//! columns (`topicberg_iceberg`): one column type model, so only the
//! column lists convert.

use topicberg_core::{Column, ColumnsError, TableColumns};
use topicberg_iceberg::{Column as IcebergColumn, IcebergError, TableHandle};

use crate::error::SyncErrorKind;

/// Why a loaded table's columns cannot be decoded into.
#[derive(Debug, thiserror::Error)]
pub enum TableColumnsError {
    /// The table's schema has a type the decoder does not know.
    #[error(transparent)]
    Schema(#[from] IcebergError),
    /// The table's columns do not make a column list.
    #[error("table {table}: {source}")]
    Columns {
        /// The table's name.
        table: String,
        /// What is wrong with them.
        #[source]
        source: ColumnsError,
    },
}

impl TableColumnsError {
    /// What kind of failure: the table's schema.
    pub fn kind(&self) -> SyncErrorKind {
        SyncErrorKind::Schema
    }
}

/// The Iceberg columns for a new table.
pub fn iceberg_columns(columns: &TableColumns) -> Vec<IcebergColumn> {
    columns.columns().iter().map(IcebergColumn::from).collect()
}

/// The decoder's columns for a loaded table, with the table's field ids.
pub fn table_columns(handle: &TableHandle) -> Result<TableColumns, TableColumnsError> {
    let columns = topicberg_iceberg::schema::columns_of(handle.schema())?;
    TableColumns::new(columns.into_iter().map(Column::from).collect()).map_err(|source| {
        TableColumnsError::Columns {
            table: handle.name().to_string(),
            source,
        }
    })
}
