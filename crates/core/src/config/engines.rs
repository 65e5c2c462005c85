//! Which delete formats and table format versions each target engine reads,
//! and the choice of an upsert table's delete format from `target_engines`.
//!
//! # The matrix
//!
//! "Reads" means: a plain `SELECT` applies the deletes, so a retired row
//! stays retired. An engine that ignores a delete file silently returns the
//! old row next to the new one, which is worse than an error; so a format
//! counts as read only where the engine's documentation or code says so.
//!
//! | engine     | position deletes (v2) | deletion vectors (v3) | equality deletes | format versions |
//! |------------|-----------------------|-----------------------|------------------|-----------------|
//! | spark      | yes                   | yes (Iceberg >= 1.8)  | yes              | 2, 3            |
//! | trino      | yes                   | yes (Trino >= 480)    | yes              | 2, 3 (>= 480)   |
//! | duckdb     | yes                   | yes (1.5.x)           | yes              | 2, 3            |
//! | databricks | no                    | yes (DBR >= 17.3)     | no               | 2, 3            |
//! | snowflake  | yes                   | yes (v3 GA 2026-05)   | no               | 2, 3            |
//! | athena     | yes                   | no                    | yes              | 2               |
//! | pyiceberg  | yes                   | yes (0.12)            | no               | 2, 3 (reads)    |
//! | flink      | yes                   | yes (Iceberg >= 1.8)  | yes              | 2, 3            |
//! | clickhouse | yes                   | no (see below)        | yes (>= 25.8)    | 2, 3            |
//! | polars     | yes                   | yes                   | no (refused)     | 2, 3            |
//! | datafusion | yes                   | yes                   | yes              | 2, 3            |
//! | daft       | yes                   | no                    | no (refused)     | 2, 3            |
//!
//! Versions: an entry may name releases (`trino<480`, `clickhouse>=26.10`);
//! what older releases lack (the minimum releases in `engine_target.rs`) is
//! taken away from the engine's row ([`EngineTarget::support`]).
//!
//! Run here (`scripts/readers/selftest`, readers byte-identical to
//! PyIceberg's): Polars 2.1.0 (its native reader forced) and DataFusion
//! 54.1.0 with pyiceberg-core 0.11.0 read v2 position deletes and v3
//! deletion vectors; chDB 4.4.0 (ClickHouse 26.9.2.1) reads v2 position
//! deletes and fails on deletion vectors ("Position deletes are supported
//! only for parquet format"); Trino 476 (the test bed's server) reads v2 position
//! deletes and refuses deletion vectors ("ICEBERG_BAD_DATA: Unexpected
//! PUFFIN file format"; v3 tables without them it reads); Daft 0.7.26 (its
//! own venv) reads v2 position deletes and v3 tables, and fails on deletion
//! vectors: it reads every delete file as Parquet ("DaftError::CorruptFile
//! ... is not a valid parquet file. Incorrect footer magic").
//! Equality deletes (`sync_upsert_seeds_with_equality_deletes`): DataFusion,
//! chDB and Trino 476 equal Spark; PyIceberg refuses them in its scan
//! planning ("PyIceberg does not yet support equality deletes"), and so do
//! Polars and Daft, whose Iceberg readers plan with PyIceberg
//! (`daft.read_iceberg` raises that same error): the test asserts all
//! three refusals.
//!
//! Sources (checked 2026-11):
//! - Spark, Flink: the Iceberg Java library applies all three; deletion
//!   vectors from 1.8 on (`data/.../BaseDeleteLoader.java`, `readDV`, used by
//!   Spark's readers and Flink's `DeleteFilter`).
//! - Trino: deletion vectors in trinodb/trino#27788 (merged January 2026,
//!   Trino 480; an earlier attempt, #24882, was reverted by #25550 before
//!   release); position and equality deletes long before.
//! - DuckDB: duckdb-iceberg reads position deletes, equality deletes
//!   (duckdb/duckdb-iceberg#158, fixed by #201) and v3 deletion vectors
//!   (#728, 1.5.x). DuckDB 1.5.5 reads a deletion vector only from a complete
//!   Puffin file, magic and footer included (duckdb/duckdb-iceberg#1248).
//! - Databricks: Unity Catalog documents Iceberg v2 position and equality
//!   deletes as unsupported for managed and foreign Iceberg tables (quoted in
//!   datazip-inc/olake-docs#518); v3 tables with deletion vectors need
//!   Databricks Runtime 17.3+ (docs.databricks.com/iceberg/iceberg-v3).
//! - Snowflake: position deletes GA 2025-10-17 (release note "Positional
//!   deletes for externally managed Apache Iceberg tables"); v3 with
//!   deletion vectors GA 2026-05-07 (release note "Support for Apache
//!   Iceberg version 3"); a table with equality deletes fails the query
//!   (datazip-inc/olake-docs#513, #490).
//! - Athena: "Athena only creates and operates on Iceberg v2 tables"
//!   (docs.aws.amazon.com/athena/latest/ug/querying-iceberg.html); the AWS
//!   Iceberg v3 support table lists Amazon Athena as "No"
//!   (prescriptive-guidance/apache-iceberg-on-aws/table-spec-v3); it writes
//!   and reads position deletes and reads equality deletes.
//! - PyIceberg 0.12.0, read in its installed source: `_read_deletes` in
//!   `pyiceberg/io/pyarrow.py` reads Parquet position deletes and Puffin
//!   deletion vectors (it parses the whole Puffin file and keys each blob by
//!   its `referenced-data-file` property, so a deletion vector must be a
//!   complete Puffin file with that property); equality deletes raise
//!   "PyIceberg does not yet support equality deletes" (`table/__init__.py`,
//!   apache/iceberg-python#1210 still open). It reads v3 metadata but writes
//!   at most v2 (`SUPPORTED_TABLE_FORMAT_VERSION = 2`).
//! - ClickHouse: position deletes since ClickHouse/ClickHouse#83094
//!   (August 2025), equality deletes from 25.8 (its Iceberg engine docs),
//!   deletion vectors since ClickHouse/ClickHouse#110781 (merged
//!   2026-09-09, not in 26.9.2.1 as run here: counted from 26.10, and a
//!   bare `clickhouse` means the release run here).
//! - Polars, DataFusion (iceberg-rust's reader), Daft: as run here (above).
//!
//! # Choosing the format
//!
//! The Iceberg spec (format/spec.md, "Delete Formats"): deletion vectors
//! exist only in v3; "position delete files must not be added to v3 tables,
//! but existing position delete files are valid" (deprecated in v3, and the
//! Java library throws when one is added); equality delete files may be
//! added to v2 and v3 tables. So `position` means format v2 and `dv` means
//! format v3, and a contradicting `destination.format_version` is an error.
//!
//! For reads, deletion vectors are cheapest (one bitmap per data file), then
//! position delete files, then equality deletes (a join on the key at every
//! read). [`resolve_delete_format`] tries, in order:
//! 1. position deletes on v2: the format the most engines (and versions of
//!    them) read, so the default;
//! 2. deletion vectors on v3: chosen when an engine reads nothing else
//!    (Databricks), or when `destination.format_version = 3` was asked;
//! 3. equality deletes, only when no engine set reads either of the above.
//!
//! The first that every listed engine reads wins. With no `target_engines`
//! that is position deletes on v2 (deletion vectors on v3 when
//! `destination.format_version = 3`). No common format is an error naming
//! each engine and what it lacks; an explicit `delete_format` that a listed
//! engine cannot read is an error naming that engine.

