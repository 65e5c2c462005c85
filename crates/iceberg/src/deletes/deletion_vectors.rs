//! Deletion vectors (format v3): the deleted row positions of one data file
//! as a Puffin blob of type `deletion-vector-v1`.
//!
//! Blob bytes, per the Puffin spec:
//!
//! ```text
//! | length: u32 BE of magic + bitmap | magic D1 D3 39 64 | bitmap | CRC-32: u32 BE of magic + bitmap |
//! ```
//!
//! where the bitmap is a 64-bit Roaring bitmap in the "portable" layout: a
//! u64 LE count of 32-bit bitmaps, then for each, in ascending key order,
//! a u32 LE key (the high 32 bits of the positions) and a standard portable
//! 32-bit Roaring bitmap of the low 32 bits. `roaring`'s
//! `RoaringTreemap::serialize_into` writes exactly that (its bitmaps sit in
//! a `BTreeMap` keyed by the high bits); the unit tests check the bytes.
//!
//! One Puffin file holds one blob per data file; each blob becomes one
//! manifest entry (`content = position deletes`, `file_format = puffin`,
//! `referenced_data_file`, `content_offset`, `content_size_in_bytes`,
//! `record_count` = cardinality). Blob metadata carries `snapshot-id` and
//! `sequence-number` -1 (inherited at commit) and the properties
//! `referenced-data-file` and `cardinality`, no compression.

use std::collections::HashMap;

use iceberg::io::FileIO;
use iceberg::puffin::{Blob, CompressionCodec, PuffinWriter, DELETION_VECTOR_V1};
use iceberg::spec::{DataContentType, DataFile, DataFileBuilder, DataFileFormat, TableMetadata};
use roaring::RoaringTreemap;

use crate::deletes::partitions::{partition_of, FilePartition};
use crate::deletes::position::{data_folder, POS_FIELD_ID};
use crate::deletes::DeleteFileError;
use crate::error::{from_iceberg, IcebergError, IcebergErrorKind};

/// The magic bytes that start a `deletion-vector-v1` blob's payload.
pub const DV_MAGIC: [u8; 4] = [0xD1, 0xD3, 0x39, 0x64];

/// The Puffin file magic (`PFA1`), at its start and in its footer.
const PUFFIN_MAGIC_LEN: u64 = 4;

/// Encodes deleted positions as a `deletion-vector-v1` blob. Positions must
/// be below 2^63 (the spec reserves the most significant bit).
pub fn encode_deletion_vector(positions: &RoaringTreemap) -> Result<Vec<u8>, DeleteFileError> {
    if let Some(max) = positions.max() {
        if max > i64::MAX as u64 {
            return Err(DeleteFileError::VectorPosition { max });
        }
    }
    let bitmap_len = positions.serialized_size();
    let payload_len = u32::try_from(DV_MAGIC.len() + bitmap_len)
        .map_err(|_| DeleteFileError::VectorTooLarge { bitmap_len })?;
    let mut out = Vec::with_capacity(12 + bitmap_len);
    out.extend_from_slice(&payload_len.to_be_bytes());
    out.extend_from_slice(&DV_MAGIC);
    positions
        .serialize_into(&mut out)
        .map_err(DeleteFileError::Serialize)?;
    let crc = crc32fast::hash(&out[4..]);
    out.extend_from_slice(&crc.to_be_bytes());
    Ok(out)
}

/// Decodes a `deletion-vector-v1` blob, checking its length, magic and
/// CRC-32.
pub fn decode_deletion_vector(bytes: &[u8]) -> Result<RoaringTreemap, DeleteFileError> {
    if bytes.len() < 12 {
        return Err(DeleteFileError::TooShort { len: bytes.len() });
    }
    let declared = u32::from_be_bytes(bytes[..4].try_into().expect("4 bytes")) as usize;
    if declared != bytes.len() - 8 {
        return Err(DeleteFileError::Length {
            declared,
            holds: bytes.len() - 8,
        });
    }
    let payload = &bytes[4..bytes.len() - 4];
    if payload[..4] != DV_MAGIC {
        return Err(DeleteFileError::Magic {
            found: payload[..4].try_into().expect("4 bytes"),
        });
    }
    let stored = u32::from_be_bytes(bytes[bytes.len() - 4..].try_into().expect("4 bytes"));
    let computed = crc32fast::hash(payload);
    if stored != computed {
        return Err(DeleteFileError::Crc { stored, computed });
    }
    let mut bitmap = &payload[4..];
    let positions =
        RoaringTreemap::deserialize_from(&mut bitmap).map_err(DeleteFileError::Bitmap)?;
    if !bitmap.is_empty() {
        return Err(DeleteFileError::Trailing { left: bitmap.len() });
    }
    Ok(positions)
}

