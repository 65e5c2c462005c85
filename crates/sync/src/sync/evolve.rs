//! A table's columns as one sync grows them: a message with a new
//! top-level field adds an optional column, an `int` column receiving a
//! value beyond 32 bits widens to `long`, a `float` column receiving a
//! number beyond its range widens to `double`. Every drain thread of the table
//! shares one [`EvolvingColumns`]; each change bumps its version, so the
//! file writer knows when to start files with the new schema. The changes
//! reach the catalog with the table's snapshot (see
//! `topicberg_iceberg::schema_evolution`).
//!
//! A new field's column is named by `topicberg_core::names` (a field named
//! like a metadata column goes to `<field>_payload`, a case variant of an
//! existing name to `<field>__<n>`), the same rule inference uses; a field
//! that cannot be named, or new columns past `sync.max_columns`, make the
//! message invalid (`on_invalid` decides), and the table is unchanged.

use topicberg_core::{
    Column, ColumnNames, ColumnType, ColumnsError, DecodeError, DecodeErrorKind, TableColumns,
};

/// What a decode error asks of the table's columns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ColumnsWanted {
    /// New optional columns.
    Add(Vec<(String, ColumnType)>),
    /// A payload column promoted to `long`.
    WidenToLong(String),
    /// A payload column promoted to `double`.
    WidenToDouble(String),
    /// Payload columns (by message field) changed to a type that holds
    /// what a writer schema declares: `int` -> `long`, decimal precision,
    /// struct fields added (nested ids 0 until assigned here).
    Retype(Vec<(String, ColumnType)>),
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
            DecodeErrorKind::Widen(fields) => Some(Self::Retype(fields.clone())),
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

/// Why the columns a message asks for cannot be added.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// The message is invalid: the field at fault and why.
    Invalid {
        field: Option<String>,
        kind: DecodeErrorKind,
    },
    /// The table has no column for the message's field.
    NoColumn(String),
    /// The field's column is of a type that does not widen as asked.
    NotWidening {
        /// The field.
        field: String,
        /// Its column's type.
        ty: ColumnType,
    },
    /// The grown columns would not describe a table.
    Columns(ColumnsError),
}

/// The shared, growing column list of one table during one sync.
#[derive(Debug)]
pub struct EvolvingColumns {
    columns: TableColumns,
    names: ColumnNames,
    max_columns: usize,
    next_field_id: i32,
    version: u64,
    changes: Vec<String>,
}

impl EvolvingColumns {
    /// Starts from the table's columns; new columns get field ids after
    /// `last_column_id` (the table's, which may exceed every current id),
    /// and the table never grows past `max_columns`.
    pub fn new(columns: TableColumns, last_column_id: i32, max_columns: usize) -> Self {
        let next_field_id = last_column_id.max(columns.max_field_id()) + 1;
        let (names, _) = ColumnNames::of(&columns);
        Self {
            columns,
            names,
            max_columns,
            next_field_id,
            version: 0,
            changes: Vec::new(),
        }
    }

    /// `(field, column)` for each payload field stored under another name.
    pub fn renamed(&self) -> &[(String, String)] {
        self.names.renamed()
    }

    /// The current columns and their version (0: as loaded).
    pub fn current(&self) -> (TableColumns, u64) {
        (self.columns.clone(), self.version)
    }

    /// The changes made so far, in words (`added column coupon (string)`).
    pub fn changes(&self) -> &[String] {
        &self.changes
    }

    /// Adds the metadata column `name` if the table lacks it
    /// (`_kafka_headers` for a stream that turned `kafka_headers` on,
    /// `_cdc_op` for a change-event table made before it existed):
    /// committed with the sync's snapshot, as any added column.
    pub fn add_metadata_column(&mut self, name: &str) -> Result<(), Refused> {
        if self.columns.get(name).is_some() {
            return Ok(());
        }
        let columns = self
            .columns
            .with_metadata_column(name, self.next_field_id - 1)
            .map_err(Refused::Columns)?;
        let Some(added) = columns.get(name) else {
            return Ok(());
        };
        self.changes
            .push(format!("added column {name} ({})", added.ty));
        self.next_field_id = columns.max_field_id() + 1;
        self.columns = columns;
        self.version += 1;
        Ok(())
    }

