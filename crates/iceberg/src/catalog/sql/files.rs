//! Metadata files of the embedded catalog: locations as `file://` URIs,
//! version-numbered names, reading and writing the JSON.

use std::io::Write;
use std::path::{Path, PathBuf};

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

fn local_path_or_error(location: &str, step: &str) -> Result<PathBuf, CatalogError> {
    local_path(location).ok_or_else(|| {
        CatalogError::new(
            CatalogErrorKind::Protocol,
            step,
            format!(
                "{location} is not a local file (the SQL catalog reads and writes file:// locations only)"
            ),
        )
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

/// Reads and parses the metadata file at `location`.
pub(super) fn read_metadata(location: &str, step: &str) -> Result<TableMetadata, CatalogError> {
    let path = local_path_or_error(location, step)?;
    let bytes = std::fs::read(&path).map_err(|e| {
        CatalogError::new(
            CatalogErrorKind::Server,
            step,
            format!("reading the metadata file {}: {e}", path.display()),
        )
    })?;
    if bytes.starts_with(&[0x1f, 0x8b]) {
        return Err(CatalogError::new(
            CatalogErrorKind::Protocol,
            step,
            format!(
                "the metadata file {} is gzip-compressed, which the SQL catalog does not read",
                path.display()
            ),
        ));
    }
    serde_json::from_slice(&bytes).map_err(|e| {
        CatalogError::new(
            CatalogErrorKind::Protocol,
            step,
            format!(
                "the metadata file {} is not table metadata: {e}",
                path.display()
            ),
        )
    })
}

/// Writes `metadata` as a new file at `location` (never over an existing
/// one) and flushes it to disk, so that the pointer swap that follows never
/// names a file a crash could lose.
pub(super) fn write_metadata(
    location: &str,
    metadata: &TableMetadata,
    step: &str,
) -> Result<(), CatalogError> {
    let path = local_path_or_error(location, step)?;
    let json = serde_json::to_vec(metadata).map_err(|e| {
        CatalogError::new(
            CatalogErrorKind::Protocol,
            step,
            format!("serialising the table metadata: {e}"),
        )
    })?;
    let io_error = |e: std::io::Error| {
        CatalogError::new(
            CatalogErrorKind::Server,
            step,
            format!("writing the metadata file {}: {e}", path.display()),
        )
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(io_error)?;
    }
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path)
        .map_err(io_error)?;
    let written = file.write_all(&json).and_then(|()| file.sync_all());
    if let Err(e) = written {
        drop(file);
        let _ = std::fs::remove_file(&path);
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

/// Deletes a metadata file we wrote but did not commit (best effort: an
/// orphan file is harmless).
pub(super) fn remove_quietly(location: &str) {
    if let Some(path) = local_path(location) {
        let _ = std::fs::remove_file(path);
    }
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
