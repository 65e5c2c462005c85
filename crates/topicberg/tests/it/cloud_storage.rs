//! topicberg's storage on Azure Blob Storage (Azurite) and Google Cloud
//! Storage (fake-gcs-server behind the test bed's XML shim), through the
//! `FileIO` the Parquet and manifest writers use: write (one part and
//! multipart), read, exists, list, delete, for every location form.

use iceberg::io::FileIO;
use topicberg_iceberg::{AzureConfig, GcsConfig, ObjectStorage, StorageConfig};

use crate::testbed::{get, unique_name};

async fn round_trip(io: &FileIO, storage: &ObjectStorage, folder: &str) {
    let small = format!("{folder}/small.bin");
    let large = format!("{folder}/large.bin");
    let big: Vec<u8> = (0..10 * 1024 * 1024).map(|i| (i % 251) as u8).collect();
    io.new_output(&small)
        .unwrap()
        .write(b"hello".to_vec().into())
        .await
        .unwrap();
    io.new_output(&large)
        .unwrap()
        .write(big.clone().into())
        .await
        .unwrap();
    assert!(io.exists(&small).await.unwrap(), "{small}");
    assert_eq!(
        io.new_input(&small).unwrap().read().await.unwrap().as_ref(),
        b"hello"
    );
    let read = io.new_input(&large).unwrap().read().await.unwrap();
    assert_eq!(read.len(), big.len(), "{large}");
    assert!(read.as_ref() == big.as_slice(), "{large} read back differs");
    let listed = storage.list(folder).await.unwrap();
    assert_eq!(listed, vec![large.clone(), small.clone()], "{folder}");
    io.delete(&small).await.unwrap();
    io.delete(&large).await.unwrap();
    assert!(!io.exists(&small).await.unwrap(), "{small} deleted");
}

#[test]
fn files_round_trip_on_azure_and_google_cloud_storage_emulators() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let storage = ObjectStorage::new(StorageConfig {
            s3: None,
            azure: AzureConfig {
                account: Some(get("TESTBED_AZURE_ACCOUNT")),
                access_key: Some(get("TESTBED_AZURE_KEY").into()),
                endpoint: Some(get("TESTBED_AZURITE_BLOB_ENDPOINT")),
            },
            gcs: GcsConfig {
                service_account_path: Some(get("TESTBED_GCS_SERVICE_ACCOUNT")),
            },
        });
        let io = storage.file_io();
        let account = get("TESTBED_AZURE_ACCOUNT");
        let container = get("TESTBED_AZURE_CONTAINER");
        let bucket = get("TESTBED_GCS_BUCKET");
        let run = unique_name("cloud");
        for folder in [
            format!("abfss://{container}@{account}.dfs.core.windows.net/{run}/abfss"),
            format!("wasbs://{container}@{account}.blob.core.windows.net/{run}/wasbs"),
            format!("az://{container}/{run}/az"),
            format!("gs://{bucket}/{run}/gs"),
        ] {
            round_trip(&io, &storage, &folder).await;
        }
    });
}
