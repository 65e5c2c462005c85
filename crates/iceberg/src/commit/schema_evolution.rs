//! Schema evolution that rides along with a data commit: new optional
//! columns and the type promotions Iceberg allows in place (`int` ->
//! `long`, `float` -> `double`), committed in the same request as the snapshot whose data files
//! were written with them.
//!
//! [`crate::TableHandle::with_columns`] gives a handle whose metadata already has
//! the new schema (so data files, manifests and the snapshot use it) and
//! remembers the table as loaded. The commit then sends `add-schema` +
//! `set-current-schema` before the snapshot, required to find the schema
//! and last column id as loaded; if another writer changed the schema
//! meanwhile, nothing is committed (the next sync starts from the new
//! schema).

use std::fmt;

use iceberg::spec::{Schema, TableMetadataBuilder};
use iceberg::{TableRequirement, TableUpdate};

use crate::catalog::rest::LoadedTable;
use crate::error::{IcebergError, IcebergErrorKind};
use crate::write::schema::{columns_of, iceberg_schema, Column, ColumnType};

/// One change to a table's columns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SchemaChange {
    /// A new optional column.
    Added {
        /// The column name.
        column: String,
        /// Its type.
        ty: ColumnType,
    },
    /// A column promoted to a wider type.
    Widened {
        /// The column name.
        column: String,
        /// The type it had.
        from: ColumnType,
        /// The type it has now.
        to: ColumnType,
    },
}

impl fmt::Display for SchemaChange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Added { column, ty } => {
                write!(f, "added column {column} ({})", ty.name())
            }
            Self::Widened { column, from, to } => write!(
                f,
                "widened column {column} from {} to {}",
                from.name(),
                to.name()
            ),
        }
    }
}

/// Whether Iceberg allows promoting a column of type `from` to `to` in place.
pub fn is_allowed_promotion(from: &ColumnType, to: &ColumnType) -> bool {
    use ColumnType::*;
    match (from, to) {
        (a, b) if a == b => true,
        (Int, Long) | (Float, Double) => true,
        (
            Decimal {
                precision: p1,
                scale: s1,
            },
            Decimal {
                precision: p2,
                scale: s2,
            },
        ) => s1 == s2 && p2 >= p1,
        // A struct may gain optional fields and promote its own.
        (Struct(a), Struct(b)) => {
            a.iter().all(|fa| {
                b.iter().any(|fb| {
                    fb.field_id == fa.field_id
                        && fb.name == fa.name
                        && fb.required == fa.required
                        && is_allowed_promotion(&fa.ty, &fb.ty)
                })
            }) && b
                .iter()
                .filter(|fb| !a.iter().any(|fa| fa.field_id == fb.field_id))
                .all(|fb| !fb.required)
        }
        (List(a), List(b)) => a.field_id == b.field_id && is_allowed_promotion(&a.ty, &b.ty),
        (Map(a), Map(b)) => {
            a.key == b.key
                && a.value.field_id == b.value.field_id
                && is_allowed_promotion(&a.value.ty, &b.value.ty)
        }
        _ => false,
    }
}

/// A schema to add in the next commit, and the table it was planned on.
#[derive(Debug, Clone)]
pub(crate) struct PendingSchema {
    /// The table as loaded, before the change.
    pub(crate) base: LoadedTable,
    /// The new schema (its id is assigned by the catalog: the next free one).
    pub(crate) schema: Schema,
    /// What changed, for reports.
    pub(crate) changes: Vec<SchemaChange>,
}

impl PendingSchema {
    /// The updates to send before the snapshot's and the requirements that
    /// keep them safe.
    pub(crate) fn updates_and_requirements(&self) -> (Vec<TableUpdate>, Vec<TableRequirement>) {
        let base = &self.base.metadata;
        (
            vec![
                TableUpdate::AddSchema {
                    schema: self.schema.clone(),
                },
                TableUpdate::SetCurrentSchema { schema_id: -1 },
            ],
            vec![
                TableRequirement::CurrentSchemaIdMatch {
                    current_schema_id: base.current_schema_id(),
                },
                TableRequirement::LastAssignedFieldIdMatch {
                    last_assigned_field_id: base.last_column_id(),
                },
            ],
        )
    }

    /// Whether `table` still has the schema this change was planned on.
    pub(crate) fn still_applies_to(&self, table: &LoadedTable) -> bool {
        let (base, now) = (&self.base.metadata, &table.metadata);
        base.current_schema_id() == now.current_schema_id()
            && base.last_column_id() == now.last_column_id()
    }
}

