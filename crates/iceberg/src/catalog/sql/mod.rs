//! The embedded catalog (`catalog = "sql"`): a SQLite catalog file plus a
//! local warehouse folder, laid out exactly as PyIceberg's `SqlCatalog` and
//! Iceberg's `JdbcCatalog` lay theirs out, so that both open it as is:
//!
//! ```text
//! <folder>/catalog.db                                   the SQLite catalog
//! <folder>/<ns>/<table>/metadata/00000-<uuid>.metadata.json
//! <folder>/<ns>/<table>/metadata/00001-<uuid>.metadata.json  (one per commit)
//! <folder>/<ns>/<table>/data/...                        (written by the caller)
//! ```
//!
//! A nested namespace is one folder named with its levels joined by `.`
//! (`a.b`), as PyIceberg does. Locations are `file:///abs/path` URIs.
//!
//! The SQLite file holds two tables (PyIceberg's "v1" schema):
//!
//! - `iceberg_tables (catalog_name, table_namespace, table_name,
//!   metadata_location, previous_metadata_location, iceberg_type)`: one row
//!   per table, `metadata_location` pointing at the current metadata file;
//! - `iceberg_namespace_properties (catalog_name, namespace, property_key,
//!   property_value)`: one row per namespace property (`exists = true` for a
//!   namespace created without properties).
//!
//! A commit writes a new metadata file, then swaps the pointer with
//! `UPDATE ... WHERE metadata_location = <the one we read>` in an
//! `IMMEDIATE` transaction: zero rows changed means another writer (this
//! process, another topicberg, PyIceberg, Spark) committed first, which is a
//! [`CatalogErrorKind::Conflict`], and the file we wrote is deleted.
//!
//! With a remote warehouse ([`SqlCatalog::open_with_warehouse`]: an
//! `s3://`, `gs://` or `abfss://` URI), the SQLite file stays in the local
//! folder and the tables' folders (metadata and data) go under the URI;
//! metadata files are then read and written through the warehouse's
//! storage. Each new metadata file has a fresh name, so no write ever
//! replaces another; the pointer swap stays the commit.
//!
//! Opening PyIceberg on the same folder:
//!
//! ```python
//! SqlCatalog("<catalog_name>", uri="sqlite:///<folder>/catalog.db",
//!            warehouse="file://<folder>")
//! ```
//!
//! SQLite work runs on tokio's blocking pool, one short-lived connection per
//! call (SQLite's own locking then serialises writers, in this process as
//! between processes).

mod files;
mod tables;
#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use iceberg::io::FileIO;
use rusqlite::{params, Connection, ErrorCode, OptionalExtension, TransactionBehavior};

use crate::catalog::rest::Namespace;
use crate::{CatalogError, CatalogErrorKind};

/// The SQLite file's name inside the catalog folder.
pub const CATALOG_FILE: &str = "catalog.db";

/// A catalog name to use when nothing else decides one: PyIceberg's
/// documentation opens its catalogs as `"default"`, and the readers'
/// `--catalog sql` assumes it unless told `--sql-name`.
pub const DEFAULT_CATALOG_NAME: &str = "default";

/// How long a statement waits for another writer's lock before failing.
const BUSY_TIMEOUT: Duration = Duration::from_secs(30);

/// The `iceberg_type` of a table row (the other value, `VIEW`, is never ours).
const TABLE_TYPE: &str = "TABLE";

const CREATE_TABLES: &str = "
CREATE TABLE IF NOT EXISTS iceberg_tables (
    catalog_name VARCHAR(255) NOT NULL,
    table_namespace VARCHAR(255) NOT NULL,
    table_name VARCHAR(255) NOT NULL,
    metadata_location VARCHAR(1000),
    previous_metadata_location VARCHAR(1000),
    iceberg_type VARCHAR(5),
    PRIMARY KEY (catalog_name, table_namespace, table_name)
);
CREATE TABLE IF NOT EXISTS iceberg_namespace_properties (
    catalog_name VARCHAR(255) NOT NULL,
    namespace VARCHAR(255) NOT NULL,
    property_key VARCHAR(255) NOT NULL,
    property_value VARCHAR(1000) NOT NULL,
    PRIMARY KEY (catalog_name, namespace, property_key)
);
";

