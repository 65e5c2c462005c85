//! Table operations of the embedded catalog, in the shapes of
//! [`RestCatalog`](crate::catalog::rest::RestCatalog)'s: load, create, drop, commit.

use std::collections::HashMap;

use iceberg::spec::{
    FormatVersion, Schema, SortOrder, TableMetadata, TableMetadataBuilder, UnboundPartitionSpec,
};
use iceberg::{TableRequirement, TableUpdate};
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};

use super::{check_name, files, namespace_text, sql_error, Inner, SqlCatalog, TABLE_TYPE};
use crate::catalog::rest::{LoadedTable, Namespace};
use crate::{CatalogError, CatalogErrorKind};

/// The table property that picks the format version at creation; it is a
/// reserved property, so it never lands in the metadata's properties.
const FORMAT_VERSION_PROPERTY: &str = "format-version";

fn table_name(namespace: &Namespace, table: &str) -> String {
    format!("{}.{table}", namespace.join("."))
}

impl SqlCatalog {
    /// The names of the tables in `namespace`, sorted.
    pub async fn list_tables(&self, namespace: &Namespace) -> Result<Vec<String>, CatalogError> {
        let namespace = namespace.clone();
        self.blocking(move |inner| inner.list_tables(&namespace))
            .await
    }

    /// Loads a table; a missing table is [`CatalogErrorKind::NotFound`].
    pub async fn load_table(
        &self,
        namespace: &Namespace,
        table: &str,
    ) -> Result<LoadedTable, CatalogError> {
        let (namespace, table) = (namespace.clone(), table.to_string());
        self.blocking(move |inner| inner.load_table(&namespace, &table))
            .await
    }

    /// Creates an unpartitioned, unsorted table with `schema` (field ids are
    /// assigned afresh from 1, as a REST catalog does) and `properties`
    /// (`format-version`: 1, 2 (the default) or 3) at
    /// `<warehouse>/<namespace>/<table>`, or below the namespace's
    /// `location` property when it has one. A missing namespace is
    /// [`CatalogErrorKind::NotFound`], an existing table a
    /// [`CatalogErrorKind::Conflict`].
    pub async fn create_table(
        &self,
        namespace: &Namespace,
        table: &str,
        schema: &Schema,
        properties: &HashMap<String, String>,
    ) -> Result<LoadedTable, CatalogError> {
        let unpartitioned = UnboundPartitionSpec::default();
        self.create_partitioned_table(
            namespace,
            table,
            schema,
            &unpartitioned,
            &SortOrder::unsorted_order(),
            properties,
        )
        .await
    }

    /// Creates a table partitioned by `spec` (source ids of `schema`,
    /// field ids from 1000), as [`Self::create_table`] otherwise.
    pub async fn create_partitioned_table(
        &self,
        namespace: &Namespace,
        table: &str,
        schema: &Schema,
        spec: &UnboundPartitionSpec,
        sort_order: &SortOrder,
        properties: &HashMap<String, String>,
    ) -> Result<LoadedTable, CatalogError> {
        let (namespace, table) = (namespace.clone(), table.to_string());
        let (schema, spec, properties) = (schema.clone(), spec.clone(), properties.clone());
        let sort_order = sort_order.clone();
        self.blocking(move |inner| {
            inner.create_table(&namespace, &table, schema, spec, sort_order, properties)
        })
        .await
    }

    /// Drops a table; `purge` also deletes its folder when that lies inside
    /// the warehouse folder (files elsewhere are left alone). A missing
    /// table is [`CatalogErrorKind::NotFound`].
    pub async fn drop_table(
        &self,
        namespace: &Namespace,
        table: &str,
        purge: bool,
    ) -> Result<(), CatalogError> {
        let (namespace, table) = (namespace.clone(), table.to_string());
        self.blocking(move |inner| inner.drop_table(&namespace, &table, purge))
            .await
    }

    /// Commits `updates` if every one of `requirements` holds on the
    /// current metadata: writes the next metadata file
    /// (`<location>/metadata/<version + 1>-<uuid>.metadata.json`, the
    /// previous file added to the metadata log) and swaps the catalog's
    /// pointer to it only if it still names the file we read. A failed
    /// requirement, or another commit in between, is a
    /// [`CatalogErrorKind::Conflict`] (reload and try again); updates the
    /// metadata refuses are [`CatalogErrorKind::Protocol`]. No updates:
    /// nothing is written and the current table comes back.
    pub async fn commit_table(
        &self,
        namespace: &Namespace,
        table: &str,
        requirements: &[TableRequirement],
        updates: &[TableUpdate],
    ) -> Result<LoadedTable, CatalogError> {
        let (namespace, table) = (namespace.clone(), table.to_string());
        let (requirements, updates) = (requirements.to_vec(), updates.to_vec());
        self.blocking(move |inner| inner.commit_table(&namespace, &table, &requirements, updates))
            .await
    }
}