/// The changes that turn `current` into `wanted`, or why that is not an
/// allowed evolution: every current column must stay (same field id, same
/// name) with the same type or an allowed promotion; new columns must be
/// optional with field ids above `last_column_id`.
pub fn plan_schema_change(
    current: &Schema,
    last_column_id: i32,
    wanted: &[Column],
) -> Result<Vec<SchemaChange>, IcebergError> {
    let refuse = |detail: String| {
        IcebergError::new(IcebergErrorKind::Data, "evolving the table schema", detail)
    };
    for (i, w) in wanted.iter().enumerate() {
        if let Some(other) = wanted[..i]
            .iter()
            .find(|o| o.field_id == w.field_id || o.name == w.name)
        {
            return Err(refuse(format!(
                "columns {} and {} share a name or field id ({})",
                other.name, w.name, w.field_id
            )));
        }
    }
    let have = columns_of(current)?;
    let mut changes = Vec::new();
    for h in &have {
        let Some(w) = wanted.iter().find(|w| w.field_id == h.field_id) else {
            return Err(refuse(format!(
                "column {} (field id {}) would be dropped; topicberg only adds or widens columns",
                h.name, h.field_id
            )));
        };
        if w.name != h.name {
            return Err(refuse(format!(
                "field id {} is column {} in the table, not {}",
                h.field_id, h.name, w.name
            )));
        }
        let same = w.column_type == h.column_type
            || matches!(
                (&h.column_type, &w.column_type),
                (ColumnType::String, ColumnType::Json) | (ColumnType::Json, ColumnType::String)
            );
        if !same {
            if !is_allowed_promotion(&h.column_type, &w.column_type) {
                return Err(refuse(format!(
                    "column {} is {} and cannot become {}: Iceberg only promotes int to long, float to double, decimal precision, and adds optional struct fields",
                    h.name,
                    h.column_type.name(),
                    w.column_type.name()
                )));
            }
            changes.push(SchemaChange::Widened {
                column: h.name.clone(),
                from: h.column_type.clone(),
                to: w.column_type.clone(),
            });
        }
    }
    for w in wanted
        .iter()
        .filter(|w| !have.iter().any(|h| h.field_id == w.field_id))
    {
        if w.field_id <= last_column_id {
            return Err(refuse(format!(
                "new column {} has field id {}, which the table already assigned (last column id {last_column_id})",
                w.name, w.field_id
            )));
        }
        if w.required {
            return Err(refuse(format!(
                "new column {} must be optional: older rows have no value for it",
                w.name
            )));
        }
        if let Some(h) = have.iter().find(|h| h.name == w.name) {
            return Err(refuse(format!(
                "column {} exists with field id {}, not {}",
                w.name, h.field_id, w.field_id
            )));
        }
        changes.push(SchemaChange::Added {
            column: w.name.clone(),
            ty: w.column_type.clone(),
        });
    }
    Ok(changes)
}

impl PendingSchema {
    /// The change that gives `base` (the table as loaded) the schema
    /// `columns` (every column with its field id; new ones above the
    /// table's last column id), or `None` when nothing changes.
    pub(crate) fn plan(
        base: &LoadedTable,
        columns: &[Column],
    ) -> Result<Option<PendingSchema>, IcebergError> {
        let changes = plan_schema_change(
            base.metadata.current_schema(),
            base.metadata.last_column_id(),
            columns,
        )?;
        if changes.is_empty() {
            return Ok(None);
        }
        let schema = iceberg_schema(columns)?;
        Ok(Some(PendingSchema {
            base: base.clone(),
            schema,
            changes,
        }))
    }

    /// The table as loaded in `base`, with the new schema applied locally.
    pub(crate) fn apply(&self) -> Result<LoadedTable, IcebergError> {
        let built = TableMetadataBuilder::new_from_metadata(
            self.base.metadata.clone(),
            self.base.metadata_location.clone(),
        )
        .add_current_schema(self.schema.clone())
        .and_then(|b| b.build())
        .map_err(|e| {
            IcebergError::new(
                IcebergErrorKind::Data,
                "evolving the table schema",
                e.message().to_string(),
            )
            .with_source(e)
        })?;
        Ok(LoadedTable {
            metadata_location: self.base.metadata_location.clone(),
            metadata: built.metadata,
            config: self.base.config.clone(),
            storage_credentials: self.base.storage_credentials.clone(),
        })
    }

    /// After a reload: this change planned again on `reloaded` when its
    /// schema is still the one the change was planned on; `None` when
    /// another writer already made the same change (every column of this
    /// change's schema is in the table's with the same field id, name, type
    /// and optionality: the data files fit the table as it is, so the
    /// change is adopted, not committed again); else a conflict (nothing
    /// committed, the data files use field ids the table may have given to
    /// other columns).
    pub(crate) fn rebase(
        mut self,
        reloaded: &LoadedTable,
        table: &str,
    ) -> Result<Option<PendingSchema>, IcebergError> {
        if self.made_in(reloaded) {
            let changes: Vec<String> = self.changes.iter().map(ToString::to_string).collect();
            tracing::info!(table, changes = %changes.join(", "), "another writer made the same schema change first; adopting it");
            return Ok(None);
        }
        if !self.still_applies_to(reloaded) {
            return Err(IcebergError::new(
                IcebergErrorKind::SchemaMoved,
                format!("committing to table {table}"),
                "another writer changed the table's schema while this sync wrote files with new columns; \
                 nothing was committed and the next sync starts from the new schema",
            ));
        }
        self.base = reloaded.clone();
        Ok(Some(self))
    }