/// The embedded Iceberg catalog: a SQLite file and a warehouse folder.
///
/// Cheap to clone; every clone uses the same files.
#[derive(Debug, Clone)]
pub struct SqlCatalog {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    /// The warehouse folder, absolute.
    folder: PathBuf,
    /// `<folder>/catalog.db`.
    db_path: PathBuf,
    /// The `catalog_name` column of every row we read or write.
    name: String,
    /// `file://<folder>`, or the remote warehouse URI (no trailing `/`):
    /// table locations start with it.
    warehouse: String,
    /// How metadata files are read and written.
    io: files::MetadataIo,
    /// Whether `iceberg_tables` has the `iceberg_type` column (a catalog
    /// created by an older PyIceberg or JDBC catalog may not).
    typed: bool,
}

impl SqlCatalog {
    /// Opens the catalog in `path`, creating the folder, the SQLite file and
    /// its tables when missing. `catalog_name` is the `catalog_name` column
    /// (PyIceberg's first argument to `SqlCatalog`); one file may hold
    /// several catalogs.
    pub fn open(path: &Path, catalog_name: &str) -> Result<SqlCatalog, CatalogError> {
        Self::open_with_warehouse(path, catalog_name, None)
    }

    /// Opens the catalog as [`SqlCatalog::open`] does, its tables under
    /// `warehouse` when given: a remote URI (`s3://bucket/prefix`,
    /// `gs://...`, `abfss://...`) and the [`FileIO`] that reaches it.
    pub fn open_with_warehouse(
        path: &Path,
        catalog_name: &str,
        warehouse: Option<(&str, FileIO)>,
    ) -> Result<SqlCatalog, CatalogError> {
        let step = format!("opening the SQL catalog in {}", path.display());
        if catalog_name.is_empty() {
            return Err(CatalogError::new(
                CatalogErrorKind::Protocol,
                step,
                "the catalog name is empty",
            ));
        }
        std::fs::create_dir_all(path).map_err(|e| {
            CatalogError::new(
                CatalogErrorKind::Server,
                &step,
                format!("cannot create the folder: {e}"),
            )
            .with_source(e)
        })?;
        let folder = path.canonicalize().map_err(|e| {
            CatalogError::new(CatalogErrorKind::Server, &step, format!("{e}")).with_source(e)
        })?;
        let Some(folder_text) = folder.to_str() else {
            return Err(CatalogError::new(
                CatalogErrorKind::Protocol,
                step,
                "the folder's path is not valid UTF-8",
            ));
        };
        let (warehouse, io) = match warehouse {
            Some((uri, file_io)) => (
                uri.trim_end_matches('/').to_string(),
                files::MetadataIo {
                    remote: Some(file_io),
                },
            ),
            None => (
                files::path_to_uri(folder_text),
                files::MetadataIo::default(),
            ),
        };
        let db_path = folder.join(CATALOG_FILE);
        let step = format!("opening the SQL catalog {}", db_path.display());
        let conn = connect(&db_path, &step)?;
        conn.execute_batch(CREATE_TABLES)
            .map_err(|e| sql_error(&step, "creating the catalog tables", e))?;
        let typed = has_column(&conn, "iceberg_tables", "iceberg_type")
            .map_err(|e| sql_error(&step, "reading the table layout", e))?;
        Ok(SqlCatalog {
            inner: Arc::new(Inner {
                folder,
                db_path,
                name: catalog_name.to_string(),
                warehouse,
                io,
                typed,
            }),
        })
    }

    /// The warehouse folder (absolute).
    pub fn folder(&self) -> &Path {
        &self.inner.folder
    }

    /// The SQLite catalog file.
    pub fn db_path(&self) -> &Path {
        &self.inner.db_path
    }

    /// The `catalog_name` this catalog reads and writes.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The warehouse root as a URI (`file:///abs/folder`, or the remote
    /// warehouse's).
    pub fn warehouse(&self) -> &str {
        &self.inner.warehouse
    }

    /// Lists every namespace (`parent`: only its direct children), sorted.
    /// A missing `parent` is [`CatalogErrorKind::NotFound`].
    pub async fn list_namespaces(
        &self,
        parent: Option<&Namespace>,
    ) -> Result<Vec<Namespace>, CatalogError> {
        let parent = parent.cloned().unwrap_or_default();
        self.blocking(move |inner| inner.list_namespaces(&parent))
            .await
    }

    /// Creates a namespace; an existing one is a [`CatalogErrorKind::Conflict`].
    pub async fn create_namespace(&self, namespace: &Namespace) -> Result<(), CatalogError> {
        let namespace = namespace.clone();
        self.blocking(move |inner| inner.create_namespace(&namespace))
            .await
    }

