//! The service's state: one SQLite file (`DIR/topicberg.db`, WAL) holding
//! the admin user, sessions, sources, destinations, jobs and runs. A
//! `schema_version` table and the `MIGRATIONS` list move old files
//! forward. Calls are short (one statement or one small transaction) and
//! take a mutex around the one connection.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use rusqlite::{params, Connection, OptionalExtension, Row};
use serde_json::Value;

use super::pieces::{assemble_job_toml, JobPieces, Piece, PieceKind, Secrets};
use crate::run_store::JobMode;

/// The database file's name inside the data folder.
pub const DB_FILE: &str = "topicberg.db";

/// Schema migrations, applied in order; entry `i` moves version `i` to `i + 1`.
const MIGRATIONS: &[&str] = &[
    r#"
CREATE TABLE admin (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    username TEXT NOT NULL,
    password_hash TEXT NOT NULL
);
CREATE TABLE sessions (
    token_hash TEXT PRIMARY KEY,
    csrf TEXT NOT NULL,
    expires_ms INTEGER NOT NULL
);
CREATE TABLE sources (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    config TEXT NOT NULL
);
CREATE TABLE destinations (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    config TEXT NOT NULL
);
CREATE TABLE jobs (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    source_id INTEGER NOT NULL REFERENCES sources(id),
    destination_id INTEGER NOT NULL REFERENCES destinations(id),
    target_engines TEXT NOT NULL,
    namespace TEXT,
    sync TEXT NOT NULL,
    streams TEXT NOT NULL,
    schedule TEXT NOT NULL,
    paused INTEGER NOT NULL
);
CREATE TABLE runs (
    id INTEGER PRIMARY KEY,
    job_id INTEGER NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
    trigger TEXT NOT NULL,
    started_ms INTEGER NOT NULL,
    finished_ms INTEGER,
    status TEXT NOT NULL,
    error TEXT,
    report_json TEXT,
    log TEXT NOT NULL DEFAULT ''
);
CREATE INDEX runs_by_job ON runs(job_id, id);
"#,
    r#"
ALTER TABLE runs ADD COLUMN lag INTEGER;
"#,
    r#"
ALTER TABLE runs ADD COLUMN kind TEXT NOT NULL DEFAULT 'sync';
ALTER TABLE jobs ADD COLUMN maintain TEXT NOT NULL DEFAULT '{}';
ALTER TABLE jobs ADD COLUMN maintain_schedule TEXT NOT NULL DEFAULT '';
"#,
    r#"
ALTER TABLE jobs ADD COLUMN mode TEXT NOT NULL DEFAULT 'scheduled';
"#,
    // The jobs list's last sync and last maintenance of each job.
    r#"
CREATE INDEX runs_by_job_kind ON runs(job_id, kind, id);
"#,
];

