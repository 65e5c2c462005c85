//! What a table's metadata says, read without changing anything: the
//! snapshots of its `main` branch, the manifests a snapshot lists, what
//! a manifest entry's file is (its partition spec, whether it is a deletion
//! vector), and the table's partition spec and sort order in the job
//! file's words. Below `commit/`, `deletes/` and `maintain/`, which all read
//! these; it uses none of them.

use iceberg::io::FileIO;
use iceberg::spec::{
    DataContentType, DataFile, DataFileFormat, ManifestFile, ManifestList, NullOrder, Snapshot,
    SnapshotRef, SortDirection, TableMetadata, Transform,
};
use topicberg_core::config::{PartitionField, PartitionTransform, SortKey};

use crate::error::{from_iceberg, IcebergError, IcebergErrorKind};

/// The snapshots of the `main` branch, newest first, as far back as the
/// metadata still holds them (expired ones end the walk).
pub(crate) fn main_history(metadata: &TableMetadata) -> impl Iterator<Item = &SnapshotRef> {
    let mut next = metadata.current_snapshot_id();
    std::iter::from_fn(move || {
        let snapshot = metadata.snapshot_by_id(next?)?;
        next = snapshot.parent_snapshot_id();
        Some(snapshot)
    })
}

/// The manifests a snapshot lists.
pub(crate) async fn manifests_of(
    file_io: &FileIO,
    metadata: &TableMetadata,
    snapshot: &Snapshot,
) -> Result<Vec<ManifestFile>, IcebergError> {
    let location = snapshot.manifest_list();
    let step = format!("reading manifest list {location}");
    let bytes = file_io
        .new_input(location)
        .map_err(|e| from_iceberg(&step, e, IcebergErrorKind::Storage))?
        .read()
        .await
        .map_err(|e| from_iceberg(&step, e, IcebergErrorKind::Storage))?;
    Ok(
        ManifestList::parse_with_version(&bytes, metadata.format_version())
            .map_err(|e| from_iceberg(&step, e, IcebergErrorKind::Data))?
            .entries()
            .to_vec(),
    )
}

/// The snapshot summary property that identifies a topicberg commit, so
/// that a commit whose answer was lost can be recognised after a reload.
pub const COMMIT_ID_PROPERTY: &str = "topicberg.commit-id";

/// Whether a snapshot that carries its parent's manifests forward keeps
/// this one. Left out: a manifest that lists no live file (ADDED or
/// EXISTING; a count the manifest list leaves out counts as live), which
/// only records the removals of the snapshot that wrote it (a
/// compaction's DELETED entries), when that snapshot is one of ours (it
/// carries [`COMMIT_ID_PROPERTY`]), so readers do not open them again and
/// again. Another
/// engine's are kept: its maintenance may be about to replace them (Spark's
/// `rewrite_manifests` after its `rewrite_data_files` fails when a manifest
/// it read is gone), and the next compaction of ours drops them.
pub(crate) fn carried_forward(metadata: &TableMetadata, manifest: &ManifestFile) -> bool {
    if has_live_files(manifest) {
        return true;
    }
    let ours = metadata
        .snapshot_by_id(manifest.added_snapshot_id)
        .is_some_and(|s| {
            s.summary()
                .additional_properties
                .contains_key(COMMIT_ID_PROPERTY)
        });
    !ours
}

/// Whether a manifest lists a live file (ADDED or EXISTING; a count the
/// manifest list leaves out counts as yes).
pub(crate) fn has_live_files(manifest: &ManifestFile) -> bool {
    manifest.has_added_files() || manifest.has_existing_files()
}

/// The manifests of the table's current `main` snapshot (none without
/// one).
pub(crate) async fn current_manifests(
    file_io: &FileIO,
    metadata: &TableMetadata,
) -> Result<Vec<ManifestFile>, IcebergError> {
    match metadata.current_snapshot() {
        Some(snapshot) => manifests_of(file_io, metadata, snapshot).await,
        None => Ok(Vec::new()),
    }
}

/// The partition spec id a data or delete file was written under.
///
/// `iceberg` 0.10.1 keeps `DataFile::partition_spec_id` crate-private with
/// no getter (the builder sets it, the manifest writer ignores it), so it
/// is read from the derived `Debug` text, whose `field: value` form is
/// fixed by `#[derive(Debug)]`; a unit test guards it.
pub fn spec_id(file: &DataFile) -> i32 {
    const MARK: &str = "partition_spec_id: ";
    let text = format!("{file:?}");
    // The field sits between `first_row_id` and `referenced_data_file`:
    // a path holding the marker is not taken for it.
    text.match_indices(MARK)
        .filter_map(|(at, _)| {
            let before = text[..at].strip_suffix(", ")?;
            let first_row_id = before.rsplit_once("first_row_id: ")?.1;
            let numbered = first_row_id
                .strip_prefix("Some(")
                .and_then(|n| n.strip_suffix(')'))
                .is_some_and(|n| n.parse::<i64>().is_ok());
            if first_row_id != "None" && !numbered {
                return None;
            }
            let (value, after) = text[at + MARK.len()..].split_once(", ")?;
            after
                .starts_with("referenced_data_file: ")
                .then(|| value.parse().ok())?
        })
        .next()
        .expect("DataFile's Debug text names its partition_spec_id")
}