use super::engine_target::Feature;
use super::{DeleteFormat, EngineTarget, FormatVersion, TargetEngine};

/// What one engine reads; see the matrix in the module documentation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EngineSupport {
    /// Applies v2 position delete files (Parquet `file_path` / `pos`).
    pub position_deletes: bool,
    /// Applies v3 deletion vectors (Puffin `deletion-vector-v1` blobs).
    pub deletion_vectors: bool,
    /// Applies equality delete files.
    pub equality_deletes: bool,
    /// Reads format v2 tables.
    pub v2: bool,
    /// Reads format v3 tables.
    pub v3: bool,
    /// The engine versions the claims above need, for the documentation.
    pub needs: &'static str,
}

impl TargetEngine {
    /// What this engine reads (the matrix of the module documentation).
    pub fn support(self) -> EngineSupport {
        let all = EngineSupport {
            position_deletes: true,
            deletion_vectors: true,
            equality_deletes: true,
            v2: true,
            v3: true,
            needs: "",
        };
        match self {
            Self::Spark => EngineSupport {
                needs: "Iceberg Spark runtime 1.8+ for deletion vectors",
                ..all
            },
            Self::Trino => EngineSupport {
                needs: "Trino 480+ for deletion vectors",
                ..all
            },
            Self::Duckdb => EngineSupport {
                needs: "DuckDB 1.5.x with the iceberg extension for deletion vectors",
                ..all
            },
            Self::Databricks => EngineSupport {
                position_deletes: false,
                equality_deletes: false,
                needs: "Databricks Runtime 17.3+ for format v3",
                ..all
            },
            Self::Snowflake => EngineSupport {
                equality_deletes: false,
                needs: "format v3 support, generally available since 2026-05-07",
                ..all
            },
            Self::Athena => EngineSupport {
                deletion_vectors: false,
                v3: false,
                needs: "Athena engine version 3",
                ..all
            },
            Self::Pyiceberg => EngineSupport {
                equality_deletes: false,
                needs: "PyIceberg 0.12+",
                ..all
            },
            Self::Flink => EngineSupport {
                needs: "Iceberg Flink runtime 1.8+ for deletion vectors",
                ..all
            },
            Self::Clickhouse => EngineSupport {
                needs: "ClickHouse 25.8+ for equality deletes; clickhouse>=26.10 \
                        (ClickHouse#110781) for deletion vectors",
                ..all
            },
            Self::Polars => EngineSupport {
                equality_deletes: false,
                needs: "Polars 2.1+ (its native Iceberg reader)",
                ..all
            },
            Self::Datafusion => EngineSupport {
                needs: "DataFusion 54 with pyiceberg-core 0.11",
                ..all
            },
            Self::Daft => EngineSupport {
                deletion_vectors: false,
                equality_deletes: false,
                needs: "Daft 0.7.26: no deletion vectors",
                ..all
            },
        }
    }
}

