//! Which column holds which message field.
//!
//! A column is named like its field, except where that name would clash in
//! a reader. Two rules, applied when a column is created (inference of a
//! new table and mid-sync evolution alike); existing columns are never
//! renamed:
//!
//! - **Metadata names.** A field whose name, lower-cased, is a metadata
//!   column's (`_kafka_offset`, `_OP_TYPE`, ...) goes to the column
//!   `<field>_payload` (`_kafka_offset_payload`). If that name (lower-cased)
//!   is taken too, the field is refused ([`NameError::RenameTaken`]).
//! - **Case.** Spark resolves names case-insensitively, Trino lower-cases
//!   them and DuckDB identifiers are case-insensitive, so two columns whose
//!   names differ only in case cannot both be read. A field whose
//!   lower-cased name is an existing column's lower-cased name goes to
//!   `<field>__<n>` with the smallest `n >= 2` that clashes with nothing
//!   (`id`, then `ID` -> `ID__2`, then `Id` -> `Id__3`).
//!
//! The mapping is not stored anywhere: [`ColumnNames::of`] reads it back
//! from the column names in field-id order (the order they were created
//! in), with [`source_field`]. A field whose own name would read back as the
//! renamed column of another field (a literal `_kafka_offset_payload`, or
//! `ID__2` once `id` is a column) would make that reading ambiguous, so it
//! is refused ([`NameError::ReadsAsRenamed`]): never merged, never dropped.
//! These decisions are made once per column set, never per message.

use std::collections::{HashMap, HashSet};

use crate::columns::{metadata_column_type, TableColumns};

/// The suffix of the column holding a field named like a metadata column.
pub const METADATA_RENAME_SUFFIX: &str = "_payload";

/// A field that cannot get a column.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    /// A field named like a metadata column whose `<field>_payload` column
    /// name is taken as well.
    #[error(
        "field {field:?} is named like a metadata column and its renamed column {column:?} is taken; \
         rename the field in the messages, or leave it out with the stream's `columns`"
    )]
    RenameTaken { field: String, column: String },
    /// A field whose name reads as the renamed column of another field.
    #[error(
        "field {field:?} cannot be a column: that name reads as the renamed column of field {other:?} \
         (\"Column names\" in docs/src/explanation/columns.md); rename the field in the messages, or leave it out with the stream's `columns`"
    )]
    ReadsAsRenamed { field: String, other: String },
}

/// The message field a column named `column` holds, given the lower-cased
/// names of the columns created before it; `None` for a metadata column.
pub fn source_field<'a>(column: &'a str, earlier: &HashSet<String>) -> Option<&'a str> {
    if metadata_column_type(column).is_some() {
        return None;
    }
    if let Some(base) = column.strip_suffix(METADATA_RENAME_SUFFIX) {
        if is_metadata_fold(&base.to_lowercase()) {
            return Some(base);
        }
    }
    if let Some((base, n)) = column.rsplit_once("__") {
        let numbered = n.len() <= 6
            && !n.starts_with('0')
            && n.bytes().all(|b| b.is_ascii_digit())
            && n.parse::<u32>().is_ok_and(|n| n >= 2);
        if numbered && !base.is_empty() && earlier.contains(&base.to_lowercase()) {
            return Some(base);
        }
    }
    Some(column)
}

/// Why `field` has a column of another name, in words.
pub fn rename_reason(field: &str) -> &'static str {
    if is_metadata_fold(&field.to_lowercase()) {
        "its name is a metadata column's"
    } else {
        "its name differs only in case from an earlier column's"
    }
}

fn is_metadata_fold(lower: &str) -> bool {
    metadata_column_type(lower).is_some()
}

/// The field -> column mapping of one table, and the names taken.
#[derive(Debug, Clone, Default)]
pub struct ColumnNames {
    /// Lower-cased names of every column.
    folded: HashSet<String>,
    /// Field -> column name, for every payload column.
    by_field: HashMap<String, String>,
    /// `(field, column)` where the two differ, in creation order.
    renamed: Vec<(String, String)>,
}

impl ColumnNames {
    /// No columns yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// The mapping of an existing column list, read back in field-id order.
    /// Returns it with the field each column holds (`None` for metadata
    /// columns), in the list's own order.
    pub fn of(columns: &TableColumns) -> (Self, Vec<Option<String>>) {
        let cols = columns.columns();
        let mut order: Vec<usize> = (0..cols.len()).collect();
        order.sort_by_key(|&i| cols[i].field_id);
        let mut names = Self::new();
        let mut fields = vec![None; cols.len()];
        for i in order {
            let column = &cols[i].name;
            let field = match source_field(column, &names.folded) {
                // Two columns read as one field (a table renamed by hand):
                // the later one keeps its own name as its field.
                Some(f) if names.by_field.contains_key(f) => Some(column.as_str()),
                other => other,
            };
            if let Some(field) = field {
                names.by_field.insert(field.to_owned(), column.clone());
                if field != column {
                    names.renamed.push((field.to_owned(), column.clone()));
                }
                fields[i] = Some(field.to_owned());
            }
            names.folded.insert(column.to_lowercase());
        }
        (names, fields)
    }

    /// The column of `field`, if it has one.
    pub fn column_of(&self, field: &str) -> Option<&str> {
        self.by_field.get(field).map(String::as_str)
    }

    /// `(field, column)` for every field whose column has another name.
    pub fn renamed(&self) -> &[(String, String)] {
        &self.renamed
    }