/// Whether a manifest entry is a deletion vector.
pub fn is_deletion_vector(file: &DataFile) -> bool {
    file.content_type() == DataContentType::PositionDeletes
        && file.file_format() == DataFileFormat::Puffin
}

/// A transform as `partition_by` writes it (`None`: one it has no word for,
/// e.g. `void`).
fn partition_transform(transform: Transform) -> Option<PartitionTransform> {
    Some(match transform {
        Transform::Identity => PartitionTransform::Identity,
        Transform::Bucket(n) => PartitionTransform::Bucket(n),
        Transform::Truncate(w) => PartitionTransform::Truncate(w),
        Transform::Year => PartitionTransform::Year,
        Transform::Month => PartitionTransform::Month,
        Transform::Day => PartitionTransform::Day,
        Transform::Hour => PartitionTransform::Hour,
        _ => return None,
    })
}

/// The name of the current schema's column with field id `source` (one
/// the schema lost: `field <id>`).
fn column_name(metadata: &TableMetadata, source: i32) -> String {
    metadata
        .current_schema()
        .name_by_field_id(source)
        .map_or_else(|| format!("field {source}"), str::to_string)
}

/// `transform` of the column with field id `source`, as `partition_by`
/// writes it (`bucket(16, id)`).
fn transformed(metadata: &TableMetadata, source: i32, transform: Transform) -> String {
    let column = column_name(metadata, source);
    match partition_transform(transform) {
        Some(transform) => PartitionField { transform, column }.to_string(),
        None => format!("{transform}({column})"),
    }
}

/// The default partition spec's fields, as `partition_by` writes them
/// (`["day(ts)", "bucket(16, id)"]`; empty: unpartitioned). A `void`
/// field (a v1 table's dropped partition field) partitions nothing and is
/// left out.
pub fn partition_by(metadata: &TableMetadata) -> Vec<String> {
    metadata
        .default_partition_spec()
        .fields()
        .iter()
        .filter(|f| f.transform != Transform::Void)
        .map(|f| transformed(metadata, f.source_id, f.transform))
        .collect()
}

/// The default sort order's fields, as `sort_by` writes them
/// (`["id asc nulls first"]`, a transform's as in `partition_by`; empty:
/// unsorted).
pub fn sort_by(metadata: &TableMetadata) -> Vec<String> {
    metadata
        .default_sort_order()
        .fields
        .iter()
        .map(|f| {
            let column = match f.transform {
                Transform::Identity => column_name(metadata, f.source_id),
                other => transformed(metadata, f.source_id, other),
            };
            SortKey {
                column,
                descending: f.direction == SortDirection::Descending,
                nulls_first: f.null_order == NullOrder::First,
            }
            .to_string()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use iceberg::spec::{DataFileBuilder, Literal, Struct};

    use super::*;

    #[test]
    fn a_files_spec_id_is_read_back() {
        for id in [0, 7, 1234] {
            let file = DataFileBuilder::default()
                .content(DataContentType::Data)
                .file_path("s3://b/t/data/partition_spec_id: 99/x.parquet".into())
                .file_format(DataFileFormat::Parquet)
                .partition(Struct::from_iter([Some(Literal::int(3))]))
                .partition_spec_id(id)
                .record_count(1)
                .file_size_in_bytes(10)
                .build()
                .unwrap();
            assert_eq!(spec_id(&file), id);
        }
    }

    #[test]
    fn the_partition_spec_and_sort_order_read_as_the_job_file_writes_them() {
        use iceberg::spec::{
            NestedField, PrimitiveType, Schema, SortField, SortOrder, Type, UnboundPartitionSpec,
        };
        use iceberg::TableCreation;
        let field = |id, name: &str, ty| NestedField::optional(id, name, Type::Primitive(ty));
        let schema = Schema::builder()
            .with_fields(vec![
                field(1, "id", PrimitiveType::Long).into(),
                field(2, "ts", PrimitiveType::Timestamptz).into(),
                field(3, "region", PrimitiveType::String).into(),
            ])
            .build()
            .unwrap();
        let spec = UnboundPartitionSpec::builder()
            .add_partition_field(2, "ts_day", Transform::Day)
            .unwrap()
            .add_partition_field(1, "id_bucket", Transform::Bucket(16))
            .unwrap()
            .add_partition_field(3, "region", Transform::Identity)
            .unwrap()
            .build();
        let sort = |source_id, transform, direction, null_order| SortField {
            source_id,
            transform,
            direction,
            null_order,
        };
        let order = SortOrder::builder()
            .with_order_id(1)
            .with_sort_field(sort(
                1,
                Transform::Identity,
                SortDirection::Descending,
                NullOrder::Last,
            ))
            .with_sort_field(sort(
                3,
                Transform::Truncate(4),
                SortDirection::Ascending,
                NullOrder::First,
            ))
            .build_unbound()
            .unwrap();
        let creation = TableCreation::builder()
            .name("t".into())
            .location("s3://b/t".into())
            .schema(schema)
            .partition_spec(spec)
            .sort_order(order)
            .build();
        let metadata = iceberg::spec::TableMetadataBuilder::from_table_creation(creation)
            .unwrap()
            .build()
            .unwrap()
            .metadata;
        assert_eq!(
            partition_by(&metadata),
            ["day(ts)", "bucket(16, id)", "identity(region)"]
        );
        assert_eq!(
            sort_by(&metadata),
            ["id desc nulls last", "truncate(4, region) asc nulls first"]
        );
    }
}