impl EngineTarget {
    /// What these releases read: the engine's matrix row, less the
    /// features their versions may lack.
    pub fn support(self) -> EngineSupport {
        let mut s = self.engine.support();
        for &(feature, min) in self.engine.since() {
            if self.at_least(min) {
                continue;
            }
            match feature {
                Feature::V3 => s.v3 = false,
                Feature::DeletionVectors => s.deletion_vectors = false,
                Feature::EqualityDeletes => s.equality_deletes = false,
            }
        }
        s
    }

    /// The entry as written (normalised): `trino<480`.
    pub fn as_str(self) -> String {
        self.to_string()
    }

    /// Whether these releases read tables of format version `version`.
    pub fn reads_format_version(self, version: u8) -> bool {
        let s = self.support();
        match version {
            2 => s.v2,
            3 => s.v3,
            _ => false,
        }
    }

    /// Whether this engine applies `format` deletes in a table of format
    /// version `version` (which must be one that can hold them).
    pub fn reads_deletes(self, format: DeleteFormat, version: u8) -> bool {
        let s = self.support();
        let format_ok = match format {
            DeleteFormat::Position => s.position_deletes && version == 2,
            DeleteFormat::Dv => s.deletion_vectors && version == 3,
            DeleteFormat::Equality => s.equality_deletes,
        };
        format_ok && self.reads_format_version(version)
    }

    /// What this engine reads, in words, for error messages, e.g.
    /// "reads only deletion vectors (v3)".
    pub fn reads_summary(self) -> String {
        let s = self.support();
        let formats: Vec<&str> = [
            (s.position_deletes && s.v2, "position deletes (v2)"),
            (s.deletion_vectors && s.v3, "deletion vectors (v3)"),
            (s.equality_deletes, "equality deletes"),
        ]
        .into_iter()
        .filter_map(|(reads, name)| reads.then_some(name))
        .collect();
        let only = if formats.len() == 1 { "only " } else { "" };
        let versions = match (s.v2, s.v3) {
            (true, false) => ", and no format v3 table",
            (false, true) => ", and no format v2 table",
            _ => "",
        };
        format!("reads {only}{}{versions}", join_and(&formats))
    }
}

/// How an upsert table retires old rows, as resolved from the job file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedUpsert {
    /// The delete format.
    pub delete_format: DeleteFormat,
    /// The table's format version that this delete format needs.
    pub format_version: FormatVersion,
    /// Why this format was chosen, for the log and the report.
    pub reason: String,
}

/// What kind of failure a [`DeleteFormatError`] is. None is retryable:
/// the job file must change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeleteFormatErrorKind {
    /// `destination.format_version` is neither 2 nor 3.
    FormatVersion,
    /// The explicit `delete_format` cannot be used on the explicit
    /// `destination.format_version`.
    WrongFormatVersion,
    /// A listed engine cannot read the explicit `delete_format`.
    Unreadable,
    /// No delete format is read by every listed engine.
    NoCommonFormat,
}

/// Why an upsert table's delete format cannot be resolved from the job
/// file: the message says which engine lacks what and how to fix the job
/// file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct DeleteFormatError {
    /// What kind of failure this is.
    pub kind: DeleteFormatErrorKind,
    message: String,
}

