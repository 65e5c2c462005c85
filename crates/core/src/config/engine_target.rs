//! One entry of `target_engines`: an engine, optionally with a version
//! requirement (`"trino<480"`, `"clickhouse>=26.10"`, `"duckdb=1.5.5"`),
//! and the minimum release of each feature that needs one, which
//! [`EngineTarget::support`] (`engines.rs`) takes away from older releases.
//!
//! A bare name means the engine's newest release as its documentation
//! describes it, except ClickHouse, whose bare name means the release run
//! here (chDB 4.4.0 = ClickHouse 26.9.2.1), because the deletion-vector
//! support its repository merged (ClickHouse#110781) is in no release run
//! here. A requirement counts as reading a feature only if every version it
//! admits does: `<V` admits old releases, so it never gets a feature that
//! needs a minimum version.

use std::fmt;

use super::{SettingErrorKind, TargetEngine};

/// A release number: `480`, `25.8`, `1.5.5`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Version(pub u32, pub u32, pub u32);

impl Version {
    fn parse(text: &str) -> Option<Self> {
        let mut parts = text.trim().split('.');
        let mut next = || -> Option<u32> {
            match parts.next() {
                None => Some(0),
                Some(p) if !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) => p.parse().ok(),
                Some(_) => None,
            }
        };
        let version = Self(next()?, next()?, next()?);
        parts.next().is_none().then_some(version)
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self(major, 0, 0) => write!(f, "{major}"),
            Self(major, minor, 0) => write!(f, "{major}.{minor}"),
            Self(major, minor, patch) => write!(f, "{major}.{minor}.{patch}"),
        }
    }
}

/// Which releases of an engine a `target_engines` entry means.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum VersionReq {
    /// No version given: the newest release (see the module docs).
    Newest,
    /// `>=V`.
    AtLeast(Version),
    /// `<V`.
    Below(Version),
    /// `=V` (or `==V`).
    Exactly(Version),
}

/// A `target_engines` entry: an engine and the releases meant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EngineTarget {
    /// The engine.
    pub engine: TargetEngine,
    /// Its releases.
    pub version: VersionReq,
}

impl From<TargetEngine> for EngineTarget {
    fn from(engine: TargetEngine) -> Self {
        Self {
            engine,
            version: VersionReq::Newest,
        }
    }
}

impl fmt::Display for EngineTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = self.engine.as_str();
        match self.version {
            VersionReq::Newest => f.write_str(name),
            VersionReq::AtLeast(v) => write!(f, "{name}>={v}"),
            VersionReq::Below(v) => write!(f, "{name}<{v}"),
            VersionReq::Exactly(v) => write!(f, "{name}={v}"),
        }
    }
}

/// A feature of the matrix that needs a minimum release.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Feature {
    V3,
    DeletionVectors,
    EqualityDeletes,
}

impl TargetEngine {
    /// The minimum release of each feature that has one (sources in the
    /// matrix of `engines.rs`).
    pub(super) fn since(self) -> &'static [(Feature, Version)] {
        use Feature::*;
        match self {
            // Trino 476 reads v3 tables, but not their deletion vectors.
            Self::Trino => &[(DeletionVectors, Version(480, 0, 0))],
            Self::Duckdb => &[(DeletionVectors, Version(1, 5, 0)), (V3, Version(1, 5, 0))],
            Self::Databricks => &[
                (V3, Version(17, 3, 0)),
                (DeletionVectors, Version(17, 3, 0)),
            ],
            Self::Pyiceberg => &[(DeletionVectors, Version(0, 12, 0))],
            Self::Polars => &[(DeletionVectors, Version(2, 1, 0))],
            Self::Clickhouse => &[
                (EqualityDeletes, Version(25, 8, 0)),
                (DeletionVectors, Version(26, 10, 0)),
            ],
            _ => &[],
        }
    }

    /// The release a bare name stands for when it is not the newest
    /// documented one (see the module docs).
    fn bare_release(self) -> Option<Version> {
        match self {
            Self::Clickhouse => Some(Version(26, 9, 2)),
            _ => None,
        }
    }
}

/// Why a `target_engines` entry does not parse; the message says how to
/// write one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EngineTargetError {
    /// A name that is no engine of the matrix; `known` lists them.
    #[error(
        "unknown engine \"{name}\"; use any of {known}, optionally with a version \
         (\"trino<480\", \"duckdb>=1.5\")"
    )]
    UnknownEngine {
        /// The name as written (trimmed).
        name: String,
        /// The engines' names, comma-separated.
        known: String,
    },
    /// A version requirement not written `>=V`, `<V` or `=V`.
    #[error(
        "\"{entry}\": write a version requirement as {engine}>=V, {engine}<V or {engine}=V \
         with V a release number such as 480 or 1.5.5"
    )]
    BadVersion {
        /// The entry as written (trimmed).
        entry: String,
        /// The engine's name.
        engine: String,
    },
}

