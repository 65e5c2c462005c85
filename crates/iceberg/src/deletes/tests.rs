//! Row deltas on the embedded catalog in a temporary folder (no test bed):
//! deletion vectors written, listed, read back through Puffin's own
//! reader, merged and replaced; position delete files on v2; equality
//! delete files on `_olake_id` (v2 and v3); the format rules and the
//! stale-DV conflict.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray};
use iceberg::puffin::{CompressionCodec, PuffinReader, DELETION_VECTOR_V1};
use iceberg::spec::{DataFile, FormatVersion, ManifestContentType, ManifestList, ManifestStatus};
use roaring::RoaringTreemap;

use crate::commit::row_delta::{is_stale_deletes, RowDelta};
use crate::deletes::position::POS_FIELD_ID;
use crate::destination::Destination;
use crate::table::TableHandle;
use crate::write::schema::{Column, ColumnType};
use crate::IcebergErrorKind;

struct Folder(std::path::PathBuf);

impl Drop for Folder {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

async fn table(format: FormatVersion) -> (Folder, Destination, TableHandle, DataFile) {
    let folder = Folder(std::env::temp_dir().join(format!("tb-dels-{}", uuid::Uuid::new_v4())));
    std::fs::create_dir_all(&folder.0).unwrap();
    let destination = Destination::open_embedded(&folder.0, "t").unwrap();
    let columns = [
        Column::optional("id", 1, ColumnType::Long),
        Column::optional("text", 2, ColumnType::String),
    ];
    let mut handle = destination
        .ensure_table(&vec!["ns".to_string()], "orders", &columns, format)
        .await
        .unwrap();
    let ids: Vec<i64> = (0..10).collect();
    let batch = RecordBatch::try_new(
        handle.arrow_schema().clone(),
        vec![
            Arc::new(Int64Array::from(ids.clone())) as ArrayRef,
            Arc::new(StringArray::from_iter_values(
                ids.iter().map(|i| format!("r{i}")),
            )),
        ],
    )
    .unwrap();
    let files = destination
        .write_data_files(&handle, [batch])
        .await
        .unwrap();
    destination
        .commit_append(&mut handle, files.clone(), BTreeMap::new())
        .await
        .unwrap();
    let file = files.into_iter().next().unwrap();
    (folder, destination, handle, file)
}

fn vector(positions: &[u64]) -> RoaringTreemap {
    positions.iter().copied().collect()
}

/// (status, content, referenced data file) of every entry of the current
/// snapshot's manifests.
async fn entries(destination: &Destination, handle: &TableHandle) -> Vec<(ManifestStatus, bool)> {
    let snapshot = handle.metadata().current_snapshot().unwrap();
    let bytes = destination
        .file_io()
        .new_input(snapshot.manifest_list())
        .unwrap()
        .read()
        .await
        .unwrap();
    let list =
        ManifestList::parse_with_version(&bytes, handle.metadata().format_version()).unwrap();
    let mut out = Vec::new();
    for manifest in list.entries() {
        let loaded = manifest.load_manifest(destination.file_io()).await.unwrap();
        for e in loaded.entries() {
            out.push((e.status(), manifest.content == ManifestContentType::Deletes));
        }
    }
    out
}

#[tokio::test]
async fn deletion_vectors_are_written_merged_and_replaced() {
    let (_folder, destination, mut handle, file) = table(FormatVersion::V3).await;
    let path = file.file_path().to_string();
    let dvs = destination
        .write_deletion_vectors(&handle, &[(path.clone(), vector(&[1, 2]))])
        .await
        .unwrap();
    assert_eq!(dvs.len(), 1);

    // The Puffin file as the `iceberg` crate's reader sees it.
    let reader = PuffinReader::new(destination.file_io().new_input(dvs[0].file_path()).unwrap());
    let meta = reader.file_metadata().await.unwrap().clone();
    assert_eq!(meta.blobs().len(), 1);
    let blob = &meta.blobs()[0];
    assert_eq!(blob.blob_type(), DELETION_VECTOR_V1);
    assert_eq!(blob.fields(), [POS_FIELD_ID]);
    assert_eq!((blob.snapshot_id(), blob.sequence_number()), (-1, -1));
    assert_eq!(blob.compression_codec(), CompressionCodec::None);
    assert_eq!(blob.properties()["referenced-data-file"], path);
    assert_eq!(blob.properties()["cardinality"], "2");
    assert_eq!(Some(blob.offset() as i64), dvs[0].content_offset());
    assert_eq!(Some(blob.length() as i64), dvs[0].content_size_in_bytes());
    let size = std::fs::metadata(dvs[0].file_path().trim_start_matches("file://"))
        .map(|m| m.len())
        .ok();
    if let Some(size) = size {
        assert_eq!(size, dvs[0].file_size_in_bytes());
    }

    let one = destination
        .commit_row_delta(
            &mut handle,
            RowDelta {
                delete_files: dvs,
                ..RowDelta::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(one.summary["added-dvs"], "1");
    assert_eq!(one.summary["total-position-deletes"], "2");
    assert_eq!(
        handle.snapshot_summaries()[0].operation,
        "delete",
        "deletes only"
    );
    let stale_view = handle.clone();

    let current = destination.current_deletion_vectors(&handle).await.unwrap();
    let old = current[&path].clone();
    let mut merged = destination.read_deletion_vector(&old).await.unwrap();
    assert_eq!(merged, vector(&[1, 2]));
    merged.insert(7);
    let new = destination
        .write_deletion_vectors(&handle, &[(path.clone(), merged)])
        .await
        .unwrap();

    // Adding a second DV for the file without replacing the first is refused.
    let err = destination
        .commit_row_delta(
            &mut handle.clone(),
            RowDelta {
                delete_files: new.clone(),
                ..RowDelta::default()
            },
        )
        .await
        .unwrap_err();
    assert!(is_stale_deletes(&err), "{err}");

    let two = destination
        .commit_row_delta(
            &mut handle,
            RowDelta {
                delete_files: new,
                replaced_dvs: vec![old.clone()],
                ..RowDelta::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(two.summary["added-dvs"], "1");
    assert_eq!(two.summary["removed-dvs"], "1");
    assert_eq!(two.summary["total-position-deletes"], "3");
    assert_eq!(two.summary["total-delete-files"], "1");
    let current = destination.current_deletion_vectors(&handle).await.unwrap();
    assert_eq!(current.len(), 1);
    assert_eq!(
        destination
            .read_deletion_vector(&current[&path])
            .await
            .unwrap(),
        vector(&[1, 2, 7])
    );
    let mut seen = entries(&destination, &handle).await;
    seen.sort_by_key(|(s, d)| (*s as i32, *d));
    assert_eq!(
        seen,
        [
            (ManifestStatus::Added, false),
            (ManifestStatus::Added, true),
            (ManifestStatus::Deleted, true)
        ],
        "the data file, the new DV, the replaced DV"
    );

    // The next row delta leaves out the rewritten manifest, which holds
    // only the DELETED entry now.
    let more = destination
        .write_deletion_vectors(&handle, &[(path.clone(), vector(&[1, 2, 7, 8]))])
        .await
        .unwrap();
    let current = destination.current_deletion_vectors(&handle).await.unwrap();
    destination
        .commit_row_delta(
            &mut handle,
            RowDelta {
                delete_files: more,
                replaced_dvs: vec![current[&path].clone()],
                ..RowDelta::default()
            },
        )
        .await
        .unwrap();
    let mut seen = entries(&destination, &handle).await;
    seen.sort_by_key(|(s, d)| (*s as i32, *d));
    assert_eq!(
        seen,
        [
            (ManifestStatus::Added, false),
            (ManifestStatus::Added, true),
            (ManifestStatus::Deleted, true)
        ],
        "no manifest of only deleted entries is carried forward"
    );

    // A writer that still sees the old DV: told to merge again.
    let mut stale = stale_view;
    let again = destination
        .write_deletion_vectors(&stale, &[(path.clone(), vector(&[1, 2, 3]))])
        .await
        .unwrap();
    let err = destination
        .commit_row_delta(
            &mut stale,
            RowDelta {
                delete_files: again,
                replaced_dvs: vec![old],
                ..RowDelta::default()
            },
        )
        .await
        .unwrap_err();
    assert!(is_stale_deletes(&err), "{err}");
    assert_eq!(
        handle.metadata().next_row_id(),
        10,
        "deletes add no row ids"
    );
}

#[tokio::test]
async fn position_deletes_on_v2_and_the_format_rules() {
    let (_folder, destination, mut handle, file) = table(FormatVersion::V2).await;
    let path = file.file_path().to_string();
    let deletes = destination
        .write_position_deletes(&handle, &[(path.clone(), vec![4, 0])])
        .await
        .unwrap()
        .unwrap();
    assert!(destination
        .write_position_deletes(&handle, &[(path.clone(), vec![])])
        .await
        .unwrap()
        .is_none());
    let dv = destination
        .write_deletion_vectors(&handle, &[(path.clone(), vector(&[1]))])
        .await
        .unwrap();
    let err = destination
        .commit_row_delta(
            &mut handle,
            RowDelta {
                delete_files: dv,
                ..RowDelta::default()
            },
        )
        .await
        .unwrap_err();
    assert_eq!(err.kind, IcebergErrorKind::Data, "{err}");
    assert!(err.detail.contains("version 3"), "{err}");

    let committed = destination
        .commit_row_delta(
            &mut handle,
            RowDelta {
                delete_files: vec![deletes.clone()],
                summary_extra: BTreeMap::from([("topicberg.offsets".into(), "{}".into())]),
                offsets: None,
                ..RowDelta::default()
            },
        )
        .await
        .unwrap();
    let s = &committed.summary;
    assert_eq!(s["added-position-delete-files"], "1");
    assert_eq!(s["added-position-deletes"], "2");
    assert_eq!(s["total-records"], "10");
    assert_eq!(s["topicberg.offsets"], "{}");
    assert!(destination
        .current_deletion_vectors(&handle)
        .await
        .unwrap()
        .is_empty());

    // Deletes computed before another commit removed data files (here a
    // snapshot whose summary says so) no longer apply.
    let before = handle.clone();
    destination
        .commit_append(
            &mut handle,
            Vec::new(),
            BTreeMap::from([("deleted-data-files".into(), "1".into())]),
        )
        .await
        .unwrap();
    let late = destination
        .write_position_deletes(&before, &[(path.clone(), vec![5])])
        .await
        .unwrap()
        .unwrap();
    let err = destination
        .commit_row_delta(
            &mut before.clone(),
            RowDelta {
                delete_files: vec![late],
                ..RowDelta::default()
            },
        )
        .await
        .unwrap_err();
    assert!(is_stale_deletes(&err), "{err}");
    assert!(err.detail.contains("removed or rewrote"), "{err}");

    let (_folder3, target3, mut handle3, _) = table(FormatVersion::V3).await;
    let err = target3
        .commit_row_delta(
            &mut handle3,
            RowDelta {
                delete_files: vec![deletes],
                ..RowDelta::default()
            },
        )
        .await
        .unwrap_err();
    assert!(err.detail.contains("deletion vectors"), "{err}");
}

/// Equality deletes on `_olake_id`, v2 and v3: the delete manifest entry
/// (content 2, `equality_ids`, the snapshot's sequence number), the
/// summary metrics, and a key index rebuilt from the table applies them to
/// older rows only (not to the rows added in the same commit).
#[tokio::test]
async fn equality_deletes_on_the_key_column() {
    use iceberg::spec::DataContentType;

    use crate::deletes::equality::key_hex;
    use crate::key_index::{IndexState, KeyIndex};

    for format in [FormatVersion::V2, FormatVersion::V3] {
        let folder = Folder(std::env::temp_dir().join(format!("tb-eq-{}", uuid::Uuid::new_v4())));
        std::fs::create_dir_all(&folder.0).unwrap();
        let destination = Destination::open_embedded(&folder.0, "t").unwrap();
        let columns = [
            Column::optional("_olake_id", 1, ColumnType::String),
            Column::optional("v", 2, ColumnType::Long),
        ];
        let mut handle = destination
            .ensure_table(&vec!["ns".to_string()], "eq", &columns, format)
            .await
            .unwrap();
        let key_field = handle.schema().field_by_name("_olake_id").unwrap().id;
        let key = |i: u8| [i; 16];
        let arrow_schema = handle.arrow_schema().clone();
        let batch = |keys: &[u8], v: i64| {
            RecordBatch::try_new(
                arrow_schema.clone(),
                vec![
                    Arc::new(StringArray::from_iter_values(
                        keys.iter().map(|k| key_hex(&key(*k))),
                    )) as ArrayRef,
                    Arc::new(Int64Array::from(vec![v; keys.len()])),
                ],
            )
            .unwrap()
        };
        let first = batch(&[1, 2, 3, 4], 1);
        let files = destination
            .write_data_files(&handle, [first])
            .await
            .unwrap();
        destination
            .commit_append(&mut handle, files, BTreeMap::new())
            .await
            .unwrap();

        // Key 2 is rewritten, key 3 deleted; key 5 is new.
        let second = batch(&[2, 5], 2);
        let data = destination
            .write_data_files(&handle, [second])
            .await
            .unwrap();
        let deletes = destination
            .write_equality_deletes(&handle, &[key(3), key(2), key(3)])
            .await
            .unwrap()
            .unwrap();
        assert!(destination
            .write_equality_deletes(&handle, &[])
            .await
            .unwrap()
            .is_none());
        assert_eq!(deletes.content_type(), DataContentType::EqualityDeletes);
        assert_eq!(deletes.equality_ids(), Some(vec![key_field]));
        assert_eq!(deletes.record_count(), 2);
        let committed = destination
            .commit_row_delta(
                &mut handle,
                RowDelta {
                    data_files: data,
                    delete_files: vec![deletes],
                    ..RowDelta::default()
                },
            )
            .await
            .unwrap();
        let s = &committed.summary;
        assert_eq!(s["added-equality-delete-files"], "1", "{s:?}");
        assert_eq!(s["added-equality-deletes"], "2", "{s:?}");
        assert_eq!(s["added-delete-files"], "1", "{s:?}");
        assert_eq!(s["total-equality-deletes"], "2", "{s:?}");
        assert_eq!(s["total-delete-files"], "1", "{s:?}");
        assert!(!s.contains_key("added-position-deletes"), "{s:?}");

        let snapshot = handle.metadata().current_snapshot().unwrap();
        let bytes = destination
            .file_io()
            .new_input(snapshot.manifest_list())
            .unwrap()
            .read()
            .await
            .unwrap();
        let list = ManifestList::parse_with_version(&bytes, format).unwrap();
        let mut seen = 0;
        for manifest in list.entries() {
            let loaded = manifest.load_manifest(destination.file_io()).await.unwrap();
            for e in loaded.entries() {
                if e.content_type() == DataContentType::EqualityDeletes {
                    seen += 1;
                    assert_eq!(manifest.content, ManifestContentType::Deletes);
                    assert_eq!(e.status(), ManifestStatus::Added);
                    assert_eq!(e.sequence_number(), Some(snapshot.sequence_number()));
                    assert_eq!(e.data_file().equality_ids(), Some(vec![key_field]));
                }
            }
        }
        assert_eq!(seen, 1);

        // A key index built from the table: keys 1, 4 in the first file,
        // 2 and 5 in the new one, 3 gone.
        let state = folder.0.join("state");
        let index = KeyIndex::open(&state, &handle, destination.file_io())
            .await
            .unwrap();
        assert!(matches!(index.state(), IndexState::Rebuilt(_)));
        let found = index.lookup((1..=5).map(key)).unwrap();
        let new_file = committed_data_file(&found[1]);
        assert_eq!(found[2], None, "key 3 was deleted");
        assert_eq!(committed_data_file(&found[4]), new_file);
        assert_ne!(committed_data_file(&found[0]), new_file);
        assert_ne!(committed_data_file(&found[3]), new_file);
    }
}

fn committed_data_file(location: &Option<crate::key_index::RowLocation>) -> String {
    location.as_ref().expect("key present").data_file.clone()
}