impl DeleteFormatError {
    fn new(kind: DeleteFormatErrorKind, message: String) -> Self {
        Self { kind, message }
    }

    /// What kind of failure this is.
    pub fn kind(&self) -> DeleteFormatErrorKind {
        self.kind
    }
}

/// The format version numbered `version` (2 or 3; the matrix only asks
/// about those two).
fn format_version(version: u8) -> FormatVersion {
    if version == 3 {
        FormatVersion::V3
    } else {
        FormatVersion::V2
    }
}

/// Picks the delete format and table format version of an upsert table:
/// the cheapest-to-read format that every engine of `engines` reads (see the
/// module documentation for the order and the sources), or checks the
/// explicit `delete_format` against them. `explicit_format_version` is
/// `destination.format_version` when set. Errors say which engine lacks
/// what and how to fix the job file.
pub fn resolve_delete_format(
    engines: &[EngineTarget],
    explicit: Option<DeleteFormat>,
    explicit_format_version: Option<u8>,
) -> Result<ResolvedUpsert, DeleteFormatError> {
    if let Some(v) = explicit_format_version {
        if v != 2 && v != 3 {
            return Err(DeleteFormatError::new(
                DeleteFormatErrorKind::FormatVersion,
                format!(
                    "destination.format_version is {v}; upsert tables need 2 (position or \
                     equality deletes) or 3 (deletion vectors or equality deletes)"
                ),
            ));
        }
    }
    let mut engines = engines.to_vec();
    engines.sort();
    engines.dedup();
    match explicit {
        Some(format) => check_explicit(&engines, format, explicit_format_version),
        None => choose(&engines, explicit_format_version),
    }
}

/// An explicit `delete_format`: the version it needs, and every listed
/// engine must read it.
fn check_explicit(
    engines: &[EngineTarget],
    format: DeleteFormat,
    explicit_version: Option<u8>,
) -> Result<ResolvedUpsert, DeleteFormatError> {
    let all_read = |f: DeleteFormat, v: u8| engines.iter().all(|e| e.reads_deletes(f, v));
    let version = match (format, explicit_version) {
        (DeleteFormat::Dv, Some(2)) => {
            let or_position = if all_read(DeleteFormat::Position, 2) {
                ", or use delete_format = \"position\""
            } else {
                ""
            };
            return Err(DeleteFormatError::new(
                DeleteFormatErrorKind::WrongFormatVersion,
                format!(
                    "delete_format \"dv\" (deletion vectors) needs format_version = 3; set \
                     destination.format_version = 3{or_position}"
                ),
            ));
        }
        (DeleteFormat::Position, Some(3)) => {
            let or_dv = if all_read(DeleteFormat::Dv, 3) {
                "use delete_format = \"dv\", or "
            } else {
                ""
            };
            return Err(DeleteFormatError::new(
                DeleteFormatErrorKind::WrongFormatVersion,
                format!(
                    "delete_format \"position\": position delete files cannot be added to \
                     format v3 tables (the Iceberg spec deprecates them in v3 and forbids new \
                     ones); {or_dv}set destination.format_version = 2"
                ),
            ));
        }
        (DeleteFormat::Dv, _) => 3,
        (DeleteFormat::Position, _) => 2,
        (DeleteFormat::Equality, v) => v.unwrap_or(2),
    };
    let unable: Vec<EngineTarget> = engines
        .iter()
        .copied()
        .filter(|e| !e.reads_deletes(format, version))
        .collect();
    if unable.is_empty() {
        let reason = if engines.is_empty() {
            format!(
                "delete_format = \"{}\" as set: {} on format v{version}",
                format.as_str(),
                format.label()
            )
        } else {
            format!(
                "delete_format = \"{}\" as set: {} on format v{version}, read by {}",
                format.as_str(),
                format.label(),
                names(engines)
            )
        };
        return Ok(ResolvedUpsert {
            delete_format: format,
            format_version: format_version(version),
            reason,
        });
    }
    let who: Vec<String> = unable
        .iter()
        .map(|e| format!("{} ({})", e.as_str(), e.reads_summary()))
        .collect();
    let alternative = match choose(engines, explicit_version) {
        Ok(r) => format!(
            ", or set delete_format = \"{}\" (or remove delete_format to let target_engines \
             decide)",
            r.delete_format.as_str()
        ),
        Err(_) => String::new(),
    };
    Err(DeleteFormatError::new(
        DeleteFormatErrorKind::Unreadable,
        format!(
            "delete_format \"{}\" ({} on format v{version}) cannot be read by {}; remove {} \
             from target_engines{alternative}",
            format.as_str(),
            format.label(),
            who.join(", "),
            names(&unable),
        ),
    ))
}