    /// Creates the namespace unless it exists.
    pub async fn ensure_namespace(&self, namespace: &Namespace) -> Result<(), CatalogError> {
        match self.create_namespace(namespace).await {
            Err(e) if e.kind == CatalogErrorKind::Conflict => Ok(()),
            other => other,
        }
    }

    /// Drops an empty namespace: a missing one is
    /// [`CatalogErrorKind::NotFound`], one that still holds tables a
    /// [`CatalogErrorKind::Conflict`].
    pub async fn drop_namespace(&self, namespace: &Namespace) -> Result<(), CatalogError> {
        let namespace = namespace.clone();
        self.blocking(move |inner| inner.drop_namespace(&namespace))
            .await
    }

    /// Runs `work` on tokio's blocking pool.
    async fn blocking<T, F>(&self, work: F) -> Result<T, CatalogError>
    where
        T: Send + 'static,
        F: FnOnce(&Inner) -> Result<T, CatalogError> + Send + 'static,
    {
        let inner = Arc::clone(&self.inner);
        tokio::task::spawn_blocking(move || work(&inner))
            .await
            .map_err(|e| {
                CatalogError::new(
                    CatalogErrorKind::Server,
                    format!("using the SQL catalog {}", self.inner.db_path.display()),
                    format!("the catalog task failed: {e}"),
                )
                .with_source(e)
            })?
    }
}

impl Inner {
    fn connect(&self, step: &str) -> Result<Connection, CatalogError> {
        connect(&self.db_path, step)
    }

    fn step(&self, what: &str) -> String {
        format!("{what} (SQL catalog {})", self.db_path.display())
    }

    /// Every namespace named in either table, dotted.
    fn namespace_rows(&self, conn: &Connection, step: &str) -> Result<Vec<String>, CatalogError> {
        let mut stmt = conn
            .prepare_cached(
                "SELECT table_namespace FROM iceberg_tables WHERE catalog_name = ?1 \
                 UNION SELECT namespace FROM iceberg_namespace_properties WHERE catalog_name = ?1",
            )
            .map_err(|e| sql_error(step, "listing namespaces", e))?;
        let rows = stmt
            .query_map(params![self.name], |row| row.get::<_, String>(0))
            .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
            .map_err(|e| sql_error(step, "listing namespaces", e))?;
        Ok(rows)
    }

    /// Whether `dotted` exists: named itself, or as the parent of another
    /// (PyIceberg's and the JDBC catalog's rule).
    fn namespace_exists(
        &self,
        conn: &Connection,
        dotted: &str,
        step: &str,
    ) -> Result<bool, CatalogError> {
        let child_prefix = format!("{dotted}.");
        Ok(self
            .namespace_rows(conn, step)?
            .iter()
            .any(|ns| ns == dotted || ns.starts_with(&child_prefix)))
    }

    fn list_namespaces(&self, parent: &Namespace) -> Result<Vec<Namespace>, CatalogError> {
        let step = self.step("listing namespaces");
        let conn = self.connect(&step)?;
        if !parent.is_empty() {
            let dotted = namespace_text(parent, &step)?;
            if !self.namespace_exists(&conn, &dotted, &step)? {
                return Err(CatalogError::new(
                    CatalogErrorKind::NotFound,
                    step,
                    format!("namespace {dotted} does not exist"),
                ));
            }
        }
        let mut found: Vec<Namespace> = self
            .namespace_rows(&conn, &step)?
            .iter()
            .map(|ns| ns.split('.').map(str::to_string).collect::<Namespace>())
            .filter(|levels| levels.len() > parent.len() && levels.starts_with(parent))
            .map(|levels| levels[..=parent.len()].to_vec())
            .collect();
        found.sort();
        found.dedup();
        Ok(found)
    }