/// What went wrong in the store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// SQLite failed.
    #[error("database: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// A stored JSON column does not parse.
    #[error("database holds invalid JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// No such row.
    #[error("{0} not found")]
    NotFound(String),
    /// A unique name is taken, or a row is still referenced.
    #[error("{0}")]
    Conflict(String),
    /// Creating the data folder failed.
    #[error("data folder {path}: {source}")]
    Io {
        /// The folder.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A piece could not be assembled into a job file.
    #[error("{0}")]
    Piece(#[from] super::pieces::PieceError),
}

/// A source or destination row.
#[derive(Debug, Clone, PartialEq)]
pub struct PieceRow {
    /// Its id.
    pub id: i64,
    /// The service-only name.
    pub name: String,
    /// The job file's table, secrets included.
    pub config: Piece,
}

/// A `[source]` row.
pub type SourceRow = PieceRow;
/// A `[destination]` row.
pub type DestinationRow = PieceRow;

/// A job row (without its id when inserted: `id` is ignored).
#[derive(Debug, Clone, PartialEq)]
pub struct JobRow {
    /// Its id.
    pub id: i64,
    /// The job's name (unique).
    pub name: String,
    /// Its source.
    pub source_id: i64,
    /// Its destination.
    pub destination_id: i64,
    /// `target_engines`.
    pub target_engines: Vec<String>,
    /// The namespace override (`destination.namespace`), if any.
    pub namespace: Option<String>,
    /// The `[sync]` table.
    pub sync: Piece,
    /// The `[[streams]]` entries.
    pub streams: Vec<Piece>,
    /// The schedule text (empty: manual only).
    pub schedule: String,
    /// Whether the schedule is paused.
    pub paused: bool,
    /// The `[maintain]` table.
    pub maintain: Piece,
    /// When `maintain` runs (schedule text; empty: by hand only).
    pub maintain_schedule: String,
    /// Scheduled syncs, or a follower (continuous).
    pub mode: JobMode,
}

/// A run row (the log is read separately: [`Store::run_log`]).
#[derive(Debug, Clone, PartialEq)]
pub struct RunRow {
    /// Its id.
    pub id: i64,
    /// The job.
    pub job_id: i64,
    /// `sync` or `maintain`.
    pub kind: String,
    /// `manual`, `schedule` or `missed`.
    pub trigger: String,
    /// Start (ms since the epoch).
    pub started_ms: i64,
    /// End (ms since the epoch), when it ended.
    pub finished_ms: Option<i64>,
    /// `running`, `succeeded`, `failed` or `cancelled`.
    pub status: String,
    /// The error of a failed run.
    pub error: Option<String>,
    /// The sync report as JSON, when the sync got that far.
    pub report: Option<Value>,
    /// The job's consumer lag (messages, all partitions) measured right
    /// after the run; `None` when not measured.
    pub lag: Option<i64>,
}

/// The store: cheap to clone, shared by the API, the runner and the scheduler.
#[derive(Clone)]
pub struct Store {
    conn: Arc<Mutex<Connection>>,
    data_dir: PathBuf,
}

impl Store {
    /// Opens (creating if needed) `data_dir/topicberg.db` and migrates it.
    pub fn open(data_dir: &Path) -> Result<Self, StoreError> {
        std::fs::create_dir_all(data_dir).map_err(|source| StoreError::Io {
            path: data_dir.display().to_string(),
            source,
        })?;
        let data_dir = data_dir.canonicalize().map_err(|source| StoreError::Io {
            path: data_dir.display().to_string(),
            source,
        })?;
        let db = data_dir.join(DB_FILE);
        let conn = Connection::open(&db)?;
        // The file holds the sources' and destinations' secrets: owner only
        // (SQLite gives the -wal and -shm files the same mode).
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o600)).map_err(
                |source| StoreError::Io {
                    path: db.display().to_string(),
                    source,
                },
            )?;
        }
        conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get::<_, String>(0))?;
        // secure_delete: a removed or replaced secret is overwritten in the
        // file, not left in a free page.
        conn.execute_batch(
            "PRAGMA foreign_keys=ON; PRAGMA busy_timeout=5000; PRAGMA synchronous=NORMAL;
             PRAGMA secure_delete=ON;",
        )?;
        migrate(&conn)?;
        Ok(Self {
            conn: Arc::new(Mutex::new(conn)),
            data_dir,
        })
    }

    /// The data folder (absolute).
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    fn conn(&self) -> MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }

    // --- admin and sessions ---

    /// The admin's username and argon2 hash, when set.
    pub fn admin(&self) -> Result<Option<(String, String)>, StoreError> {
        Ok(self
            .conn()
            .query_row(
                "SELECT username, password_hash FROM admin WHERE id = 1",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?)
    }

    /// Sets (or replaces) the admin's password hash; ends every session.
    pub fn set_admin(&self, username: &str, password_hash: &str) -> Result<(), StoreError> {
        let mut conn = self.conn();
        let tx = conn.transaction()?;
        tx.execute(
            "INSERT INTO admin (id, username, password_hash) VALUES (1, ?1, ?2)
             ON CONFLICT(id) DO UPDATE SET username = ?1, password_hash = ?2",
            params![username, password_hash],
        )?;
        tx.execute("DELETE FROM sessions", [])?;
        tx.commit()?;
        Ok(())
    }

    /// Records a session (its token's hash) and drops expired ones.
    pub fn insert_session(
        &self,
        token_hash: &str,
        csrf: &str,
        expires_ms: i64,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        let conn = self.conn();
        conn.execute("DELETE FROM sessions WHERE expires_ms <= ?1", [now_ms])?;
        conn.execute(
            "INSERT INTO sessions (token_hash, csrf, expires_ms) VALUES (?1, ?2, ?3)",
            params![token_hash, csrf, expires_ms],
        )?;
        Ok(())
    }

    /// The session's CSRF token and expiry.
    pub fn session(&self, token_hash: &str) -> Result<Option<(String, i64)>, StoreError> {
        Ok(self
            .conn()
            .query_row(
                "SELECT csrf, expires_ms FROM sessions WHERE token_hash = ?1",
                [token_hash],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?)
    }

    /// Ends a session.
    pub fn delete_session(&self, token_hash: &str) -> Result<(), StoreError> {
        self.conn()
            .execute("DELETE FROM sessions WHERE token_hash = ?1", [token_hash])?;
        Ok(())
    }

    // --- sources and destinations ---

    fn piece_table(kind: PieceKind) -> &'static str {
        match kind {
            PieceKind::Source => "sources",
            PieceKind::Destination => "destinations",
        }
    }

    /// Every source or destination, by id.
    pub fn pieces(&self, kind: PieceKind) -> Result<Vec<PieceRow>, StoreError> {
        let conn = self.conn();
        let sql = format!(
            "SELECT id, name, config FROM {} ORDER BY id",
            Self::piece_table(kind)
        );
        let mut stmt = conn.prepare(&sql)?;
        let rows = stmt.query_map([], piece_row)?;
        rows.map(|r| r.map_err(StoreError::from).and_then(|r| r))
            .collect()
    }

    /// One source or destination.
    pub fn piece(&self, kind: PieceKind, id: i64) -> Result<PieceRow, StoreError> {
        let sql = format!(
            "SELECT id, name, config FROM {} WHERE id = ?1",
            Self::piece_table(kind)
        );
        self.conn()
            .query_row(&sql, [id], piece_row)
            .optional()?
            .unwrap_or_else(|| Err(StoreError::NotFound(format!("{} {id}", kind.table()))))
    }

    /// Adds a source or destination; returns its id.
    pub fn insert_piece(
        &self,
        kind: PieceKind,
        name: &str,
        config: &Piece,
    ) -> Result<i64, StoreError> {
        let sql = format!(
            "INSERT INTO {} (name, config) VALUES (?1, ?2)",
            Self::piece_table(kind)
        );
        let conn = self.conn();
        conn.execute(&sql, params![name, serde_json::to_string(config)?])
            .map_err(|e| unique(e, kind.table(), name))?;
        Ok(conn.last_insert_rowid())
    }

    /// Replaces a source's or destination's name and table.
    pub fn update_piece(
        &self,
        kind: PieceKind,
        id: i64,
        name: &str,
        config: &Piece,
    ) -> Result<(), StoreError> {
        let sql = format!(
            "UPDATE {} SET name = ?1, config = ?2 WHERE id = ?3",
            Self::piece_table(kind)
        );
        let n = self
            .conn()
            .execute(&sql, params![name, serde_json::to_string(config)?, id])
            .map_err(|e| unique(e, kind.table(), name))?;
        if n == 0 {
            return Err(StoreError::NotFound(format!("{} {id}", kind.table())));
        }
        self.checkpoint()
    }

    /// Moves the WAL into the database file and empties it, so a secret
    /// just replaced or removed is left in neither (with `secure_delete`).
    fn checkpoint(&self) -> Result<(), StoreError> {
        self.conn()
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
        Ok(())
    }

    /// Sets the admin's password hash only while none is set (first-run
    /// setup); `false` when one already is.
    pub fn create_admin(&self, username: &str, password_hash: &str) -> Result<bool, StoreError> {
        let n = self.conn().execute(
            "INSERT INTO admin (id, username, password_hash) VALUES (1, ?1, ?2)
             ON CONFLICT(id) DO NOTHING",
            params![username, password_hash],
        )?;
        Ok(n == 1)
    }

    /// Deletes a source or destination no job uses.
    pub fn delete_piece(&self, kind: PieceKind, id: i64) -> Result<(), StoreError> {
        let column = format!("{}_id", kind.table());
        let conn = self.conn();
        let users: Vec<String> = conn
            .prepare(&format!(
                "SELECT name FROM jobs WHERE {column} = ?1 ORDER BY name"
            ))?
            .query_map([id], |r| r.get(0))?
            .collect::<Result<_, _>>()?;
        if !users.is_empty() {
            return Err(StoreError::Conflict(format!(
                "{} {id} is used by job(s) {}; delete or change them first",
                kind.table(),
                users.join(", ")
            )));
        }
        let sql = format!("DELETE FROM {} WHERE id = ?1", Self::piece_table(kind));
        if conn.execute(&sql, [id])? == 0 {
            return Err(StoreError::NotFound(format!("{} {id}", kind.table())));
        }
        drop(conn);
        self.checkpoint()
    }

    // --- jobs ---

    /// Every job, by id.
    pub fn jobs(&self) -> Result<Vec<JobRow>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn.prepare(&format!("{JOB_SELECT} ORDER BY id"))?;
        let rows = stmt.query_map([], job_row)?;
        rows.map(|r| r.map_err(StoreError::from).and_then(|r| r))
            .collect()
    }

    /// One job.
    pub fn job(&self, id: i64) -> Result<JobRow, StoreError> {
        self.conn()
            .query_row(&format!("{JOB_SELECT} WHERE id = ?1"), [id], job_row)
            .optional()?
            .unwrap_or_else(|| Err(StoreError::NotFound(format!("job {id}"))))
    }

    /// Adds a job (its `id` is ignored); returns the new id.
    pub fn insert_job(&self, job: &JobRow) -> Result<i64, StoreError> {
        let conn = self.conn();
        conn.execute(
            "INSERT INTO jobs (name, source_id, destination_id, target_engines, namespace, sync,
                               streams, schedule, paused, maintain, maintain_schedule, mode)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
            params![
                job.name,
                job.source_id,
                job.destination_id,
                serde_json::to_string(&job.target_engines)?,
                job.namespace,
                serde_json::to_string(&job.sync)?,
                serde_json::to_string(&job.streams)?,
                job.schedule,
                job.paused,
                serde_json::to_string(&job.maintain)?,
                job.maintain_schedule,
                job.mode.as_str(),
            ],
        )
        .map_err(|e| unique(e, "job", &job.name))?;
        Ok(conn.last_insert_rowid())
    }

    /// Replaces job `job.id`.
    pub fn update_job(&self, job: &JobRow) -> Result<(), StoreError> {
        let n = self
            .conn()
            .execute(
                "UPDATE jobs SET name = ?1, source_id = ?2, destination_id = ?3, target_engines = ?4,
                     namespace = ?5, sync = ?6, streams = ?7, schedule = ?8, paused = ?9,
                     maintain = ?11, maintain_schedule = ?12, mode = ?13
                 WHERE id = ?10",
                params![
                    job.name,
                    job.source_id,
                    job.destination_id,
                    serde_json::to_string(&job.target_engines)?,
                    job.namespace,
                    serde_json::to_string(&job.sync)?,
                    serde_json::to_string(&job.streams)?,
                    job.schedule,
                    job.paused,
                    job.id,
                    serde_json::to_string(&job.maintain)?,
                    job.maintain_schedule,
                    job.mode.as_str(),
                ],
            )
            .map_err(|e| unique(e, "job", &job.name))?;
        if n == 0 {
            return Err(StoreError::NotFound(format!("job {}", job.id)));
        }
        Ok(())
    }

    /// Pauses or resumes a job's schedule.
    pub fn set_paused(&self, id: i64, paused: bool) -> Result<(), StoreError> {
        let n = self.conn().execute(
            "UPDATE jobs SET paused = ?1 WHERE id = ?2",
            params![paused, id],
        )?;
        if n == 0 {
            return Err(StoreError::NotFound(format!("job {id}")));
        }
        Ok(())
    }

    /// Deletes a job and its runs.
    pub fn delete_job(&self, id: i64) -> Result<(), StoreError> {
        if self
            .conn()
            .execute("DELETE FROM jobs WHERE id = ?1", [id])?
            == 0
        {
            return Err(StoreError::NotFound(format!("job {id}")));
        }
        Ok(())
    }

    /// The job's file: `secrets` decides whether the stored secrets or
    /// `${TOPICBERG_..}` placeholders are written.
    pub fn assemble(&self, job: &JobRow, secrets: Secrets<'_>) -> Result<String, StoreError> {
        let source = self.piece(PieceKind::Source, job.source_id)?;
        let destination = self.piece(PieceKind::Destination, job.destination_id)?;
        Ok(assemble_job_toml(
            &JobPieces {
                name: &job.name,
                target_engines: &job.target_engines,
                namespace: job.namespace.as_deref(),
                source: &source.config,
                destination: &destination.config,
                sync: &job.sync,
                streams: &job.streams,
                maintain: &job.maintain,
            },
            secrets,
        )?)
    }

    // --- runs ---

    /// A job's runs, newest first, at most `limit`.
    pub fn runs(&self, job_id: i64, limit: i64) -> Result<Vec<RunRow>, StoreError> {
        self.runs_page(job_id, limit, 0)
    }

    /// A page of a job's runs, newest first: at most `limit`, after
    /// skipping the `offset` newest.
    pub fn runs_page(
        &self,
        job_id: i64,
        limit: i64,
        offset: i64,
    ) -> Result<Vec<RunRow>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn.prepare(&format!(
            "{RUN_SELECT} WHERE job_id = ?1 ORDER BY id DESC LIMIT ?2 OFFSET ?3"
        ))?;
        let rows = stmt.query_map(params![job_id, limit, offset], run_row)?;
        rows.map(|r| r.map_err(StoreError::from).and_then(|r| r))
            .collect()
    }

    /// The job's newest run whose kind is `maintain` (`maintenance`
    /// true), or not (a sync or a continuous job's follower).
    pub fn latest_run_of_kind(
        &self,
        job_id: i64,
        maintenance: bool,
    ) -> Result<Option<RunRow>, StoreError> {
        let kind = if maintenance { "=" } else { "<>" };
        self.conn()
            .query_row(
                &format!(
                    "{RUN_SELECT} WHERE job_id = ?1 AND kind {kind} 'maintain' \
                     ORDER BY id DESC LIMIT 1"
                ),
                [job_id],
                run_row,
            )
            .optional()?
            .transpose()
    }

    /// The job's newest sync with `status` (e.g. the last success), and the
    /// start of its first run of any status.
    pub fn latest_run_with_status(
        &self,
        job_id: i64,
        status: &str,
    ) -> Result<(Option<RunRow>, Option<i64>), StoreError> {
        let conn = self.conn();
        let latest = conn
            .query_row(
                &format!(
                    "{RUN_SELECT} WHERE job_id = ?1 AND status = ?2 AND kind = 'sync' \
                     ORDER BY id DESC LIMIT 1"
                ),
                params![job_id, status],
                run_row,
            )
            .optional()?
            .transpose()?;
        let first_started = conn.query_row(
            "SELECT MIN(started_ms) FROM runs WHERE job_id = ?1",
            [job_id],
            |r| r.get::<_, Option<i64>>(0),
        )?;
        Ok((latest, first_started))
    }

    /// One run.
    pub fn run(&self, id: i64) -> Result<RunRow, StoreError> {
        self.conn()
            .query_row(&format!("{RUN_SELECT} WHERE id = ?1"), [id], run_row)
            .optional()?
            .unwrap_or_else(|| Err(StoreError::NotFound(format!("run {id}"))))
    }

    /// A run's log text.
    pub fn run_log(&self, id: i64) -> Result<String, StoreError> {
        self.conn()
            .query_row("SELECT log FROM runs WHERE id = ?1", [id], |r| r.get(0))
            .optional()?
            .ok_or_else(|| StoreError::NotFound(format!("run {id}")))
    }
}

