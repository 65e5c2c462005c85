//! What the append and the row-delta snapshots share: the snapshot and
//! commit ids a pending commit carries across attempts, new manifests whose
//! entries inherit their sequence numbers, and, once the manifests to list
//! are known, the manifest list, the snapshot (with v3 row lineage) and the
//! commit (updates + requirements) for the catalog.
//!
//! [`PendingCommit`] is what [`crate::Destination`]'s commit retry loop
//! needs from either kind of pending snapshot.

use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

use iceberg::io::FileIO;
use iceberg::spec::{
    DataContentType, DataFile, FormatVersion, ManifestFile, ManifestListWriter, ManifestWriter,
    ManifestWriterBuilder, PartitionSpecRef, Snapshot, SnapshotReference, SnapshotRetention,
    Summary, TableMetadata, MAIN_BRANCH, UNASSIGNED_SEQUENCE_NUMBER,
};
use iceberg::{TableRequirement, TableUpdate};

use crate::commit::offsets::OffsetsAdvance;
use crate::error::{from_iceberg, IcebergError, IcebergErrorKind};
use crate::table_metadata::spec_id;

/// A snapshot ready to commit.
pub(crate) struct BuiltSnapshot {
    pub(crate) snapshot: Snapshot,
    pub(crate) updates: Vec<TableUpdate>,
    pub(crate) requirements: Vec<TableRequirement>,
}

/// A snapshot being committed, as the commit retry loop sees it: built on
/// the table as last loaded, and rebuilt on each reload after a conflict.
/// Each kind checks in `build` whatever must still hold on the reloaded
/// table (e.g. a row delta's replaced deletion vectors).
pub(crate) trait PendingCommit {
    /// The `topicberg.commit-id` the snapshot carries.
    fn commit_id(&self) -> &str;

    /// The offsets the commit moves, checked against every table state it
    /// is built on (see [`crate::commit::offsets`]).
    fn offsets(&self) -> Option<&OffsetsAdvance>;

    /// The extra summary properties, where the commit loop puts the
    /// offsets record of the table state it builds on.
    fn summary_extra_mut(&mut self) -> &mut BTreeMap<String, String>;

    /// The first attempt that holds the table's commit gate (see
    /// `gate.rs`): a commit holds it from then to its end.
    fn gated_from(&self) -> u32 {
        1
    }

    /// Writes what is missing and builds the snapshot on `metadata`'s
    /// current `main` snapshot. `attempt` numbers the files written per
    /// attempt.
    async fn build(
        &mut self,
        file_io: &FileIO,
        metadata: &TableMetadata,
        attempt: u32,
    ) -> Result<BuiltSnapshot, IcebergError>;
}

/// A positive snapshot id no snapshot of the table has.
pub(crate) fn new_snapshot_id(metadata: &TableMetadata) -> i64 {
    loop {
        let (a, b) = uuid::Uuid::new_v4().as_u64_pair();
        let id = ((a ^ b) & (i64::MAX as u64)) as i64;
        if id != 0 && !metadata.snapshots().any(|s| s.snapshot_id() == id) {
            return id;
        }
    }
}

/// Picks a new `snapshot_id` when another writer took it since it was
/// picked; true when it did (the manifests written for the old id must be
/// written again).
pub(crate) fn renew_snapshot_id_if_taken(metadata: &TableMetadata, snapshot_id: &mut i64) -> bool {
    if metadata
        .snapshots()
        .any(|s| s.snapshot_id() == *snapshot_id)
    {
        *snapshot_id = new_snapshot_id(metadata);
        true
    } else {
        false
    }
}

/// Milliseconds since the epoch, now (0 before it): a snapshot's
/// timestamp, and the clock of the crate's other age checks.
pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// A manifest writer for the table's format: data or delete entries.
pub(crate) fn manifest_writer(
    file_io: &FileIO,
    metadata: &TableMetadata,
    location: &str,
    snapshot_id: i64,
    deletes: bool,
    spec: &PartitionSpecRef,
) -> Result<ManifestWriter, iceberg::Error> {
    let builder = ManifestWriterBuilder::new(
        file_io.new_output(location)?,
        Some(snapshot_id),
        metadata.current_schema().clone(),
        spec.as_ref().clone(),
    );
    Ok(match (metadata.format_version(), deletes) {
        (FormatVersion::V3, false) => builder.build_v3_data(),
        (FormatVersion::V3, true) => builder.build_v3_deletes(),
        (_, false) => builder.build_v2_data(),
        (_, true) => builder.build_v2_deletes(),
    })
}

/// Writes the new manifests of `files`, one per partition spec among them
/// (a manifest holds one spec's entries; files written before another
/// engine changed the spec keep theirs), at
/// `<table>/metadata/<commit_id>-<suffix>.avro` (`<suffix>-spec<id>` for
/// every spec after the first), all entries ADDED, sequence numbers
/// inherited from the manifest list; delete manifests when the files are
/// delete files.
pub(crate) async fn write_new_manifests(
    file_io: &FileIO,
    metadata: &TableMetadata,
    snapshot_id: i64,
    commit_id: &str,
    files: Vec<DataFile>,
    suffix: &str,
) -> Result<Vec<ManifestFile>, IcebergError> {
    let mut by_spec: BTreeMap<i32, Vec<DataFile>> = BTreeMap::new();
    for file in files {
        by_spec.entry(spec_id(&file)).or_default().push(file);
    }
    let mut manifests = Vec::with_capacity(by_spec.len());
    for (i, (spec_id, files)) in by_spec.into_iter().enumerate() {
        let name = match i {
            0 => suffix.to_string(),
            _ => format!("{suffix}-spec{spec_id}"),
        };
        manifests.push(
            write_new_manifest(
                file_io,
                metadata,
                snapshot_id,
                commit_id,
                files,
                spec_id,
                &name,
            )
            .await?,
        );
    }
    Ok(manifests)
}

