//! The snapshot summary of an append or a row delta, with the metrics the
//! Java library writes (`SnapshotSummary`): `added-*` / `removed-*` for data
//! files, delete files, position delete files, deletion vectors (a DV counts
//! its blob's size, as Java's `ScanTaskUtil.contentSizeInBytes` does), the
//! running `total-*` values, and the commit id.

use std::collections::{BTreeMap, HashMap};

use iceberg::spec::{DataContentType, DataFile, Operation, Summary};

pub use crate::table_metadata::COMMIT_ID_PROPERTY;
use crate::table_metadata::{is_deletion_vector, spec_id};

/// The bytes a file adds to the table: the blob for a DV, the file for
/// anything else (as the Java library counts).
fn content_size(file: &DataFile) -> u64 {
    match (is_deletion_vector(file), file.content_size_in_bytes()) {
        (true, Some(size)) => size.max(0) as u64,
        _ => file.file_size_in_bytes(),
    }
}

/// The metrics of the files added or removed.
#[derive(Default)]
struct Metrics {
    data_files: u64,
    records: u64,
    files_size: u64,
    delete_files: u64,
    position_delete_files: u64,
    position_deletes: u64,
    equality_delete_files: u64,
    equality_deletes: u64,
    dvs: u64,
}

impl Metrics {
    fn of(files: &[DataFile]) -> Self {
        let mut m = Self::default();
        for f in files {
            m.files_size += content_size(f);
            match f.content_type() {
                DataContentType::Data => {
                    m.data_files += 1;
                    m.records += f.record_count();
                }
                DataContentType::PositionDeletes => {
                    m.delete_files += 1;
                    m.position_deletes += f.record_count();
                    if is_deletion_vector(f) {
                        m.dvs += 1;
                    } else {
                        m.position_delete_files += 1;
                    }
                }
                DataContentType::EqualityDeletes => {
                    m.delete_files += 1;
                    m.equality_delete_files += 1;
                    m.equality_deletes += f.record_count();
                }
            }
        }
        m
    }

    fn entries(&self, prefix: &str) -> Vec<(String, u64)> {
        [
            ("data-files", self.data_files),
            ("records", self.records),
            ("files-size", self.files_size),
            ("delete-files", self.delete_files),
            ("position-delete-files", self.position_delete_files),
            ("position-deletes", self.position_deletes),
            ("equality-delete-files", self.equality_delete_files),
            ("equality-deletes", self.equality_deletes),
            ("dvs", self.dvs),
        ]
        .into_iter()
        .map(|(k, v)| (format!("{prefix}-{k}"), v))
        .collect()
    }
}

/// The running totals and the metric each one follows.
const TOTALS: [(&str, &str); 6] = [
    ("total-data-files", "data-files"),
    ("total-delete-files", "delete-files"),
    ("total-records", "records"),
    ("total-files-size", "files-size"),
    ("total-position-deletes", "position-deletes"),
    ("total-equality-deletes", "equality-deletes"),
];

