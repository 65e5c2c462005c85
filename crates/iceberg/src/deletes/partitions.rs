//! The partition of the data files deletes apply to.
//!
//! Per the Iceberg spec (scan planning), a position delete file applies to
//! a data file only when the data file's partition (spec id and values)
//! equals the delete file's, and an equality delete file only when they
//! are equal or the delete file's spec is unpartitioned. A deletion vector
//! is a position delete entry too. So every delete file is written in the
//! partition of the data files it names: a position delete file per data
//! file, in its partition; equality delete files one per partition; each
//! DV entry with its data file's partition.

use std::collections::{HashMap, HashSet};

use iceberg::io::FileIO;
use iceberg::spec::{ManifestContentType, Struct, TableMetadata};

use crate::error::{from_iceberg, IcebergError, IcebergErrorKind};
use crate::table_metadata::current_manifests;

/// A data file's partition: its spec id and partition value.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FilePartition {
    /// The partition spec the file was written under.
    pub spec_id: i32,
    /// Its partition value (empty for an unpartitioned spec).
    pub value: Struct,
}

impl FilePartition {
    /// The empty partition of spec `spec_id`.
    pub fn unpartitioned(spec_id: i32) -> Self {
        Self {
            spec_id,
            value: Struct::empty(),
        }
    }
}

/// The partition of each of `paths` (data files of the table's current
/// snapshot). A table that only ever had one spec, an unpartitioned one,
/// needs no manifest read; otherwise the current data manifests are read
/// until every path is found. A path not among the live data files is
/// given the default spec when that is unpartitioned, else it is an error.
pub async fn data_file_partitions(
    file_io: &FileIO,
    metadata: &TableMetadata,
    paths: &[&str],
) -> Result<HashMap<String, FilePartition>, IcebergError> {
    let default = metadata.default_partition_spec();
    if metadata.partition_specs_iter().count() == 1 && default.is_unpartitioned() {
        let only = FilePartition::unpartitioned(default.spec_id());
        return Ok(paths
            .iter()
            .map(|p| (p.to_string(), only.clone()))
            .collect());
    }
    let mut wanted: HashSet<&str> = paths.iter().copied().collect();
    let mut found = HashMap::with_capacity(wanted.len());
    for manifest in current_manifests(file_io, metadata).await? {
        if wanted.is_empty() {
            break;
        }
        if manifest.content != ManifestContentType::Data {
            continue;
        }
        let step = format!("reading manifest {}", manifest.manifest_path);
        let loaded = manifest
            .load_manifest(file_io)
            .await
            .map_err(|e| from_iceberg(&step, e, IcebergErrorKind::Storage))?;
        for entry in loaded.entries().iter().filter(|e| e.is_alive()) {
            let file = entry.data_file();
            if wanted.remove(file.file_path()) {
                found.insert(
                    file.file_path().to_string(),
                    FilePartition {
                        spec_id: manifest.partition_spec_id,
                        value: file.partition().clone(),
                    },
                );
            }
        }
    }
    for path in wanted {
        if !default.is_unpartitioned() {
            return Err(IcebergError::new(
                IcebergErrorKind::Data,
                format!("finding the partition of data file {path}"),
                "it is not a live data file of the table's current snapshot",
            ));
        }
        found.insert(
            path.to_string(),
            FilePartition::unpartitioned(default.spec_id()),
        );
    }
    Ok(found)
}

/// The partition of the data file `path` in `partitions` (from
/// [`data_file_partitions`]); `step` names what needed it in the error.
pub fn partition_of<'a>(
    partitions: &'a HashMap<String, FilePartition>,
    path: &str,
    step: &str,
) -> Result<&'a FilePartition, IcebergError> {
    partitions.get(path).ok_or_else(|| {
        IcebergError::new(
            IcebergErrorKind::Data,
            step,
            format!("no partition known for data file {path}"),
        )
    })
}

/// `items` (data file path -> T) grouped by the partition of their data
/// file.
pub fn group_by_partition<T>(
    items: impl IntoIterator<Item = (String, T)>,
    partitions: &HashMap<String, FilePartition>,
) -> Result<HashMap<FilePartition, Vec<(String, T)>>, IcebergError> {
    let mut groups: HashMap<FilePartition, Vec<(String, T)>> = HashMap::new();
    for (path, item) in items {
        let partition = partition_of(partitions, &path, "grouping deletes by partition")?;
        groups
            .entry(partition.clone())
            .or_default()
            .push((path, item));
    }
    Ok(groups)
}