    /// Applies what a record asked for (parts another thread already
    /// applied are skipped) and returns the columns to decode it with.
    pub fn apply(&mut self, wanted: &ColumnsWanted) -> Result<(TableColumns, u64), Refused> {
        let mut columns: Vec<Column> = self.columns.columns().to_vec();
        let mut changed = Vec::new();
        match wanted {
            ColumnsWanted::Add(fields) => {
                let mut names = self.names.clone();
                let mut next_field_id = self.next_field_id;
                for (field, ty) in fields {
                    if names.column_of(field).is_some() {
                        continue;
                    }
                    let name = names.assign(field).map_err(|e| Refused::Invalid {
                        field: Some(field.clone()),
                        kind: DecodeErrorKind::ColumnName(e),
                    })?;
                    let id = next_field_id;
                    next_field_id += 1;
                    let ty = ty.with_field_ids(&mut next_field_id);
                    columns.push(Column::new(id, name.clone(), ty.clone()));
                    changed.push(if &name == field {
                        format!("added column {name} ({ty})")
                    } else {
                        format!("added column {name} ({ty}) for field {field}")
                    });
                }
                if !changed.is_empty() && columns.len() > self.max_columns {
                    return Err(Refused::Invalid {
                        field: fields.first().map(|(f, _)| f.clone()),
                        kind: DecodeErrorKind::TooManyColumns {
                            columns: columns.len(),
                            limit: self.max_columns,
                        },
                    });
                }
                self.names = names;
                self.next_field_id = next_field_id;
            }
            ColumnsWanted::Retype(fields) => {
                for (field, to) in fields {
                    let column_name = self.names.column_of(field).unwrap_or(field);
                    let Some(column) = columns.iter_mut().find(|c| c.name == column_name) else {
                        return Err(Refused::NoColumn(field.clone()));
                    };
                    if column.ty == *to {
                        continue;
                    }
                    let to = to.with_field_ids(&mut self.next_field_id);
                    changed.push(format!(
                        "changed column {} from {} to {to}",
                        column.name, column.ty
                    ));
                    column.ty = to;
                }
            }
            ColumnsWanted::WidenToLong(name) | ColumnsWanted::WidenToDouble(name) => {
                let (from, to) = match wanted {
                    ColumnsWanted::WidenToLong(_) => (ColumnType::Int, ColumnType::Long),
                    _ => (ColumnType::Float, ColumnType::Double),
                };
                // The error names the message field; find its column.
                let column_name = self.names.column_of(name).unwrap_or(name);
                let Some(column) = columns.iter_mut().find(|c| c.name == column_name) else {
                    return Err(Refused::NoColumn(name.clone()));
                };
                if column.ty == from {
                    column.ty = to.clone();
                    changed.push(format!(
                        "widened column {} from {from} to {to}",
                        column.name
                    ));
                } else if column.ty != to {
                    return Err(Refused::NotWidening {
                        field: name.clone(),
                        ty: column.ty.clone(),
                    });
                }
            }
        }
        if !changed.is_empty() {
            self.columns = TableColumns::new(columns).map_err(Refused::Columns)?;
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
    fn metadata_columns_are_added_once_with_ids_after_the_last_assigned_one() {
        let mut e = EvolvingColumns::new(table(), 7, 1000);
        e.add_metadata_column("_kafka_headers").unwrap();
        e.add_metadata_column("_cdc_op").unwrap();
        e.add_metadata_column("_cdc_op").unwrap();
        e.add_metadata_column("not_metadata").unwrap();
        let (columns, version) = e.current();
        let headers = columns.get("_kafka_headers").unwrap();
        assert_eq!(headers.field_id, 8);
        // The list's element and the struct's two fields: 9, 10, 11.
        assert_eq!(headers.ty.max_nested_field_id(), 11);
        assert_eq!(columns.get("_cdc_op").unwrap().field_id, 12);
        assert!(columns.get("not_metadata").is_none());
        assert_eq!(version, 2);
        assert_eq!(
            e.changes(),
            [
                "added column _kafka_headers (list<struct<key: string, value: binary>>)",
                "added column _cdc_op (string)"
            ]
        );
    }

    #[test]
    fn new_fields_get_ids_after_the_last_assigned_one_and_once_only() {
        let mut e = EvolvingColumns::new(table(), 7, 1000);
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
        let mut e = EvolvingColumns::new(table(), 3, 1000);
        let (columns, version) = e.apply(&ColumnsWanted::WidenToLong("qty".into())).unwrap();
        assert_eq!(columns.get("qty").unwrap().ty, ColumnType::Long);
        assert_eq!(version, 1);
        assert_eq!(e.changes(), ["widened column qty from int to long"]);
        let mut e = EvolvingColumns::new(
            TableColumns::new(vec![Column::new(1, "ratio", ColumnType::Float)]).unwrap(),
            1,
            1000,
        );
        let (columns, _) = e
            .apply(&ColumnsWanted::WidenToDouble("ratio".into()))
            .unwrap();
        assert_eq!(columns.get("ratio").unwrap().ty, ColumnType::Double);
        assert_eq!(e.changes(), ["widened column ratio from float to double"]);
        let mut e = EvolvingColumns::new(
            TableColumns::new(vec![Column::new(1, "name", ColumnType::String)]).unwrap(),
            1,
            1000,
        );
        assert!(e.apply(&ColumnsWanted::WidenToLong("name".into())).is_err());
    }

    #[test]
    fn new_fields_are_named_like_inference_names_them() {
        let mut e = EvolvingColumns::new(table(), 3, 1000);
        let add = ColumnsWanted::Add(vec![
            ("_kafka_offset".into(), ColumnType::String),
            ("ID".into(), ColumnType::Long),
            ("QTY".into(), ColumnType::Long),
        ]);
        let (columns, _) = e.apply(&add).unwrap();
        let names: Vec<_> = columns.columns().iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "id",
                "qty",
                "_kafka_partition",
                "_kafka_offset_payload",
                "ID__2",
                "QTY__2"
            ]
        );
        assert_eq!(e.changes()[1], "added column ID__2 (long) for field ID");
        assert_eq!(e.renamed().len(), 3);
        // Again (another thread): nothing new.
        let (_, version) = e.apply(&add).unwrap();
        assert_eq!(version, 1);
        // Reloaded from the table, the same fields find the same columns.
        let mut reloaded = EvolvingColumns::new(columns, 6, 1000);
        assert_eq!(reloaded.apply(&add).unwrap().1, 0);
        // A field that would read as a renamed column is refused whole.
        let refused = reloaded
            .apply(&ColumnsWanted::Add(vec![
                ("ok".into(), ColumnType::Long),
                ("Id__3".into(), ColumnType::Long),
            ]))
            .unwrap_err();
        assert!(
            matches!(&refused, Refused::Invalid { field: Some(f), kind: DecodeErrorKind::ColumnName(_) } if f == "Id__3"),
            "{refused:?}"
        );
        assert_eq!(reloaded.current().1, 0);
        assert!(reloaded.current().0.get("ok").is_none());
    }

    #[test]
    fn columns_past_the_limit_are_refused_and_nothing_is_added() {
        let mut e = EvolvingColumns::new(table(), 3, 4);
        e.apply(&ColumnsWanted::Add(vec![("a".into(), ColumnType::Long)]))
            .unwrap();
        let refused = e
            .apply(&ColumnsWanted::Add(vec![
                ("b".into(), ColumnType::Long),
                ("c".into(), ColumnType::Long),
            ]))
            .unwrap_err();
        assert_eq!(
            refused,
            Refused::Invalid {
                field: Some("b".into()),
                kind: DecodeErrorKind::TooManyColumns {
                    columns: 6,
                    limit: 4
                }
            }
        );
        assert_eq!(e.current().0.len(), 4);
        // The ids of refused columns are not used up.
        let (columns, _) = e.apply(&ColumnsWanted::WidenToLong("qty".into())).unwrap();
        assert_eq!(columns.get("a").unwrap().field_id, 4);
    }
}