const JOB_SELECT: &str = "SELECT id, name, source_id, destination_id, target_engines, namespace, \
                          sync, streams, schedule, paused, maintain, maintain_schedule, mode \
                          FROM jobs";
const RUN_SELECT: &str = "SELECT id, job_id, trigger, started_ms, finished_ms, status, error, \
                          report_json, lag, kind FROM runs";

fn piece_row(r: &Row<'_>) -> rusqlite::Result<Result<PieceRow, StoreError>> {
    let config: String = r.get(2)?;
    Ok(Ok(PieceRow {
        id: r.get(0)?,
        name: r.get(1)?,
        config: match serde_json::from_str(&config) {
            Ok(c) => c,
            Err(e) => return Ok(Err(e.into())),
        },
    }))
}

fn job_row(r: &Row<'_>) -> rusqlite::Result<Result<JobRow, StoreError>> {
    let engines: String = r.get(4)?;
    let sync: String = r.get(6)?;
    let streams: String = r.get(7)?;
    let maintain: String = r.get(10)?;
    let parse = || -> Result<_, serde_json::Error> {
        Ok((
            serde_json::from_str(&engines)?,
            serde_json::from_str(&sync)?,
            serde_json::from_str(&streams)?,
            serde_json::from_str(&maintain)?,
        ))
    };
    let (target_engines, sync, streams, maintain) = match parse() {
        Ok(p) => p,
        Err(e) => return Ok(Err(e.into())),
    };
    Ok(Ok(JobRow {
        id: r.get(0)?,
        name: r.get(1)?,
        source_id: r.get(2)?,
        destination_id: r.get(3)?,
        target_engines,
        namespace: r.get(5)?,
        sync,
        streams,
        schedule: r.get(8)?,
        paused: r.get(9)?,
        maintain,
        maintain_schedule: r.get(11)?,
        mode: JobMode::from_name(&r.get::<_, String>(12)?).unwrap_or_default(),
    }))
}