/// Reads the deleted positions of a deletion vector entry (a position
/// delete entry with `file_format = puffin`): bytes `content_offset ..
/// content_offset + content_size_in_bytes` of its Puffin file.
pub async fn read_deletion_vector(
    file_io: &FileIO,
    dv: &DataFile,
) -> Result<RoaringTreemap, IcebergError> {
    let step = format!(
        "reading the deletion vector of {} in {}",
        dv.referenced_data_file().unwrap_or_default(),
        dv.file_path()
    );
    let (Some(offset), Some(size)) = (dv.content_offset(), dv.content_size_in_bytes()) else {
        return Err(IcebergError::new(
            IcebergErrorKind::Data,
            step,
            "the entry has no content_offset / content_size_in_bytes (not a deletion vector)",
        ));
    };
    if offset < 0 || size < 0 {
        return Err(IcebergError::new(
            IcebergErrorKind::Data,
            step,
            format!("bad blob range: offset {offset}, size {size}"),
        ));
    }
    let (offset, size) = (offset as u64, size as u64);
    let reader = file_io
        .new_input(dv.file_path())
        .map_err(|e| from_iceberg(&step, e, IcebergErrorKind::Storage))?
        .reader()
        .await
        .map_err(|e| from_iceberg(&step, e, IcebergErrorKind::Storage))?;
    let bytes = reader
        .read(offset..offset + size)
        .await
        .map_err(|e| from_iceberg(&step, e, IcebergErrorKind::Storage))?;
    let positions = decode_deletion_vector(&bytes).map_err(|e| {
        IcebergError::new(IcebergErrorKind::Data, &step, e.to_string()).with_source(e)
    })?;
    if positions.len() != dv.record_count() {
        return Err(IcebergError::new(
            IcebergErrorKind::Data,
            step,
            format!(
                "the vector holds {} positions, the entry says {}",
                positions.len(),
                dv.record_count()
            ),
        ));
    }
    Ok(positions)
}

/// The manifest entry of one blob.
pub(crate) fn dv_entry(
    puffin_path: &str,
    puffin_size: u64,
    data_file: &str,
    offset: u64,
    length: u64,
    cardinality: u64,
    partition: &FilePartition,
) -> Result<DataFile, DeleteFileError> {
    DataFileBuilder::default()
        .content(DataContentType::PositionDeletes)
        .file_path(puffin_path.to_string())
        .file_format(DataFileFormat::Puffin)
        .partition(partition.value.clone())
        .partition_spec_id(partition.spec_id)
        .record_count(cardinality)
        .file_size_in_bytes(puffin_size)
        .referenced_data_file(Some(data_file.to_string()))
        .content_offset(Some(offset as i64))
        .content_size_in_bytes(Some(length as i64))
        .build()
        .map_err(DeleteFileError::Entry)
}

