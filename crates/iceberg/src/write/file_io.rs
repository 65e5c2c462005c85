//! [`ObjectStorage`] as the `iceberg` crate's [`Storage`]: what its
//! `FileIO` (Parquet, manifest and manifest-list writers and readers) calls,
//! with streaming multipart writes through `object_store`'s `BufWriter`.

use std::ops::Range;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use futures::StreamExt;
use iceberg::io::{
    FileIO, FileIOBuilder, FileMetadata, FileRead, FileWrite, InputFile, OutputFile, Storage,
    StorageConfig as IcebergStorageConfig, StorageFactory,
};
use object_store::buffered::BufWriter;
use object_store::path::Path;
use object_store::{ObjectStore, PutPayload};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use tokio::io::AsyncWriteExt;

use super::storage::ObjectStorage;
use super::storage_fault::{fault, StorageFault};

/// Bytes buffered per object before switching to a multipart upload; also
/// the part size.
pub(super) const PART_SIZE: usize = 8 * 1024 * 1024;
/// Parts of one object uploading at once.
pub(super) const PARTS_IN_FLIGHT: usize = 4;

impl ObjectStorage {
    /// An `iceberg` [`FileIO`] over this storage, for the crate's Parquet,
    /// manifest and manifest-list writers.
    pub fn file_io(&self) -> FileIO {
        FileIOBuilder::new(Arc::new(ObjectStorageFactory {
            storage: self.clone(),
        }))
        .build()
    }
}

/// What deleting many objects at once did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Deletions {
    /// Objects deleted (or already gone).
    pub deleted: usize,
    /// One line per object not deleted: the store's error, which names it.
    pub failures: Vec<String>,
}

impl ObjectStorage {
    /// Deletes `locations` in bulk where the store offers it (S3's
    /// DeleteObjects: up to 1,000 keys a request; elsewhere a few requests
    /// at a time), an object already gone counting as deleted.
    pub async fn delete_all(&self, locations: &[String]) -> Deletions {
        let mut out = Deletions::default();
        let mut groups: Vec<(Arc<dyn ObjectStore>, Vec<Path>)> = Vec::new();
        for location in locations {
            match self.resolve(location) {
                Ok((store, key)) => match groups.iter_mut().find(|(s, _)| Arc::ptr_eq(s, &store)) {
                    Some((_, keys)) => keys.push(key),
                    None => groups.push((store, vec![key])),
                },
                Err(e) => out.failures.push(format!("{location}: {e}")),
            }
        }
        for (store, keys) in groups {
            let keys = futures::stream::iter(keys.into_iter().map(Ok)).boxed();
            let mut results = store.delete_stream(keys);
            while let Some(result) = results.next().await {
                match result {
                    Ok(_) | Err(object_store::Error::NotFound { .. }) => out.deleted += 1,
                    Err(e) => out.failures.push(e.to_string()),
                }
            }
        }
        out
    }
}

/// Hands the one [`ObjectStorage`] to `FileIO`.
#[derive(Debug)]
pub(super) struct ObjectStorageFactory {
    pub(super) storage: ObjectStorage,
}

// `typetag` wants every Storage and StorageFactory to (de)serialize. Ours
// carry credentials, which are never serialized: the serialized form is a
// marker, and deserializing it fails.
impl Serialize for ObjectStorage {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_unit_struct("ObjectStorage")
    }
}

impl<'de> Deserialize<'de> for ObjectStorage {
    fn deserialize<D: Deserializer<'de>>(_: D) -> Result<Self, D::Error> {
        Err(serde::de::Error::custom(
            "topicberg's ObjectStorage holds credentials and cannot be deserialized",
        ))
    }
}

impl Serialize for ObjectStorageFactory {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_unit_struct("ObjectStorageFactory")
    }
}

impl<'de> Deserialize<'de> for ObjectStorageFactory {
    fn deserialize<D: Deserializer<'de>>(_: D) -> Result<Self, D::Error> {
        Err(serde::de::Error::custom(
            "topicberg's ObjectStorageFactory holds credentials and cannot be deserialized",
        ))
    }
}

#[typetag::serde(name = "TopicbergObjectStorageFactory")]
impl StorageFactory for ObjectStorageFactory {
    fn build(&self, _config: &IcebergStorageConfig) -> iceberg::Result<Arc<dyn Storage>> {
        Ok(Arc::new(self.storage.clone()))
    }
}

#[typetag::serde(name = "TopicbergObjectStorage")]
#[async_trait]
impl Storage for ObjectStorage {
    async fn exists(&self, path: &str) -> iceberg::Result<bool> {
        let (store, key) = self.resolve(path)?;
        match store.head(&key).await {
            Ok(_) => Ok(true),
            Err(object_store::Error::NotFound { .. }) => Ok(false),
            Err(e) => Err(fault("checking", path, e)),
        }
    }

    async fn metadata(&self, path: &str) -> iceberg::Result<FileMetadata> {
        let (store, key) = self.resolve(path)?;
        let meta = store
            .head(&key)
            .await
            .map_err(|e| fault("reading the size of", path, e))?;
        Ok(FileMetadata { size: meta.size })
    }