    fn create_namespace(&self, namespace: &Namespace) -> Result<(), CatalogError> {
        let step = self.step(&format!("creating namespace {}", namespace.join(".")));
        let dotted = namespace_text(namespace, &step)?;
        let mut conn = self.connect(&step)?;
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| sql_error(&step, "starting a transaction", e))?;
        if self.namespace_exists(&tx, &dotted, &step)? {
            return Err(CatalogError::new(
                CatalogErrorKind::Conflict,
                step,
                format!("namespace {dotted} already exists"),
            ));
        }
        tx.execute(
            "INSERT INTO iceberg_namespace_properties \
             (catalog_name, namespace, property_key, property_value) VALUES (?1, ?2, 'exists', 'true')",
            params![self.name, dotted],
        )
        .map_err(|e| sql_error(&step, "inserting the namespace", e))?;
        tx.commit()
            .map_err(|e| sql_error(&step, "committing the transaction", e))
    }

    fn drop_namespace(&self, namespace: &Namespace) -> Result<(), CatalogError> {
        let step = self.step(&format!("dropping namespace {}", namespace.join(".")));
        let dotted = namespace_text(namespace, &step)?;
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
        let tables: i64 = tx
            .query_row(
                "SELECT COUNT(*) FROM iceberg_tables WHERE catalog_name = ?1 AND table_namespace = ?2",
                params![self.name, dotted],
                |row| row.get(0),
            )
            .map_err(|e| sql_error(&step, "counting the namespace's tables", e))?;
        if tables > 0 {
            return Err(CatalogError::new(
                CatalogErrorKind::Conflict,
                step,
                format!("namespace {dotted} is not empty: it holds {tables} table(s)"),
            ));
        }
        tx.execute(
            "DELETE FROM iceberg_namespace_properties WHERE catalog_name = ?1 AND namespace = ?2",
            params![self.name, dotted],
        )
        .map_err(|e| sql_error(&step, "deleting the namespace", e))?;
        tx.commit()
            .map_err(|e| sql_error(&step, "committing the transaction", e))
    }

    /// A namespace property (`location` decides where its tables go).
    fn namespace_property(
        &self,
        conn: &Connection,
        dotted: &str,
        key: &str,
        step: &str,
    ) -> Result<Option<String>, CatalogError> {
        conn.query_row(
            "SELECT property_value FROM iceberg_namespace_properties \
             WHERE catalog_name = ?1 AND namespace = ?2 AND property_key = ?3",
            params![self.name, dotted, key],
            |row| row.get(0),
        )
        .optional()
        .map_err(|e| sql_error(step, "reading a namespace property", e))
    }
}

/// Opens one connection with a busy timeout.
fn connect(db_path: &Path, step: &str) -> Result<Connection, CatalogError> {
    let conn = Connection::open(db_path).map_err(|e| sql_error(step, "opening the file", e))?;
    conn.busy_timeout(BUSY_TIMEOUT)
        .map_err(|e| sql_error(step, "setting the busy timeout", e))?;
    Ok(conn)
}

fn has_column(conn: &Connection, table: &str, column: &str) -> rusqlite::Result<bool> {
    let mut stmt = conn.prepare(&format!("PRAGMA table_info({table})"))?;
    let names = stmt
        .query_map([], |row| row.get::<_, String>(1))?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(names.iter().any(|n| n.eq_ignore_ascii_case(column)))
}

/// A SQLite failure as a [`CatalogError`]: a lock held too long is
/// retryable ([`CatalogErrorKind::Server`]), a file that is not a catalog
/// is [`CatalogErrorKind::Protocol`].
fn sql_error(step: &str, doing: &str, e: rusqlite::Error) -> CatalogError {
    let kind = match e.sqlite_error_code() {
        Some(ErrorCode::NotADatabase | ErrorCode::DatabaseCorrupt) => CatalogErrorKind::Protocol,
        Some(ErrorCode::ConstraintViolation) => CatalogErrorKind::Conflict,
        _ => CatalogErrorKind::Server,
    };
    CatalogError::new(kind, step, format!("{doing}: {e}")).with_source(e)
}

/// A namespace as the catalog stores it: levels joined by `.`. A level must
/// not be empty nor hold `.` (it would read back as two levels) or `/`.
fn namespace_text(namespace: &Namespace, step: &str) -> Result<String, CatalogError> {
    if namespace.is_empty() {
        return Err(CatalogError::new(
            CatalogErrorKind::Protocol,
            step,
            "the namespace is empty",
        ));
    }
    for level in namespace {
        check_name(level, "namespace level", step)?;
        if level.contains('.') {
            return Err(CatalogError::new(
                CatalogErrorKind::Protocol,
                step,
                format!(
                    "namespace level {level:?} holds a '.': the SQL catalog joins levels with '.'"
                ),
            ));
        }
    }
    Ok(namespace.join("."))
}

/// A name that becomes a folder: not empty, no `/`, `\`, NUL, `.` or `..`.
fn check_name(name: &str, what: &str, step: &str) -> Result<(), CatalogError> {
    if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\\', '\0']) {
        return Err(CatalogError::new(
            CatalogErrorKind::Protocol,
            step,
            format!("{what} {name:?} cannot name a folder (empty, '.', '..', or holds '/', '\\' or NUL)"),
        ));
    }
    Ok(())
}