/// Writes one new manifest of `files`, all of partition spec `spec_id`.
async fn write_new_manifest(
    file_io: &FileIO,
    metadata: &TableMetadata,
    snapshot_id: i64,
    commit_id: &str,
    files: Vec<DataFile>,
    spec_id: i32,
    suffix: &str,
) -> Result<ManifestFile, IcebergError> {
    let deletes = files
        .first()
        .is_some_and(|f| f.content_type() != DataContentType::Data);
    let location = format!("{}/metadata/{commit_id}-{suffix}.avro", metadata.location());
    let step = format!("writing manifest {location}");
    let err = |e: iceberg::Error| from_iceberg(&step, e, IcebergErrorKind::Data);
    let spec = metadata.partition_spec_by_id(spec_id).ok_or_else(|| {
        IcebergError::new(
            IcebergErrorKind::Data,
            &step,
            format!(
                "the table has no partition spec {spec_id}, which new files were written under"
            ),
        )
    })?;
    let mut writer =
        manifest_writer(file_io, metadata, &location, snapshot_id, deletes, spec).map_err(err)?;
    for file in files {
        // Unassigned: the entry inherits the manifest's sequence number.
        writer
            .add_file(file, UNASSIGNED_SEQUENCE_NUMBER)
            .map_err(err)?;
    }
    writer.write_manifest_file().await.map_err(err)
}

/// Writes the manifest list of `manifests` (in that order) for snapshot
/// `snapshot_id` on `metadata`'s current `main` snapshot, and builds the
/// snapshot with `summary` and the commit that adds it and moves `main` to
/// it, required to find the table and `main` as they are in `metadata`.
/// On v3 the manifest list assigns the first row ids and the snapshot
/// records the row range it added.
pub(crate) async fn build_snapshot(
    file_io: &FileIO,
    metadata: &TableMetadata,
    snapshot_id: i64,
    commit_id: &str,
    attempt: u32,
    manifests: Vec<ManifestFile>,
    summary: Summary,
) -> Result<BuiltSnapshot, IcebergError> {
    let format = metadata.format_version();
    let parent = metadata.current_snapshot();
    let sequence_number = metadata.next_sequence_number();
    let parent_id = parent.map(|p| p.snapshot_id());
    let list_location = format!(
        "{}/metadata/snap-{}-{}-{}.avro",
        metadata.location(),
        snapshot_id,
        attempt,
        commit_id
    );
    let list_err = |e: iceberg::Error| {
        from_iceberg(
            format!("writing manifest list {list_location}"),
            e,
            IcebergErrorKind::Data,
        )
    };
    let writer = file_io
        .new_output(&list_location)
        .map_err(list_err)?
        .writer()
        .await
        .map_err(list_err)?;
    let first_row_id = metadata.next_row_id();
    let mut list = match format {
        FormatVersion::V3 => ManifestListWriter::v3(
            writer,
            snapshot_id,
            parent_id,
            sequence_number,
            Some(first_row_id),
        ),
        _ => ManifestListWriter::v2(writer, snapshot_id, parent_id, sequence_number),
    };
    list.add_manifests(manifests.into_iter())
        .map_err(list_err)?;
    let next_row_id = list.next_row_id();
    list.close().await.map_err(list_err)?;

    let timestamp_ms = now_ms().max(metadata.last_updated_ms());
    let builder = Snapshot::builder()
        .with_snapshot_id(snapshot_id)
        .with_parent_snapshot_id(parent_id)
        .with_sequence_number(sequence_number)
        .with_timestamp_ms(timestamp_ms)
        .with_manifest_list(list_location)
        .with_summary(summary)
        .with_schema_id(metadata.current_schema_id());
    let snapshot = match (format, next_row_id) {
        (FormatVersion::V3, Some(next)) => builder
            .with_row_range(first_row_id, next - first_row_id)
            .build(),
        _ => builder.build(),
    };
    let updates = vec![
        TableUpdate::AddSnapshot {
            snapshot: snapshot.clone(),
        },
        TableUpdate::SetSnapshotRef {
            ref_name: MAIN_BRANCH.to_string(),
            reference: SnapshotReference::new(
                snapshot_id,
                SnapshotRetention::branch(None, None, None),
            ),
        },
    ];
    let requirements = vec![
        TableRequirement::UuidMatch {
            uuid: metadata.uuid(),
        },
        TableRequirement::RefSnapshotIdMatch {
            r#ref: MAIN_BRANCH.to_string(),
            snapshot_id: parent_id,
        },
    ];
    Ok(BuiltSnapshot {
        snapshot,
        updates,
        requirements,
    })
}