    async fn read(&self, path: &str) -> iceberg::Result<Bytes> {
        let (store, key) = self.resolve(path)?;
        let got = store
            .get(&key)
            .await
            .map_err(|e| fault("reading", path, e))?;
        got.bytes().await.map_err(|e| fault("reading", path, e))
    }

    async fn reader(&self, path: &str) -> iceberg::Result<Box<dyn FileRead>> {
        let (store, key) = self.resolve(path)?;
        Ok(Box::new(ObjectReader {
            store,
            key,
            location: path.to_string(),
        }))
    }

    async fn write(&self, path: &str, bs: Bytes) -> iceberg::Result<()> {
        let (store, key) = self.resolve(path)?;
        store
            .put(&key, PutPayload::from(bs))
            .await
            .map_err(|e| fault("writing", path, e))?;
        Ok(())
    }

    async fn writer(&self, path: &str) -> iceberg::Result<Box<dyn FileWrite>> {
        let (store, key) = self.resolve(path)?;
        Ok(Box::new(ObjectWriter {
            writer: Some(
                BufWriter::with_capacity(store, key, PART_SIZE)
                    .with_max_concurrency(PARTS_IN_FLIGHT),
            ),
            location: path.to_string(),
        }))
    }

    async fn delete(&self, path: &str) -> iceberg::Result<()> {
        let (store, key) = self.resolve(path)?;
        match store.delete(&key).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(fault("deleting", path, e)),
        }
    }

    async fn delete_prefix(&self, path: &str) -> iceberg::Result<()> {
        let (store, prefix) = self.resolve(path)?;
        let mut listing = store.list(Some(&prefix));
        while let Some(meta) = listing.next().await {
            let meta = meta.map_err(|e| fault("listing", path, e))?;
            match store.delete(&meta.location).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => return Err(fault("deleting", meta.location.as_ref(), e)),
            }
        }
        Ok(())
    }

    async fn delete_stream(&self, mut paths: BoxStream<'static, String>) -> iceberg::Result<()> {
        while let Some(path) = paths.next().await {
            self.delete(&path).await?;
        }
        Ok(())
    }

    fn new_input(&self, path: &str) -> iceberg::Result<InputFile> {
        Ok(InputFile::new(Arc::new(self.clone()), path.to_string()))
    }

    fn new_output(&self, path: &str) -> iceberg::Result<OutputFile> {
        Ok(OutputFile::new(Arc::new(self.clone()), path.to_string()))
    }
}

struct ObjectReader {
    store: Arc<dyn ObjectStore>,
    key: Path,
    location: String,
}

#[async_trait]
impl FileRead for ObjectReader {
    async fn read(&self, range: Range<u64>) -> iceberg::Result<Bytes> {
        self.store
            .get_range(&self.key, range)
            .await
            .map_err(|e| fault("reading", &self.location, e))
    }
}

/// Streams an object: buffered up to [`PART_SIZE`], then a multipart upload.
struct ObjectWriter {
    writer: Option<BufWriter>,
    location: String,
}

impl ObjectWriter {
    fn open(&mut self) -> iceberg::Result<&mut BufWriter> {
        let location = &self.location;
        self.writer.as_mut().ok_or_else(|| {
            iceberg::Error::new(
                iceberg::ErrorKind::Unexpected,
                format!("writing {location}: the object is already closed"),
            )
        })
    }
}

#[async_trait]
impl FileWrite for ObjectWriter {
    async fn write(&mut self, bs: Bytes) -> iceberg::Result<()> {
        let location = self.location.clone();
        let Err(e) = self.open()?.put(bs).await else {
            return Ok(());
        };
        // The retries are spent: abort the multipart upload (if one was
        // started) so that its parts do not linger, and refuse more writes.
        let mut writer = self.writer.take().expect("open checked it");
        if let Err(abort) = writer.abort().await {
            tracing::warn!(location = %location, error = %abort, "aborting the multipart upload failed");
        }
        Err(fault("writing", &location, e))
    }

    async fn close(&mut self) -> iceberg::Result<()> {
        let location = self.location.clone();
        self.open()?;
        let mut writer = self.writer.take().expect("checked above");
        writer.shutdown().await.map_err(|e| {
            let message = format!("writing {location}: {e}");
            iceberg::Error::new(iceberg::ErrorKind::Unexpected, message)
                .with_source(StorageFault { retryable: true })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::storage::StorageConfig;
    use super::*;

    #[tokio::test]
    async fn delete_all_deletes_every_object_counts_the_gone_ones_and_names_what_it_could_not() {
        let dir = std::env::temp_dir().join(format!("tb-delete-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut locations: Vec<String> = (0..3)
            .map(|i| {
                let file = dir.join(format!("f{i}.avro"));
                std::fs::write(&file, b"x").unwrap();
                format!("file://{}", file.display())
            })
            .collect();
        locations.push(format!("file://{}/gone.avro", dir.display()));
        locations.push("ftp://elsewhere/f.avro".to_string());
        let storage = ObjectStorage::new(StorageConfig::local());
        let done = storage.delete_all(&locations).await;
        assert_eq!(done.deleted, 4, "{done:?}");
        assert_eq!(done.failures.len(), 1, "{done:?}");
        assert!(
            done.failures[0].contains("ftp://elsewhere/f.avro"),
            "{done:?}"
        );
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