/// No explicit `delete_format`: the first candidate every engine reads.
fn choose(
    engines: &[EngineTarget],
    explicit_version: Option<u8>,
) -> Result<ResolvedUpsert, DeleteFormatError> {
    use DeleteFormat::{Dv, Equality, Position};
    let candidates: &[(DeleteFormat, u8)] = match explicit_version {
        Some(3) => &[(Dv, 3), (Equality, 3)],
        Some(_) => &[(Position, 2), (Equality, 2)],
        None => &[(Position, 2), (Dv, 3), (Equality, 2)],
    };
    for &(format, version) in candidates {
        if engines.iter().all(|e| e.reads_deletes(format, version)) {
            return Ok(ResolvedUpsert {
                delete_format: format,
                format_version: format_version(version),
                reason: reason(engines, format, version, explicit_version),
            });
        }
    }
    let lacking: Vec<String> = engines
        .iter()
        .filter_map(|e| {
            let missing: Vec<String> = candidates
                .iter()
                .filter(|(f, v)| !e.reads_deletes(*f, *v))
                .map(|(f, v)| format!("{} (v{v})", f.label()))
                .collect();
            (!missing.is_empty()).then(|| {
                format!(
                    "{} lacks {} (it {})",
                    e.as_str(),
                    join_and(&missing),
                    e.reads_summary()
                )
            })
        })
        .collect();
    let culprits: Vec<EngineTarget> = engines
        .iter()
        .copied()
        .filter(|e| candidates.iter().any(|(f, v)| !e.reads_deletes(*f, *v)))
        .collect();
    let (scope, hint) = match explicit_version {
        Some(v) => (
            format!(" on format v{v} (destination.format_version = {v})"),
            match choose(engines, None) {
                Ok(r) if r.format_version.number() != v => format!(
                    ", or remove destination.format_version to get {} on format v{}",
                    r.delete_format.label(),
                    r.format_version.number()
                ),
                _ => String::new(),
            },
        ),
        None => (String::new(), String::new()),
    };
    Err(DeleteFormatError::new(
        DeleteFormatErrorKind::NoCommonFormat,
        format!(
            "no delete format{scope} is read by every engine of target_engines: {}; remove {} \
             from target_engines so the rest share a format{hint}",
            lacking.join("; "),
            or_list(&culprits),
        ),
    ))
}

fn reason(
    engines: &[EngineTarget],
    format: DeleteFormat,
    version: u8,
    explicit_version: Option<u8>,
) -> String {
    let what = format!("{} on format v{version}", format.label());
    if engines.is_empty() {
        return match explicit_version {
            Some(_) => {
                format!("{what}: no target_engines listed, destination.format_version = {version}")
            }
            None => {
                format!("{what}: no target_engines listed; the delete format most engines read")
            }
        };
    }
    let readers = names(engines);
    match format {
        DeleteFormat::Position => format!(
            "{what}: read by every target engine ({readers}), and the most widely read format"
        ),
        DeleteFormat::Dv => {
            let only_dv: Vec<EngineTarget> = engines
                .iter()
                .copied()
                .filter(|e| !e.reads_deletes(DeleteFormat::Position, 2))
                .collect();
            if explicit_version == Some(3) || only_dv.is_empty() {
                format!("{what}: destination.format_version = 3, read by {readers}")
            } else {
                format!(
                    "{what}: {} reads no other delete format; read by {readers}",
                    names(&only_dv)
                )
            }
        }
        DeleteFormat::Equality => format!(
            "{what}: the only delete format every target engine reads ({readers}); reads are \
             slower than with position deletes or deletion vectors"
        ),
    }
}

fn names(engines: &[EngineTarget]) -> String {
    engines
        .iter()
        .map(|e| e.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

fn or_list(engines: &[EngineTarget]) -> String {
    let names: Vec<String> = engines.iter().map(|e| e.as_str()).collect();
    match names.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        _ => names.join(""),
    }
}

fn join_and<S: AsRef<str>>(items: &[S]) -> String {
    let items: Vec<&str> = items.iter().map(AsRef::as_ref).collect();
    match items.split_last() {
        None => "no delete format".to_string(),
        Some((last, [])) => last.to_string(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
    }
}

#[cfg(test)]
mod tests;