/// The summary of an append (no delete files, nothing removed) or a row
/// delta: the caller's properties, the metrics (which win over a caller's
/// key of the same name), the commit id. Like the Java library, a metric is
/// written only when not zero, and a
/// total (the parent's plus what is added, less what is removed) the parent
/// does not carry is left out. The operation is `append` without deletes,
/// `delete` without data files, else `overwrite`.
pub(crate) fn summary(
    parent: Option<&Summary>,
    data_files: &[DataFile],
    delete_files: &[DataFile],
    removed: &[DataFile],
    extra: &BTreeMap<String, String>,
    commit_id: &str,
) -> Summary {
    let mut props: HashMap<String, String> =
        extra.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    let added_files: Vec<DataFile> = data_files.iter().chain(delete_files).cloned().collect();
    let added = Metrics::of(&added_files);
    let gone = Metrics::of(removed);
    let mut delta: HashMap<String, (u64, u64)> = HashMap::new();
    for ((key, a), (_, r)) in added
        .entries("added")
        .into_iter()
        .zip(gone.entries("removed"))
    {
        let name = key.trim_start_matches("added-").to_string();
        delta.insert(name, (a, r));
    }
    for (key, value) in added
        .entries("added")
        .into_iter()
        .chain(gone.entries("removed"))
    {
        // Java names removed data files `deleted-data-files`, removed rows
        // `deleted-records`.
        let key = match key.as_str() {
            "removed-data-files" => "deleted-data-files".to_string(),
            "removed-records" => "deleted-records".to_string(),
            _ => key,
        };
        // A zero metric is not written; a caller's key of its name is kept.
        if value > 0 {
            props.insert(key, value.to_string());
        }
    }
    if !added_files.is_empty() || !removed.is_empty() {
        // Distinct (spec, partition value) pairs among the changed files.
        let changed: std::collections::HashSet<(i32, &iceberg::spec::Struct)> = added_files
            .iter()
            .chain(removed)
            .map(|f| (spec_id(f), f.partition()))
            .collect();
        props.insert("changed-partition-count".into(), changed.len().to_string());
    }
    for (total, metric) in TOTALS {
        let previous = match parent {
            None => Some(0),
            Some(p) => p
                .additional_properties
                .get(total)
                .and_then(|v| v.parse::<u64>().ok()),
        };
        let (a, r) = delta.get(metric).copied().unwrap_or((0, 0));
        match previous {
            Some(previous) => {
                let now = (previous + a).saturating_sub(r);
                props.insert(total.to_string(), now.to_string());
            }
            None => {
                props.remove(total);
            }
        }
    }
    props.insert(COMMIT_ID_PROPERTY.to_string(), commit_id.to_string());
    props.remove("operation");
    let has_data = !data_files.is_empty();
    let has_deletes = !delete_files.is_empty() || !removed.is_empty();
    let operation = match (has_data, has_deletes) {
        (true, true) => Operation::Overwrite,
        (false, true) => Operation::Delete,
        _ => Operation::Append,
    };
    Summary {
        operation,
        additional_properties: props,
    }
}

#[cfg(test)]
mod tests {
    use iceberg::spec::{DataFileBuilder, Struct};

    use iceberg::spec::DataFileFormat;

    use super::*;
    use crate::deletes::deletion_vectors::dv_entry;

    fn data(records: u64, size: u64) -> DataFile {
        DataFileBuilder::default()
            .content(DataContentType::Data)
            .file_path(format!("s3://b/t/data/{records}.parquet"))
            .file_format(DataFileFormat::Parquet)
            .partition(Struct::empty())
            .record_count(records)
            .file_size_in_bytes(size)
            .build()
            .unwrap()
    }

    fn pos_deletes(records: u64, size: u64) -> DataFile {
        DataFileBuilder::default()
            .content(DataContentType::PositionDeletes)
            .file_path(format!("s3://b/t/data/{records}-deletes.parquet"))
            .file_format(DataFileFormat::Parquet)
            .partition(Struct::empty())
            .record_count(records)
            .file_size_in_bytes(size)
            .build()
            .unwrap()
    }

    fn dv(target: &str, cardinality: u64, blob: u64) -> DataFile {
        dv_entry(
            "s3://b/t/data/x.puffin",
            900,
            target,
            4,
            blob,
            cardinality,
            &crate::deletes::partitions::FilePartition::unpartitioned(0),
        )
        .unwrap()
    }