fn run_row(r: &Row<'_>) -> rusqlite::Result<Result<RunRow, StoreError>> {
    let report: Option<String> = r.get(7)?;
    let report = match report.map(|t| serde_json::from_str(&t)).transpose() {
        Ok(v) => v,
        Err(e) => return Ok(Err(e.into())),
    };
    Ok(Ok(RunRow {
        id: r.get(0)?,
        job_id: r.get(1)?,
        kind: r.get(9)?,
        trigger: r.get(2)?,
        started_ms: r.get(3)?,
        finished_ms: r.get(4)?,
        status: r.get(5)?,
        error: r.get(6)?,
        report,
        lag: r.get(8)?,
    }))
}

/// A unique-constraint failure as a conflict naming the taken name.
fn unique(e: rusqlite::Error, what: &str, name: &str) -> StoreError {
    match &e {
        rusqlite::Error::SqliteFailure(f, _)
            if f.code == rusqlite::ErrorCode::ConstraintViolation =>
        {
            StoreError::Conflict(format!(
                "a {what} named \"{name}\" already exists, or a referenced id does not exist"
            ))
        }
        _ => e.into(),
    }
}

fn migrate(conn: &Connection) -> Result<(), StoreError> {
    conn.execute_batch("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")?;
    let version: Option<i64> = conn
        .query_row("SELECT version FROM schema_version", [], |r| r.get(0))
        .optional()?;
    if version.is_none() {
        conn.execute("INSERT INTO schema_version (version) VALUES (0)", [])?;
    }
    let mut version = version.unwrap_or(0) as usize;
    while version < MIGRATIONS.len() {
        conn.execute_batch(&format!(
            "BEGIN; {} UPDATE schema_version SET version = {}; COMMIT;",
            MIGRATIONS[version],
            version + 1
        ))?;
        version += 1;
        tracing::info!(version, "database schema migrated");
    }
    Ok(())
}

mod runs;

#[cfg(test)]
mod tests;