/// Writes ONE Puffin file into the table's data folder with one
/// `deletion-vector-v1` blob per `(data file path, positions)` and returns
/// one manifest entry per blob, in input order, each in its data file's
/// partition (from `partitions`). Empty vectors are skipped; a data file
/// named twice is an error (merge the positions first).
pub async fn write_deletion_vectors(
    file_io: &FileIO,
    metadata: &TableMetadata,
    vectors: &[(String, RoaringTreemap)],
    partitions: &HashMap<String, FilePartition>,
) -> Result<Vec<DataFile>, IcebergError> {
    let location = format!(
        "{}/{}-dv.puffin",
        data_folder(metadata),
        uuid::Uuid::new_v4()
    );
    let step = format!("writing deletion vectors {location}");
    let data_err = |detail: String| IcebergError::new(IcebergErrorKind::Data, &step, detail);
    let entry_err = |e: DeleteFileError| data_err(e.to_string()).with_source(e);
    let storage_err = |e: iceberg::Error| from_iceberg(&step, e, IcebergErrorKind::Storage);
    let mut seen = std::collections::HashSet::new();
    for (path, _) in vectors {
        if !seen.insert(path.as_str()) {
            return Err(data_err(format!(
                "{path} is named twice; one deletion vector per data file"
            )));
        }
    }
    let vectors: Vec<&(String, RoaringTreemap)> =
        vectors.iter().filter(|(_, v)| !v.is_empty()).collect();
    if vectors.is_empty() {
        return Ok(Vec::new());
    }
    let output = file_io.new_output(&location).map_err(storage_err)?;
    let properties = HashMap::from([(
        iceberg::puffin::CREATED_BY_PROPERTY.to_string(),
        format!("topicberg {}", env!("CARGO_PKG_VERSION")),
    )]);
    let mut writer = PuffinWriter::new(&output, properties, false)
        .await
        .map_err(storage_err)?;
    // Blobs follow the 4-byte file magic back to back, uncompressed.
    let mut offset = PUFFIN_MAGIC_LEN;
    let mut blobs = Vec::with_capacity(vectors.len());
    for (path, positions) in vectors {
        let data = encode_deletion_vector(positions)
            .map_err(|e| data_err(format!("{path}: {e}")).with_source(e))?;
        let length = data.len() as u64;
        let blob = Blob::builder()
            .r#type(DELETION_VECTOR_V1.to_string())
            .fields(vec![POS_FIELD_ID])
            .snapshot_id(-1)
            .sequence_number(-1)
            .data(data)
            .properties(HashMap::from([
                ("referenced-data-file".to_string(), path.clone()),
                ("cardinality".to_string(), positions.len().to_string()),
            ]))
            .build();
        writer
            .add(blob, CompressionCodec::None)
            .await
            .map_err(storage_err)?;
        blobs.push((path.as_str(), offset, length, positions.len()));
        offset += length;
    }
    writer.close().await.map_err(storage_err)?;
    let size = file_io
        .new_input(&location)
        .map_err(storage_err)?
        .metadata()
        .await
        .map_err(storage_err)?
        .size;
    blobs
        .into_iter()
        .map(|(path, offset, length, cardinality)| {
            let partition = partition_of(partitions, path, &step)?;
            dv_entry(
                &location,
                size,
                path,
                offset,
                length,
                cardinality,
                partition,
            )
            .map_err(entry_err)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table_metadata::is_deletion_vector;

    #[test]
    fn round_trip_including_positions_past_two_to_the_32() {
        let mut positions = RoaringTreemap::new();
        for p in [0u64, 1, 7, 65_535, 65_536, 1 << 20, (1 << 32) - 1] {
            positions.insert(p);
        }
        positions.insert(1 << 32);
        positions.insert((5 << 32) + 42);
        positions.insert(i64::MAX as u64);
        positions.insert_range(100_000..103_000);
        let bytes = encode_deletion_vector(&positions).unwrap();
        let back = decode_deletion_vector(&bytes).unwrap();
        assert_eq!(back, positions);
        assert_eq!(back.len(), 3010);
    }

    #[test]
    fn the_msb_is_reserved() {
        let mut positions = RoaringTreemap::new();
        positions.insert(1u64 << 63);
        assert!(encode_deletion_vector(&positions)
            .unwrap_err()
            .to_string()
            .contains("2^63"));
    }

    #[test]
    fn a_small_vector_has_the_spec_layout() {
        let mut positions = RoaringTreemap::new();
        for p in [1u64, 2, 5, (3 << 32) + 9] {
            positions.insert(p);
        }
        let bytes = encode_deletion_vector(&positions).unwrap();

        // The portable 64-bit layout, built by hand from the spec.
        let mut bitmap = Vec::new();
        bitmap.extend_from_slice(&2u64.to_le_bytes()); // two 32-bit bitmaps
        for (key, values) in [(0u32, vec![1u16, 2, 5]), (3, vec![9])] {
            bitmap.extend_from_slice(&key.to_le_bytes());
            // Standard 32-bit Roaring: cookie 12346 (no run containers),
            // container count, then per container key and cardinality - 1,
            // then the offsets, then the sorted u16 values of the array.
            bitmap.extend_from_slice(&12346u32.to_le_bytes());
            bitmap.extend_from_slice(&1u32.to_le_bytes());
            bitmap.extend_from_slice(&0u16.to_le_bytes());
            bitmap.extend_from_slice(&(values.len() as u16 - 1).to_le_bytes());
            bitmap.extend_from_slice(&16u32.to_le_bytes()); // 4+4+4+4 header bytes
            for v in values {
                bitmap.extend_from_slice(&v.to_le_bytes());
            }
        }
        let mut want = Vec::new();
        want.extend_from_slice(&((4 + bitmap.len()) as u32).to_be_bytes());
        want.extend_from_slice(&[0xD1, 0xD3, 0x39, 0x64]);
        want.extend_from_slice(&bitmap);
        let crc = crc32fast::hash(&want[4..]);
        want.extend_from_slice(&crc.to_be_bytes());
        assert_eq!(bytes, want);
        assert_eq!(&bytes[..4], &((bytes.len() - 8) as u32).to_be_bytes());
    }

    #[test]
    fn crc_is_the_standard_crc32_big_endian() {
        // CRC-32 (IEEE) of "123456789" is CBF43926: the check value.
        assert_eq!(crc32fast::hash(b"123456789"), 0xCBF4_3926);
        let mut positions = RoaringTreemap::new();
        positions.insert(3);
        let mut bytes = encode_deletion_vector(&positions).unwrap();
        let n = bytes.len();
        let crc = crc32fast::hash(&bytes[4..n - 4]).to_be_bytes();
        assert_eq!(&bytes[n - 4..], &crc);
        bytes[9] ^= 0x01;
        assert!(decode_deletion_vector(&bytes)
            .unwrap_err()
            .to_string()
            .contains("CRC"));
    }

    #[test]
    fn decode_rejects_bad_length_and_magic() {
        let mut positions = RoaringTreemap::new();
        positions.insert(3);
        let good = encode_deletion_vector(&positions).unwrap();
        let mut bad_len = good.clone();
        bad_len[3] ^= 1;
        assert!(decode_deletion_vector(&bad_len)
            .unwrap_err()
            .to_string()
            .contains("length"));
        let mut bad_magic = good.clone();
        bad_magic[4] = 0;
        assert!(decode_deletion_vector(&bad_magic)
            .unwrap_err()
            .to_string()
            .contains("magic"));
        assert!(decode_deletion_vector(&good[..8]).is_err());
    }

    #[test]
    fn decodes_a_hand_built_blob_and_checks_the_stored_crc() {
        let mut bitmap = RoaringTreemap::new();
        bitmap.extend([1u64, 5, 1 << 33]);
        let mut body = DV_MAGIC.to_vec();
        bitmap.serialize_into(&mut body).unwrap();
        let mut blob = (body.len() as u32).to_be_bytes().to_vec();
        blob.extend_from_slice(&body);
        blob.extend_from_slice(&crc32fast::hash(&body).to_be_bytes());
        assert_eq!(decode_deletion_vector(&blob).unwrap(), bitmap);
        let last = blob.len() - 1;
        blob[last] ^= 1;
        assert!(decode_deletion_vector(&blob)
            .unwrap_err()
            .to_string()
            .contains("CRC"));
    }

    #[test]
    fn entry_fields() {
        let e = dv_entry(
            "s3://b/t/data/x.puffin",
            500,
            "s3://b/t/data/d.parquet",
            4,
            40,
            3,
            &FilePartition::unpartitioned(0),
        )
        .unwrap();
        assert!(is_deletion_vector(&e));
        assert_eq!(e.record_count(), 3);
        assert_eq!(e.content_offset(), Some(4));
        assert_eq!(e.content_size_in_bytes(), Some(40));
        assert_eq!(
            e.referenced_data_file().as_deref(),
            Some("s3://b/t/data/d.parquet")
        );
    }
}