    #[test]
    fn first_append_totals_equal_what_it_adds() {
        let extra = BTreeMap::from([
            (
                "topicberg.offsets".to_string(),
                r#"{"t":{"0":5}}"#.to_string(),
            ),
            ("added-records".to_string(), "999".to_string()),
        ]);
        let s = summary(None, &[data(3, 100), data(2, 50)], &[], &[], &extra, "c1");
        let p = &s.additional_properties;
        assert_eq!(s.operation, Operation::Append);
        assert_eq!(p["added-data-files"], "2");
        assert_eq!(p["added-records"], "5", "computed metrics win");
        assert_eq!(p["added-files-size"], "150");
        assert_eq!(p["total-records"], "5");
        assert_eq!(p["total-data-files"], "2");
        assert_eq!(p["total-files-size"], "150");
        assert_eq!(p["total-delete-files"], "0");
        assert_eq!(p["total-position-deletes"], "0");
        assert_eq!(p["total-equality-deletes"], "0");
        assert_eq!(p["changed-partition-count"], "1");
        assert_eq!(p["topicberg.offsets"], r#"{"t":{"0":5}}"#);
        assert_eq!(p[COMMIT_ID_PROPERTY], "c1");
        assert!(!p.contains_key("added-delete-files"));
    }

    #[test]
    fn append_totals_add_to_the_parent_and_unknown_totals_stay_out() {
        let none = BTreeMap::new();
        let first = summary(None, &[data(3, 100)], &[], &[], &none, "c1");
        let mut parent = first.clone();
        parent.additional_properties.remove("total-files-size");
        let s = summary(Some(&parent), &[data(4, 10)], &[], &[], &none, "c2");
        let p = &s.additional_properties;
        assert_eq!(s.operation, Operation::Append);
        assert_eq!(p["total-records"], "7");
        assert_eq!(p["total-data-files"], "2");
        assert!(!p.contains_key("total-files-size"));
        let empty = summary(Some(&first), &[], &[], &[], &none, "c3");
        assert_eq!(empty.operation, Operation::Append);
        assert_eq!(empty.additional_properties["total-records"], "3");
        assert!(!empty.additional_properties.contains_key("added-records"));
        assert!(!empty
            .additional_properties
            .contains_key("changed-partition-count"));
    }

    #[test]
    fn v2_overwrite_with_position_deletes() {
        let extra = BTreeMap::from([("topicberg.offsets".to_string(), "{}".to_string())]);
        let first = summary(None, &[data(10, 100)], &[], &[], &extra, "c1");
        assert_eq!(first.operation, Operation::Append);
        let s = summary(
            Some(&first),
            &[data(4, 40)],
            &[pos_deletes(3, 30)],
            &[],
            &extra,
            "c2",
        );
        let p = &s.additional_properties;
        assert_eq!(s.operation, Operation::Overwrite);
        assert_eq!(p["added-data-files"], "1");
        assert_eq!(p["added-records"], "4");
        assert_eq!(p["added-files-size"], "70");
        assert_eq!(p["added-delete-files"], "1");
        assert_eq!(p["added-position-delete-files"], "1");
        assert_eq!(p["added-position-deletes"], "3");
        assert!(!p.contains_key("added-dvs"));
        assert!(!p.contains_key("removed-dvs"));
        assert_eq!(
            p["total-records"], "14",
            "total-records counts rows written"
        );
        assert_eq!(p["total-data-files"], "2");
        assert_eq!(p["total-delete-files"], "1");
        assert_eq!(p["total-position-deletes"], "3");
        assert_eq!(p["total-equality-deletes"], "0");
        assert_eq!(p["total-files-size"], "170");
        assert_eq!(p["topicberg.offsets"], "{}");
        assert_eq!(p[COMMIT_ID_PROPERTY], "c2");
    }

    #[test]
    fn v3_dv_replacement_counts_added_and_removed() {
        let first = summary(None, &[data(10, 100)], &[], &[], &BTreeMap::new(), "c1");
        let one = summary(
            Some(&first),
            &[],
            &[dv("s3://b/t/data/10.parquet", 2, 50)],
            &[],
            &BTreeMap::new(),
            "c2",
        );
        assert_eq!(one.operation, Operation::Delete);
        let p = &one.additional_properties;
        assert_eq!(p["added-dvs"], "1");
        assert_eq!(p["added-delete-files"], "1");
        assert_eq!(p["added-position-deletes"], "2");
        assert_eq!(p["added-files-size"], "50", "a DV counts its blob");
        assert!(!p.contains_key("added-position-delete-files"));
        assert_eq!(p["total-files-size"], "150");

        let two = summary(
            Some(&one),
            &[data(3, 30)],
            &[dv("s3://b/t/data/10.parquet", 5, 60)],
            &[dv("s3://b/t/data/10.parquet", 2, 50)],
            &BTreeMap::new(),
            "c3",
        );
        assert_eq!(two.operation, Operation::Overwrite);
        let p = &two.additional_properties;
        assert_eq!(p["added-dvs"], "1");
        assert_eq!(p["removed-dvs"], "1");
        assert_eq!(p["removed-position-deletes"], "2");
        assert_eq!(p["removed-delete-files"], "1");
        assert_eq!(p["removed-files-size"], "50");
        assert_eq!(p["total-delete-files"], "1");
        assert_eq!(p["total-position-deletes"], "5");
        assert_eq!(p["total-files-size"], "190");
        assert_eq!(p["total-records"], "13");
    }
}
