//! Why a delete file (position deletes, equality deletes, a deletion
//! vector) or its manifest entry could not be made, or a deletion vector
//! could not be read.

use iceberg::spec::DataFileBuilderError;
use parquet::errors::ParquetError;

/// What kind of failure a [`DeleteFileError`] is. None is retryable: the
/// same rows or bytes fail again (written, each is
/// [`IcebergErrorKind::Data`](crate::IcebergErrorKind::Data)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeleteFileErrorKind {
    /// The positions or keys given cannot be written (past 2^63-1, none).
    Rows,
    /// A deletion vector's bytes break the spec (length, magic, CRC-32).
    Corrupt,
    /// Encoding the file or building its entry failed.
    Encode,
}

/// Why a delete file or its manifest entry could not be made, or a
/// deletion vector read.
#[derive(Debug, thiserror::Error)]
pub enum DeleteFileError {
    /// A deletion vector position the spec reserves (the top bit).
    #[error("position {max} is past 2^63-1, which a deletion vector cannot hold")]
    VectorPosition { max: u64 },
    /// A position delete past `i64::MAX`.
    #[error("position {position} of {path} is past 2^63-1")]
    Position { position: u64, path: String },
    /// Nothing to delete (a file without rows cannot be written).
    #[error("no {what} to delete")]
    Nothing {
        /// `positions` or `keys`.
        what: &'static str,
    },
    /// A deletion vector whose length does not fit its 4-byte field.
    #[error("the deletion vector is too large ({bitmap_len} bytes)")]
    VectorTooLarge { bitmap_len: usize },
    /// The bitmap could not be serialized.
    #[error("serializing the bitmap: {0}")]
    Serialize(#[source] std::io::Error),
    /// A blob shorter than length, magic and CRC.
    #[error("a deletion vector is at least 12 bytes, got {len}")]
    TooShort { len: usize },
    /// The length field disagrees with the blob.
    #[error("the length field says {declared} bytes of magic and bitmap, the blob holds {holds}")]
    Length { declared: usize, holds: usize },
    /// Not the `deletion-vector-v1` magic.
    #[error("bad magic {found:02X?} (want D1 D3 39 64)")]
    Magic { found: [u8; 4] },
    /// The stored CRC-32 is not that of the bytes.
    #[error("CRC-32 mismatch: stored {stored:08x}, computed {computed:08x}")]
    Crc { stored: u32, computed: u32 },
    /// The bitmap could not be read.
    #[error("reading the bitmap: {0}")]
    Bitmap(#[source] std::io::Error),
    /// Bytes after the bitmap.
    #[error("{left} bytes left after the bitmap")]
    Trailing { left: usize },
    /// The rows could not be made a record batch.
    #[error("{0}")]
    Batch(#[source] arrow_schema::ArrowError),
    /// The zstd level is out of range.
    #[error("zstd level: {0}")]
    ZstdLevel(#[source] ParquetError),
    /// The Parquet writer could not be made.
    #[error("{0}")]
    Writer(#[source] ParquetError),
    /// Writing the rows as Parquet failed.
    #[error("encoding Parquet: {0}")]
    Encode(#[source] ParquetError),
    /// Finishing the Parquet file failed.
    #[error("closing Parquet: {0}")]
    Close(#[source] ParquetError),
    /// The manifest entry could not be built.
    #[error("{0}")]
    Entry(#[source] DataFileBuilderError),
}

impl DeleteFileError {
    /// What kind of failure this is.
    pub fn kind(&self) -> DeleteFileErrorKind {
        use DeleteFileError::*;
        match self {
            VectorPosition { .. } | Position { .. } | Nothing { .. } | VectorTooLarge { .. } => {
                DeleteFileErrorKind::Rows
            }
            TooShort { .. }
            | Length { .. }
            | Magic { .. }
            | Crc { .. }
            | Bitmap(_)
            | Trailing { .. } => DeleteFileErrorKind::Corrupt,
            Serialize(_) | Batch(_) | ZstdLevel(_) | Writer(_) | Encode(_) | Close(_)
            | Entry(_) => DeleteFileErrorKind::Encode,
        }
    }
}