    /// Whether `table`'s schema changed and now has every column of this
    /// change's schema as it is planned (same id, name, type, optionality).
    fn made_in(&self, table: &LoadedTable) -> bool {
        let now = table.metadata.current_schema();
        !self.still_applies_to(table)
            && self.schema.as_struct().fields().iter().all(|wanted| {
                now.field_by_id(wanted.id).is_some_and(|have| {
                    have.name == wanted.name
                        && have.field_type == wanted.field_type
                        && have.required == wanted.required
                })
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema(columns: &[Column]) -> Schema {
        iceberg_schema(columns).unwrap()
    }

    #[test]
    fn adding_and_widening_are_planned_and_named() {
        let current = schema(&[
            Column::optional("id", 1, ColumnType::Long),
            Column::optional("qty", 2, ColumnType::Int),
        ]);
        let wanted = [
            Column::optional("id", 1, ColumnType::Long),
            Column::optional("qty", 2, ColumnType::Long),
            Column::optional("coupon", 3, ColumnType::String),
        ];
        let changes = plan_schema_change(&current, 2, &wanted).unwrap();
        let text: Vec<String> = changes.iter().map(|c| c.to_string()).collect();
        assert_eq!(
            text,
            [
                "widened column qty from int to long",
                "added column coupon (string)"
            ]
        );
    }

    #[test]
    fn narrowing_dropping_and_reused_ids_are_refused() {
        let current = schema(&[
            Column::optional("id", 1, ColumnType::Long),
            Column::optional("price", 2, ColumnType::Double),
        ]);
        let narrowed = [
            Column::optional("id", 1, ColumnType::Int),
            Column::optional("price", 2, ColumnType::Double),
        ];
        let e = plan_schema_change(&current, 2, &narrowed).unwrap_err();
        assert!(
            e.to_string().contains("id is long and cannot become int"),
            "{e}"
        );
        let dropped = [Column::optional("id", 1, ColumnType::Long)];
        let e = plan_schema_change(&current, 2, &dropped).unwrap_err();
        assert!(e.to_string().contains("would be dropped"), "{e}");
        let reused = [
            Column::optional("id", 1, ColumnType::Long),
            Column::optional("price", 2, ColumnType::Double),
            Column::optional("coupon", 2, ColumnType::String),
        ];
        assert!(plan_schema_change(&current, 5, &reused).is_err());
        let below_last = [
            Column::optional("id", 1, ColumnType::Long),
            Column::optional("price", 2, ColumnType::Double),
            Column::optional("coupon", 4, ColumnType::String),
        ];
        let e = plan_schema_change(&current, 5, &below_last).unwrap_err();
        assert!(e.to_string().contains("already assigned"), "{e}");
    }

    fn table(columns: &[Column]) -> LoadedTable {
        let metadata = TableMetadataBuilder::new(
            schema(columns),
            iceberg::spec::PartitionSpec::unpartition_spec(),
            iceberg::spec::SortOrder::unsorted_order(),
            "file:///tmp/t".to_string(),
            iceberg::spec::FormatVersion::V2,
            std::collections::HashMap::new(),
        )
        .unwrap()
        .build()
        .unwrap()
        .metadata;
        LoadedTable {
            metadata_location: None,
            metadata,
            config: Default::default(),
            storage_credentials: Vec::new(),
        }
    }

    #[test]
    fn the_same_change_landed_by_another_writer_is_adopted_and_another_change_conflicts() {
        let id = Column::optional("id", 1, ColumnType::Long);
        let coupon = Column::optional("coupon", 2, ColumnType::String);
        let base = table(std::slice::from_ref(&id));
        let mine = [id.clone(), coupon.clone()];
        let pending = || PendingSchema::plan(&base, &mine).unwrap().unwrap();
        // Another writer added the same column under the same id first.
        let same = PendingSchema::plan(&base, &mine)
            .unwrap()
            .unwrap()
            .apply()
            .unwrap();
        assert!(pending().rebase(&same, "t").unwrap().is_none());
        // It added another column under that id: the files would be wrong.
        let other = [id.clone(), Column::optional("vip", 2, ColumnType::Boolean)];
        let other = PendingSchema::plan(&base, &other)
            .unwrap()
            .unwrap()
            .apply()
            .unwrap();
        let e = pending().rebase(&other, "t").unwrap_err();
        assert_eq!(e.kind, IcebergErrorKind::SchemaMoved);
        // Nothing changed: the change is planned again on the reload.
        assert!(pending().rebase(&base, "t").unwrap().is_some());
    }
}