    /// The column name `field` would get, without taking it.
    pub fn propose(&self, field: &str) -> Result<String, NameError> {
        if let Some(column) = self.by_field.get(field) {
            return Ok(column.clone());
        }
        let lower = field.to_lowercase();
        let column = if is_metadata_fold(&lower) {
            let column = format!("{field}{METADATA_RENAME_SUFFIX}");
            if self.folded.contains(&column.to_lowercase()) {
                return Err(NameError::RenameTaken {
                    field: field.to_owned(),
                    column,
                });
            }
            column
        } else if self.folded.contains(&lower) {
            (2u32..)
                .map(|n| format!("{field}__{n}"))
                .find(|c| !self.folded.contains(&c.to_lowercase()))
                .expect("a free suffix")
        } else {
            field.to_owned()
        };
        match source_field(&column, &self.folded) {
            Some(source) if source == field => Ok(column),
            Some(other) => Err(NameError::ReadsAsRenamed {
                field: field.to_owned(),
                other: other.to_owned(),
            }),
            None => unreachable!("metadata names are renamed above"),
        }
    }

    /// Takes a column for `field` (see [`ColumnNames::propose`]) and returns
    /// its name; a field that has a column gets that one.
    pub fn assign(&mut self, field: &str) -> Result<String, NameError> {
        if let Some(column) = self.by_field.get(field) {
            return Ok(column.clone());
        }
        let column = self.propose(field)?;
        self.folded.insert(column.to_lowercase());
        self.by_field.insert(field.to_owned(), column.clone());
        if column != field {
            self.renamed.push((field.to_owned(), column.clone()));
        }
        Ok(column)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::columns::ColumnType;

    fn assign_all(fields: &[&str]) -> (ColumnNames, Vec<Result<String, NameError>>) {
        let mut names = ColumnNames::new();
        let out = fields.iter().map(|f| names.assign(f)).collect();
        (names, out)
    }

    #[test]
    fn metadata_named_fields_get_the_payload_suffix() {
        let (names, got) =
            assign_all(&["_kafka_offset", "_OLAKE_ID", "id", "_op_type", "_cdc_lsn"]);
        let got: Vec<_> = got.into_iter().map(Result::unwrap).collect();
        assert_eq!(
            got,
            [
                "_kafka_offset_payload",
                "_OLAKE_ID_payload",
                "id",
                "_op_type_payload",
                "_cdc_lsn_payload"
            ]
        );
        assert_eq!(
            names.column_of("_kafka_offset"),
            Some("_kafka_offset_payload")
        );
        assert_eq!(names.renamed().len(), 4);
        assert_eq!(
            rename_reason("_OLAKE_ID"),
            "its name is a metadata column's"
        );
        assert!(rename_reason("ID").contains("case"));
    }

    #[test]
    fn case_variants_get_numbered_suffixes_first_spelling_keeps_its_name() {
        let (names, got) = assign_all(&["id", "ID", "Id", "id", "iD"]);
        let got: Vec<_> = got.into_iter().map(Result::unwrap).collect();
        assert_eq!(got, ["id", "ID__2", "Id__3", "id", "iD__4"]);
        assert_eq!(
            names.renamed(),
            [
                ("ID".to_owned(), "ID__2".to_owned()),
                ("Id".to_owned(), "Id__3".to_owned()),
                ("iD".to_owned(), "iD__4".to_owned())
            ]
        );
    }

    #[test]
    fn ambiguous_literal_names_are_refused() {
        let (_, got) = assign_all(&["_kafka_offset_payload"]);
        assert_eq!(
            got[0],
            Err(NameError::ReadsAsRenamed {
                field: "_kafka_offset_payload".into(),
                other: "_kafka_offset".into()
            })
        );
        let (_, got) = assign_all(&["id", "ID__2"]);
        assert!(matches!(got[1], Err(NameError::ReadsAsRenamed { .. })));
        // Without an `id` column first, `ID__2` is an ordinary name, and a
        // later `id` does not clash with it.
        let (_, got) = assign_all(&["ID__2", "id", "ID"]);
        let got: Vec<_> = got.into_iter().map(Result::unwrap).collect();
        assert_eq!(got, ["ID__2", "id", "ID__3"]);
        // A metadata-named field whose renamed column is taken.
        let mut names = ColumnNames::new();
        names.assign("_kafka_key").unwrap();
        assert_eq!(
            names.assign("_KAFKA_KEY"),
            Err(NameError::RenameTaken {
                field: "_KAFKA_KEY".into(),
                column: "_KAFKA_KEY_payload".into()
            })
        );
        assert!(NameError::RenameTaken {
            field: "_KAFKA_KEY".into(),
            column: "_KAFKA_KEY_payload".into()
        }
        .to_string()
        .contains("stream's `columns`"));
    }

    #[test]
    fn the_mapping_reads_back_from_the_column_names_in_field_id_order() {
        let (mut names, _) = assign_all(&[]);
        let fields = ["ID__2", "id", "ID", "_kafka_offset", "name", "Name", "x"];
        let payload: Vec<_> = fields
            .iter()
            .map(|f| (names.assign(f).unwrap(), ColumnType::Long))
            .collect();
        let table = TableColumns::for_new_table(&payload).unwrap();
        let (back, per_column) = ColumnNames::of(&table);
        for f in fields {
            assert_eq!(back.column_of(f), names.column_of(f), "{f}");
        }
        assert_eq!(per_column[0].as_deref(), Some("ID__2"));
        assert_eq!(per_column[2].as_deref(), Some("ID"));
        assert_eq!(per_column[3].as_deref(), Some("_kafka_offset"));
        assert_eq!(per_column[5].as_deref(), Some("Name"));
        // The metadata columns hold no field.
        assert_eq!(per_column[payload.len()], None);
        assert_eq!(back.renamed(), names.renamed());
        // A later field is named the same whether or not the table was
        // reloaded in between.
        let mut back = back;
        assert_eq!(back.assign("NAME"), names.assign("NAME"));
        assert_eq!(back.assign("NAME").unwrap(), "NAME__3");
    }
}
