//! Metadata files of the embedded catalog: locations as `file://` URIs
//! (or, with a remote warehouse, `s3://`, `gs://`, `abfss://` ones),
//! version-numbered names, reading and writing the JSON.

use std::io::Write;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use iceberg::io::FileIO;
use iceberg::spec::TableMetadata;

use crate::{CatalogError, CatalogErrorKind};

/// `file://` + an absolute path: `/tmp/w` -> `file:///tmp/w`.
pub(super) fn path_to_uri(path: &str) -> String {
    format!("file://{path}")
}

/// The local path of a location: `file:///abs`, `file:/abs` (Hadoop's
/// form, written by Java engines), `file://localhost/abs` or `/abs`.
/// Anything else (`s3://...`, a relative path) is `None`.
pub(super) fn local_path(location: &str) -> Option<PathBuf> {
    let path = match location.strip_prefix("file:") {
        Some(rest) => match rest.strip_prefix("//") {
            Some(authority_and_path) => match authority_and_path.strip_prefix("localhost") {
                Some(path) if path.starts_with('/') => path,
                _ => authority_and_path,
            },
            None => rest,
        },
        None => location,
    };
    path.starts_with('/').then(|| PathBuf::from(path))
}

/// How the catalog reaches metadata files: local ones through the file
/// system (flushed to disk), others through the storage of a remote
/// warehouse, if the catalog has one.
#[derive(Debug, Clone, Default)]
pub(super) struct MetadataIo {
    /// The warehouse's storage (S3, GCS, Azure); `None`: local files only.
    pub(super) remote: Option<FileIO>,
}

impl MetadataIo {
    fn remote_or_error(&self, location: &str, step: &str) -> Result<&FileIO, CatalogError> {
        self.remote.as_ref().ok_or_else(|| {
            CatalogError::new(
                CatalogErrorKind::Protocol,
                step,
                format!(
                    "{location} is not a local file, and this SQL catalog has no remote \
                     warehouse (set destination.warehouse to an s3://, gs:// or abfss:// URI)"
                ),
            )
        })
    }

    /// Reads and parses the metadata file at `location`.
    pub(super) fn read(&self, location: &str, step: &str) -> Result<TableMetadata, CatalogError> {
        let bytes = match local_path(location) {
            Some(path) => std::fs::read(&path).map_err(|e| {
                CatalogError::new(
                    CatalogErrorKind::Server,
                    step,
                    format!("reading the metadata file {}: {e}", path.display()),
                )
                .with_source(e)
            })?,
            None => {
                let io = self.remote_or_error(location, step)?;
                block_on(async { io.new_input(location)?.read().await })
                    .map_err(|e| storage_error(step, "reading the metadata file", location, e))?
                    .to_vec()
            }
        };
        parse_metadata(&bytes, location, step)
    }

    /// Writes `metadata` as a new file at `location` (a fresh name, never
    /// an existing file), durable before the pointer swap that follows.
    pub(super) fn write(
        &self,
        location: &str,
        metadata: &TableMetadata,
        step: &str,
    ) -> Result<(), CatalogError> {
        let json = serde_json::to_vec(metadata).map_err(|e| {
            CatalogError::new(
                CatalogErrorKind::Protocol,
                step,
                format!("serialising the table metadata: {e}"),
            )
            .with_source(e)
        })?;
        if let Some(path) = local_path(location) {
            return write_local(&path, &json, step);
        }
        let io = self.remote_or_error(location, step)?;
        block_on(async { io.new_output(location)?.write(Bytes::from(json)).await })
            .map_err(|e| storage_error(step, "writing the metadata file", location, e))
    }

    /// Deletes a metadata file we wrote but did not commit (best effort: an
    /// orphan file is harmless).
    pub(super) fn remove_quietly(&self, location: &str) {
        match (local_path(location), &self.remote) {
            (Some(path), _) => {
                let _ = std::fs::remove_file(path);
            }
            (None, Some(io)) => {
                let _ = block_on(io.delete(location));
            }
            (None, None) => {}
        }
    }

    /// Deletes every file under the table folder `location`.
    pub(super) fn remove_folder(&self, location: &str, step: &str) -> Result<(), CatalogError> {
        if let Some(path) = local_path(location) {
            return std::fs::remove_dir_all(&path)
                .or_else(|e| match e.kind() {
                    std::io::ErrorKind::NotFound => Ok(()),
                    _ => Err(e),
                })
                .map_err(|e| {
                    CatalogError::new(
                        CatalogErrorKind::Server,
                        step,
                        format!(
                            "the table is dropped, but deleting its folder {} failed: {e}",
                            path.display()
                        ),
                    )
                    .with_source(e)
                });
        }
        let io = self.remote_or_error(location, step)?;
        block_on(io.delete_prefix(location)).map_err(|e| {
            storage_error(
                step,
                "the table is dropped, but deleting its files",
                location,
                e,
            )
        })
    }
}

/// Runs a storage future from the catalog's blocking thread (tokio's
/// blocking pool, which may wait on the runtime).
fn block_on<T>(future: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Handle::current().block_on(future)
}

