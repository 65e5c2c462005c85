//! A table's columns as one sync grows them: a message with a new
//! top-level field adds an optional column, an `int` column receiving a
//! value beyond 32 bits widens to `long`, a `float` column receiving a
//! number beyond its range widens to `double`. Every drain thread of the table
//! shares one [`EvolvingColumns`]; each change bumps its version, so the
//! file writer knows when to start files with the new schema. The changes
//! reach the catalog with the table's snapshot (see
//! `topicberg_iceberg::schema_evolution`).

use topicberg_core::{Column, ColumnType, DecodeError, DecodeErrorKind, TableColumns};

/// What a decode error asks of the table's columns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ColumnsWanted {
    /// New optional columns.
    Add(Vec<(String, ColumnType)>),
    /// A payload column promoted to `long`.
    WidenToLong(String),
    /// A payload column promoted to `double`.
    WidenToDouble(String),
}

impl ColumnsWanted {
    /// The evolution a decode error calls for, if any: unknown fields, or
    /// an integer out of range of an `int` payload column.
    pub fn from_error(error: &DecodeError) -> Option<Self> {
        match &error.kind {
            DecodeErrorKind::UnknownFields(fields) => Some(Self::Add(
                fields
                    .iter()
                    .map(|f| (f.name.clone(), f.column_type()))
                    .collect(),
            )),
            DecodeErrorKind::OutOfRange {
                expected: ColumnType::Int,
                ..
            } => error.field.clone().map(Self::WidenToLong),
            DecodeErrorKind::OutOfRange {
                expected: ColumnType::Float,
                ..
            } => error.field.clone().map(Self::WidenToDouble),
            _ => None,
        }
    }
}

/// The shared, growing column list of one table during one sync.
#[derive(Debug)]
pub struct EvolvingColumns {
    columns: TableColumns,
    next_field_id: i32,
    version: u64,
    changes: Vec<String>,
}

impl EvolvingColumns {
    /// Starts from the table's columns; new columns get field ids after
    /// `last_column_id` (the table's, which may exceed every current id).
    pub fn new(columns: TableColumns, last_column_id: i32) -> Self {
        let next_field_id = last_column_id.max(columns.max_field_id()) + 1;
        Self {
            columns,
            next_field_id,
            version: 0,
            changes: Vec::new(),
        }
    }

    /// The current columns and their version (0: as loaded).
    pub fn current(&self) -> (TableColumns, u64) {
        (self.columns.clone(), self.version)
    }

    /// The changes made so far, in words (`added column coupon (string)`).
    pub fn changes(&self) -> &[String] {
        &self.changes
    }

    /// Applies what a record asked for (parts another thread already
    /// applied are skipped) and returns the columns to decode it with.
    /// An evolution Iceberg does not allow is an error in words.
    pub fn apply(&mut self, wanted: &ColumnsWanted) -> Result<(TableColumns, u64), String> {
        let mut columns: Vec<Column> = self.columns.columns().to_vec();
        let mut changed = Vec::new();
        match wanted {
            ColumnsWanted::Add(fields) => {
                for (name, ty) in fields {
                    if columns.iter().any(|c| &c.name == name) {
                        continue;
                    }
                    columns.push(Column::new(self.next_field_id, name.clone(), *ty));
                    self.next_field_id += 1;
                    changed.push(format!("added column {name} ({ty})"));
                }
            }
            ColumnsWanted::WidenToLong(name) | ColumnsWanted::WidenToDouble(name) => {
                let (from, to) = match wanted {
                    ColumnsWanted::WidenToLong(_) => (ColumnType::Int, ColumnType::Long),
                    _ => (ColumnType::Float, ColumnType::Double),
                };
                let Some(column) = columns.iter_mut().find(|c| &c.name == name) else {
                    return Err(format!("column {name} is not in the table"));
                };
                if column.ty == from {
                    column.ty = to;
                    changed.push(format!("widened column {name} from {from} to {to}"));
                } else if column.ty != to {
                    return Err(format!(
                        "column {name} is {}; only {from} columns widen to {to}",
                        column.ty
                    ));
                }
            }
        }
        if !changed.is_empty() {
            self.columns = TableColumns::new(columns).map_err(|e| e.to_string())?;
            self.version += 1;
            self.changes.extend(changed);
        }
        Ok(self.current())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> TableColumns {
        TableColumns::new(vec![
            Column::new(1, "id", ColumnType::Long),
            Column::new(2, "qty", ColumnType::Int),
            Column::new(3, "_kafka_partition", ColumnType::Int),
        ])
        .unwrap()
    }

    #[test]
    fn new_fields_get_ids_after_the_last_assigned_one_and_once_only() {
        let mut e = EvolvingColumns::new(table(), 7);
        let add = ColumnsWanted::Add(vec![("coupon".into(), ColumnType::String)]);
        let (columns, version) = e.apply(&add).unwrap();
        assert_eq!(version, 1);
        assert_eq!(columns.get("coupon").unwrap().field_id, 8);
        // Another thread asking for the same column changes nothing.
        let (_, again) = e.apply(&add).unwrap();
        assert_eq!(again, 1);
        assert_eq!(e.changes(), ["added column coupon (string)"]);
    }

    #[test]
    fn int_widens_to_long_and_nothing_else_widens() {
        let mut e = EvolvingColumns::new(table(), 3);
        let (columns, version) = e.apply(&ColumnsWanted::WidenToLong("qty".into())).unwrap();
        assert_eq!(columns.get("qty").unwrap().ty, ColumnType::Long);
        assert_eq!(version, 1);
        assert_eq!(e.changes(), ["widened column qty from int to long"]);
        let mut e = EvolvingColumns::new(
            TableColumns::new(vec![Column::new(1, "ratio", ColumnType::Float)]).unwrap(),
            1,
        );
        let (columns, _) = e
            .apply(&ColumnsWanted::WidenToDouble("ratio".into()))
            .unwrap();
        assert_eq!(columns.get("ratio").unwrap().ty, ColumnType::Double);
        assert_eq!(e.changes(), ["widened column ratio from float to double"]);
        let mut e = EvolvingColumns::new(
            TableColumns::new(vec![Column::new(1, "name", ColumnType::String)]).unwrap(),
            1,
        );
        assert!(e.apply(&ColumnsWanted::WidenToLong("name".into())).is_err());
    }
}