impl EngineTargetError {
    /// What kind of failure this is.
    pub fn kind(&self) -> SettingErrorKind {
        match self {
            Self::UnknownEngine { .. } => SettingErrorKind::UnknownName,
            Self::BadVersion { .. } => SettingErrorKind::Syntax,
        }
    }
}

impl EngineTarget {
    /// Parses `name`, `name>=V`, `name<V`, `name=V` or `name==V` (the name
    /// in any case); the error says what is wrong.
    pub fn parse(text: &str) -> Result<Self, EngineTargetError> {
        let text = text.trim();
        let at = text.find(['<', '>', '=']).unwrap_or(text.len());
        let (name, requirement) = text.split_at(at);
        let engine = TargetEngine::from_name(name).ok_or_else(|| {
            let known: Vec<&str> = TargetEngine::ALL.iter().map(|e| e.as_str()).collect();
            EngineTargetError::UnknownEngine {
                name: name.trim().to_owned(),
                known: known.join(", "),
            }
        })?;
        let bad = || EngineTargetError::BadVersion {
            entry: text.to_owned(),
            engine: engine.as_str().to_owned(),
        };
        let version = if requirement.is_empty() {
            VersionReq::Newest
        } else {
            let (make, number): (fn(Version) -> VersionReq, &str) =
                if let Some(v) = requirement.strip_prefix(">=") {
                    (VersionReq::AtLeast, v)
                } else if let Some(v) = requirement.strip_prefix("==") {
                    (VersionReq::Exactly, v)
                } else if let Some(v) = requirement.strip_prefix('=') {
                    (VersionReq::Exactly, v)
                } else if let Some(v) = requirement.strip_prefix('<') {
                    (VersionReq::Below, v)
                } else {
                    return Err(bad());
                };
            make(Version::parse(number).ok_or_else(bad)?)
        };
        Ok(Self { engine, version })
    }

    /// Whether every release this entry admits is `min` or later.
    pub(super) fn at_least(self, min: Version) -> bool {
        match self.version {
            VersionReq::Newest => self.engine.bare_release().is_none_or(|v| v >= min),
            VersionReq::AtLeast(v) | VersionReq::Exactly(v) => v >= min,
            VersionReq::Below(_) => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_parse_with_and_without_versions() {
        let t = EngineTarget::parse("Trino<480").unwrap();
        assert_eq!(t.engine, TargetEngine::Trino);
        assert_eq!(t.version, VersionReq::Below(Version(480, 0, 0)));
        assert_eq!(t.to_string(), "trino<480");
        let d = EngineTarget::parse(" duckdb>=1.5.5 ").unwrap();
        assert_eq!(d.version, VersionReq::AtLeast(Version(1, 5, 5)));
        assert_eq!(
            EngineTarget::parse("clickhouse==26.9").unwrap().to_string(),
            "clickhouse=26.9"
        );
        assert_eq!(
            EngineTarget::parse("daft").unwrap().version,
            VersionReq::Newest
        );
        let e = EngineTarget::parse("trino>480").unwrap_err();
        assert!(
            e.to_string().contains("trino>=V, trino<V or trino=V"),
            "{e}"
        );
        assert!(EngineTarget::parse("trino<4x0").is_err());
        assert!(EngineTarget::parse("trino<1.2.3.4").is_err());
        let e = EngineTarget::parse("presto").unwrap_err();
        assert!(e.to_string().contains("unknown engine \"presto\""), "{e}");
    }

    #[test]
    fn versions_take_away_what_older_releases_lack() {
        let support = |text: &str| EngineTarget::parse(text).unwrap().support();
        assert!(support("trino").deletion_vectors && support("trino").v3);
        assert!(support("trino>=480").deletion_vectors);
        assert!(!support("trino<480").deletion_vectors && support("trino<480").v3);
        assert!(!support("trino=476").deletion_vectors);
        assert!(support("trino=476").position_deletes);
        // ClickHouse's bare name is the release run here (no DVs).
        assert!(!support("clickhouse").deletion_vectors);
        assert!(support("clickhouse").equality_deletes);
        assert!(support("clickhouse>=26.10").deletion_vectors);
        assert!(!support("clickhouse<25.8").equality_deletes);
        assert!(!support("daft").deletion_vectors && support("daft").position_deletes);
        assert!(support("polars").deletion_vectors && support("datafusion").deletion_vectors);
    }
}