fn storage_error(step: &str, doing: &str, location: &str, e: iceberg::Error) -> CatalogError {
    // Never `NotFound`: a metadata file we cannot read is not a missing
    // table (which a sync would create afresh).
    let kind = if e.retryable() {
        CatalogErrorKind::Server
    } else {
        CatalogErrorKind::Protocol
    };
    CatalogError::new(kind, step, format!("{doing} {location}: {e}")).with_source(e)
}

fn parse_metadata(bytes: &[u8], location: &str, step: &str) -> Result<TableMetadata, CatalogError> {
    if bytes.starts_with(&[0x1f, 0x8b]) {
        return Err(CatalogError::new(
            CatalogErrorKind::Protocol,
            step,
            format!(
                "the metadata file {location} is gzip-compressed, which the SQL catalog does not read"
            ),
        ));
    }
    serde_json::from_slice(bytes).map_err(|e| {
        CatalogError::new(
            CatalogErrorKind::Protocol,
            step,
            format!("the metadata file {location} is not table metadata: {e}"),
        )
        .with_source(e)
    })
}

/// The version number a metadata file name starts with
/// (`.../00042-<uuid>.metadata.json` -> 42), or -1 when it has none, so
/// that the next version is 0 (as PyIceberg and Java do).
pub(super) fn metadata_version(location: &str) -> i64 {
    let name = location.rsplit('/').next().unwrap_or_default();
    name.split_once('-')
        .and_then(|(digits, _)| digits.parse::<i64>().ok())
        .filter(|v| *v >= 0)
        .unwrap_or(-1)
}

/// `<table location>/metadata/<version, 5 digits>-<fresh uuid>.metadata.json`.
pub(super) fn metadata_location(table_location: &str, version: i64) -> String {
    format!(
        "{}/metadata/{version:05}-{}.metadata.json",
        table_location.trim_end_matches('/'),
        uuid::Uuid::new_v4()
    )
}

/// Writes `json` as a new local file (never over an existing one) and
/// flushes it to disk, so that the pointer swap that follows never names a
/// file a crash could lose.
fn write_local(path: &Path, json: &[u8], step: &str) -> Result<(), CatalogError> {
    let io_error = |e: std::io::Error| {
        CatalogError::new(
            CatalogErrorKind::Server,
            step,
            format!("writing the metadata file {}: {e}", path.display()),
        )
        .with_source(e)
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(io_error)?;
    }
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(io_error)?;
    let written = file.write_all(json).and_then(|()| file.sync_all());
    if let Err(e) = written {
        drop(file);
        let _ = std::fs::remove_file(path);
        return Err(io_error(e));
    }
    if let Some(dir) = path.parent() {
        // The new directory entry too (best effort: not every file system can).
        if let Ok(dir) = std::fs::File::open(dir) {
            let _ = dir.sync_all();
        }
    }
    Ok(())
}

/// Whether `path` lies strictly inside `folder` (no `..` tricks: both are
/// compared component by component after normalising `.` and `..`).
pub(super) fn strictly_inside(path: &Path, folder: &Path) -> bool {
    let normal = |p: &Path| {
        let mut out = PathBuf::new();
        for c in p.components() {
            match c {
                std::path::Component::ParentDir => {
                    out.pop();
                }
                std::path::Component::CurDir => {}
                other => out.push(other),
            }
        }
        out
    };
    let (path, folder) = (normal(path), normal(folder));
    path != folder && path.starts_with(&folder)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_paths_of_the_location_forms_engines_write() {
        let want = Some(PathBuf::from("/w/ns/t"));
        assert_eq!(local_path("file:///w/ns/t"), want);
        assert_eq!(local_path("file:/w/ns/t"), want);
        assert_eq!(local_path("file://localhost/w/ns/t"), want);
        assert_eq!(local_path("/w/ns/t"), want);
        assert_eq!(local_path("s3://bucket/ns/t"), None);
        assert_eq!(local_path("relative/t"), None);
        assert_eq!(path_to_uri("/w"), "file:///w");
    }

    #[test]
    fn metadata_versions_follow_the_file_name() {
        assert_eq!(
            metadata_version("file:///w/t/metadata/00000-9c12d441-03fe.metadata.json"),
            0
        );
        assert_eq!(
            metadata_version("/w/t/metadata/00042-abc.metadata.json"),
            42
        );
        assert_eq!(metadata_version("/w/t/metadata/v3.metadata.json"), -1);
        let next = metadata_location("file:///w/t/", 7);
        assert!(next.starts_with("file:///w/t/metadata/00007-"), "{next}");
        assert!(next.ends_with(".metadata.json"), "{next}");
        assert_eq!(metadata_version(&next), 7);
    }

    #[test]
    fn only_paths_below_the_folder_are_inside() {
        let w = Path::new("/w");
        assert!(strictly_inside(Path::new("/w/ns/t"), w));
        assert!(!strictly_inside(Path::new("/w"), w));
        assert!(!strictly_inside(Path::new("/w/ns/../.."), w));
        assert!(!strictly_inside(Path::new("/other/t"), w));
    }
}