impl Inner {
    /// The table's `WHERE` clause (`?1` catalog, `?2` namespace, `?3` name),
    /// skipping views on a catalog that has the `iceberg_type` column.
    fn table_filter(&self) -> &'static str {
        if self.typed {
            "catalog_name = ?1 AND table_namespace = ?2 AND table_name = ?3 \
             AND (iceberg_type = 'TABLE' OR iceberg_type IS NULL)"
        } else {
            "catalog_name = ?1 AND table_namespace = ?2 AND table_name = ?3"
        }
    }

    /// The table's current metadata location; a missing row (or one without
    /// a location) is [`CatalogErrorKind::NotFound`].
    fn pointer(
        &self,
        conn: &Connection,
        dotted: &str,
        table: &str,
        step: &str,
    ) -> Result<String, CatalogError> {
        let sql = format!(
            "SELECT metadata_location FROM iceberg_tables WHERE {}",
            self.table_filter()
        );
        let found: Option<Option<String>> = conn
            .query_row(&sql, params![self.name, dotted, table], |row| row.get(0))
            .optional()
            .map_err(|e| sql_error(step, "reading the table's row", e))?;
        match found {
            Some(Some(location)) if !location.is_empty() => Ok(location),
            Some(_) => Err(CatalogError::new(
                CatalogErrorKind::NotFound,
                step,
                format!("table {dotted}.{table} has no metadata location"),
            )),
            None => Err(CatalogError::new(
                CatalogErrorKind::NotFound,
                step,
                format!("table {dotted}.{table} does not exist"),
            )),
        }
    }

    pub(super) fn list_tables(&self, namespace: &Namespace) -> Result<Vec<String>, CatalogError> {
        let step = self.step("listing tables");
        let dotted = namespace_text(namespace, &step)?;
        let conn = self.connect(&step)?;
        let mut statement = conn
            .prepare(
                "SELECT table_name FROM iceberg_tables WHERE catalog_name = ?1 AND \
                 table_namespace = ?2 ORDER BY table_name",
            )
            .map_err(|e| sql_error(&step, "listing the namespace's tables", e))?;
        let names = statement
            .query_map(params![self.name, dotted], |row| row.get::<_, String>(0))
            .and_then(|rows| rows.collect::<Result<Vec<String>, _>>())
            .map_err(|e| sql_error(&step, "listing the namespace's tables", e))?;
        Ok(names)
    }

    pub(super) fn load_table(
        &self,
        namespace: &Namespace,
        table: &str,
    ) -> Result<LoadedTable, CatalogError> {
        let step = self.step(&format!("loading table {}", table_name(namespace, table)));
        let dotted = namespace_text(namespace, &step)?;
        let conn = self.connect(&step)?;
        let location = self.pointer(&conn, &dotted, table, &step)?;
        let metadata = self.io.read(&location, &step)?;
        Ok(loaded(location, metadata))
    }

    pub(super) fn create_table(
        &self,
        namespace: &Namespace,
        table: &str,
        schema: Schema,
        spec: UnboundPartitionSpec,
        sort_order: SortOrder,
        mut properties: HashMap<String, String>,
    ) -> Result<LoadedTable, CatalogError> {
        let step = self.step(&format!("creating table {}", table_name(namespace, table)));
        let dotted = namespace_text(namespace, &step)?;
        check_name(table, "table name", &step)?;
        let format_version = match properties.remove(FORMAT_VERSION_PROPERTY).as_deref() {
            None | Some("2") => FormatVersion::V2,
            Some("1") => FormatVersion::V1,
            Some("3") => FormatVersion::V3,
            Some(other) => {
                return Err(CatalogError::new(
                    CatalogErrorKind::Protocol,
                    step,
                    format!("unsupported {FORMAT_VERSION_PROPERTY} {other:?} (1, 2 or 3)"),
                ))
            }
        };

        let mut conn = self.connect(&step)?;
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| sql_error(&step, "starting a transaction", e))?;
        if !self.namespace_exists(&tx, &dotted, &step)? {
            return Err(CatalogError::new(
                CatalogErrorKind::NotFound,
                step,
                format!("namespace {dotted} does not exist"),
            ));
        }
        let exists: bool = tx
            .query_row(
                "SELECT COUNT(*) > 0 FROM iceberg_tables \
                 WHERE catalog_name = ?1 AND table_namespace = ?2 AND table_name = ?3",
                params![self.name, dotted, table],
                |row| row.get(0),
            )
            .map_err(|e| sql_error(&step, "looking for the table", e))?;
        if exists {
            return Err(CatalogError::new(
                CatalogErrorKind::Conflict,
                step,
                format!("table {dotted}.{table} already exists"),
            ));
        }
        let table_location = match self.namespace_property(&tx, &dotted, "location", &step)? {
            Some(base) if !base.is_empty() => {
                format!("{}/{table}", base.trim_end_matches('/'))
            }
            _ => format!("{}/{dotted}/{table}", self.warehouse),
        };

        let metadata = TableMetadataBuilder::new(
            schema,
            spec,
            sort_order,
            table_location.clone(),
            format_version,
            properties,
        )
        .and_then(TableMetadataBuilder::build)
        .map_err(|e| {
            CatalogError::new(
                CatalogErrorKind::Protocol,
                &step,
                format!("building the table metadata: {e}"),
            )
            .with_source(e)
        })?
        .metadata;

        let location = files::metadata_location(&table_location, 0);
        self.io.write(&location, &metadata, &step)?;
        let inserted = self
            .insert_row(&tx, &dotted, table, &location)
            .and_then(|()| tx.commit())
            .map_err(|e| sql_error(&step, "inserting the table's row", e));
        if let Err(e) = inserted {
            self.io.remove_quietly(&location);
            return Err(e);
        }
        Ok(loaded(location, metadata))
    }

    fn insert_row(
        &self,
        conn: &Connection,
        dotted: &str,
        table: &str,
        location: &str,
    ) -> rusqlite::Result<()> {
        if self.typed {
            conn.execute(
                "INSERT INTO iceberg_tables (catalog_name, table_namespace, table_name, \
                 metadata_location, previous_metadata_location, iceberg_type) \
                 VALUES (?1, ?2, ?3, ?4, NULL, ?5)",
                params![self.name, dotted, table, location, TABLE_TYPE],
            )?;
        } else {
            conn.execute(
                "INSERT INTO iceberg_tables (catalog_name, table_namespace, table_name, \
                 metadata_location, previous_metadata_location) VALUES (?1, ?2, ?3, ?4, NULL)",
                params![self.name, dotted, table, location],
            )?;
        }
        Ok(())
    }

    pub(super) fn drop_table(
        &self,
        namespace: &Namespace,
        table: &str,
        purge: bool,
    ) -> Result<(), CatalogError> {
        let step = self.step(&format!("dropping table {}", table_name(namespace, table)));
        let dotted = namespace_text(namespace, &step)?;
        let conn = self.connect(&step)?;
        let location = self.pointer(&conn, &dotted, table, &step)?;
        // The table's folder, read before the row goes (an unreadable
        // metadata file only means there is nothing we can purge).
        let folder = purge
            .then(|| self.io.read(&location, &step).ok())
            .flatten()
            .map(|m| m.location().trim_end_matches('/').to_string());
        let sql = format!("DELETE FROM iceberg_tables WHERE {}", self.table_filter());
        let deleted = conn
            .execute(&sql, params![self.name, dotted, table])
            .map_err(|e| sql_error(&step, "deleting the table's row", e))?;
        if deleted == 0 {
            return Err(CatalogError::new(
                CatalogErrorKind::NotFound,
                step,
                format!("table {dotted}.{table} does not exist"),
            ));
        }
        let folder = match folder.filter(|f| self.inside_warehouse(f)) {
            // Another row (another catalog name in this file, or a table
            // registered inside this one's folder) keeps the files alive.
            Some(folder) if !self.folder_in_use(&conn, &folder, &step)? => Some(folder),
            _ => None,
        };
        if let Some(folder) = folder {
            self.io.remove_folder(&folder, &step)?;
        }
        Ok(())
    }

    /// Whether the table folder `location` lies strictly inside the
    /// warehouse (files elsewhere are never purged).
    fn inside_warehouse(&self, location: &str) -> bool {
        match files::local_path(location) {
            Some(path) => files::strictly_inside(&path, &self.folder) && self.io.remote.is_none(),
            None => location
                .strip_prefix(self.warehouse.as_str())
                .is_some_and(|rest| rest.starts_with('/') && !rest.split('/').any(|p| p == "..")),
        }
    }

    /// Whether any table row, of any catalog name, has its metadata inside
    /// `folder`.
    fn folder_in_use(
        &self,
        conn: &Connection,
        folder: &str,
        step: &str,
    ) -> Result<bool, CatalogError> {
        let local_folder = files::local_path(folder);
        let mut stmt = conn
            .prepare("SELECT metadata_location FROM iceberg_tables")
            .map_err(|e| sql_error(step, "listing the tables' files", e))?;
        let locations = stmt
            .query_map([], |row| row.get::<_, Option<String>>(0))
            .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
            .map_err(|e| sql_error(step, "listing the tables' files", e))?;
        Ok(locations
            .iter()
            .flatten()
            .any(|l| match (&local_folder, files::local_path(l)) {
                (Some(folder), Some(path)) => path.starts_with(folder),
                _ => l.starts_with(&format!("{folder}/")),
            }))
    }

    pub(super) fn commit_table(
        &self,
        namespace: &Namespace,
        table: &str,
        requirements: &[TableRequirement],
        updates: Vec<TableUpdate>,
    ) -> Result<LoadedTable, CatalogError> {
        let step = self.step(&format!(
            "committing to table {}",
            table_name(namespace, table)
        ));
        let dotted = namespace_text(namespace, &step)?;
        let mut conn = self.connect(&step)?;
        let base_location = self.pointer(&conn, &dotted, table, &step)?;
        let base = self.io.read(&base_location, &step)?;

        for requirement in requirements {
            requirement.check(Some(&base)).map_err(|e| {
                CatalogError::new(CatalogErrorKind::Conflict, &step, e.to_string()).with_source(e)
            })?;
        }
        if updates.is_empty() {
            return Ok(loaded(base_location, base));
        }

        let next = apply_updates(&base, &base_location, updates).map_err(|e| {
            CatalogError::new(
                CatalogErrorKind::Protocol,
                &step,
                format!("applying the updates: {e}"),
            )
            .with_source(e)
        })?;
        let location =
            files::metadata_location(next.location(), files::metadata_version(&base_location) + 1);
        self.io.write(&location, &next, &step)?;

        match self.swap_pointer(&mut conn, &dotted, table, &base_location, &location) {
            Ok(true) => Ok(loaded(location, next)),
            Ok(false) => {
                self.io.remove_quietly(&location);
                Err(CatalogError::new(
                    CatalogErrorKind::Conflict,
                    step,
                    format!(
                        "table {dotted}.{table} was changed by another commit \
                         (its metadata is no longer {base_location}): reload it and retry"
                    ),
                ))
            }
            Err(e) => {
                // The transaction rolled back, unless the failure came after
                // SQLite made it durable: look before deleting the file.
                match self.pointer(&conn, &dotted, table, &step) {
                    Ok(now) if now == location => Ok(loaded(location, next)),
                    _ => {
                        self.io.remove_quietly(&location);
                        Err(sql_error(&step, "swapping the metadata pointer", e))
                    }
                }
            }
        }
    }

    /// `UPDATE ... WHERE metadata_location = <expected>` in an `IMMEDIATE`
    /// transaction: `false` when the row no longer names `expected`.
    pub(super) fn swap_pointer(
        &self,
        conn: &mut Connection,
        dotted: &str,
        table: &str,
        expected: &str,
        new: &str,
    ) -> rusqlite::Result<bool> {
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let sql = format!(
            "UPDATE iceberg_tables SET metadata_location = ?4, previous_metadata_location = ?5 \
             WHERE {} AND metadata_location = ?5",
            self.table_filter()
        );
        let changed = tx.execute(&sql, params![self.name, dotted, table, new, expected])?;
        if changed != 1 {
            return Ok(false);
        }
        tx.commit()?;
        Ok(true)
    }
}

/// The metadata after `updates`, the previous file in its metadata log.
fn apply_updates(
    base: &TableMetadata,
    base_location: &str,
    updates: Vec<TableUpdate>,
) -> iceberg::Result<TableMetadata> {
    let mut builder =
        TableMetadataBuilder::new_from_metadata(base.clone(), Some(base_location.to_string()));
    for update in updates {
        builder = update.apply(builder)?;
    }
    Ok(builder.build()?.metadata)
}

fn loaded(location: String, metadata: TableMetadata) -> LoadedTable {
    LoadedTable {
        metadata_location: Some(location),
        metadata,
        config: HashMap::new(),
        storage_credentials: Vec::new(),
    }
}
