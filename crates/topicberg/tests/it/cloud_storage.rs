//! topicberg's storage on Azure Blob Storage (Azurite) and Google Cloud
//! Storage (fake-gcs-server behind the test bed's XML shim), through the
//! `FileIO` the Parquet and manifest writers use: write (one part and
//! multipart), read, exists, list, delete, for every location form; and
//! SAS tokens a catalog vends for Azure.

use std::sync::Arc;

use iceberg::io::FileIO;
use topicberg_iceberg::credentials::{Refresh, RefreshError, Vended, VendedToken};
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

/// A container SAS for the test bed's Azurite account, made by Azure's own
/// Python SDK; `valid_for_s` may be negative (already expired), `key`
/// replaces the account key (a SAS the store must refuse).
fn container_sas(valid_for_s: i64, key: Option<&str>) -> String {
    let script = r#"
import os, sys
from datetime import datetime, timedelta, timezone
from azure.storage.blob import ContainerSasPermissions, generate_container_sas
print(generate_container_sas(
    os.environ["TESTBED_AZURE_ACCOUNT"], os.environ["TESTBED_AZURE_CONTAINER"],
    account_key=sys.argv[2] or os.environ["TESTBED_AZURE_KEY"],
    permission=ContainerSasPermissions(read=True, add=True, create=True, write=True,
                                       delete=True, list=True),
    start=datetime.now(timezone.utc) - timedelta(minutes=5),
    expiry=datetime.now(timezone.utc) + timedelta(seconds=int(sys.argv[1]))))
"#;
    let out = crate::testbed::command(&get("TESTBED_PYTHON"))
        .args(["-c", script, &valid_for_s.to_string(), key.unwrap_or("")])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

fn adls(sas: String, valid_for_s: i64) -> Vended {
    let at = std::time::SystemTime::now()
        .checked_add(std::time::Duration::from_secs(valid_for_s.max(0) as u64))
        .unwrap();
    let expires_at = if valid_for_s < 0 {
        std::time::SystemTime::now() - std::time::Duration::from_secs(60)
    } else {
        at
    };
    Vended::Adls(VendedToken {
        token: sas.into(),
        expires_at: Some(expires_at),
    })
}

/// A catalog's vended SAS token reaches Azure Blob Storage (Azurite checks
/// every signature): a valid one writes and reads, one signed with another
/// key is refused by the store, an expired one is renewed through the
/// catalog, and one that cannot be renewed fails naming the table. The
/// storage holds no account key of its own.
#[test]
fn vended_adls_sas_tokens_sign_azure_requests_and_are_renewed_before_expiry() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let storage = ObjectStorage::new(StorageConfig {
            s3: None,
            azure: AzureConfig {
                endpoint: Some(get("TESTBED_AZURITE_BLOB_ENDPOINT")),
                ..AzureConfig::default()
            },
            gcs: GcsConfig::default(),
        });
        let io = storage.file_io();
        let base = format!(
            "abfss://{}@{}.dfs.core.windows.net/{}",
            get("TESTBED_AZURE_CONTAINER"),
            get("TESTBED_AZURE_ACCOUNT"),
            unique_name("vended")
        );
        let no_refresh: Refresh = Arc::new(|| Box::pin(async { Err(RefreshError::NoCredentials) }));

        let valid = format!("{base}/valid");
        storage
            .use_vended(
                "ns.valid",
                &valid,
                &adls(container_sas(3600, None), 3600),
                no_refresh.clone(),
            )
            .unwrap();
        round_trip(&io, &storage, &valid).await;
        let shown = storage.credential_path(&format!("{valid}/x")).to_string();
        assert!(
            shown.starts_with("credentials vended by the catalog, expiring"),
            "{shown}"
        );

        let forged = format!("{base}/forged");
        let wrong_key = "Zm9yZ2VkLWtleS1mb3JnZWQta2V5LWZvcmdlZC1rZXktZm9yZ2VkLWtleQ==";
        storage
            .use_vended(
                "ns.forged",
                &forged,
                &adls(container_sas(3600, Some(wrong_key)), 3600),
                no_refresh.clone(),
            )
            .unwrap();
        let refused = io
            .new_output(format!("{forged}/f.bin"))
            .unwrap()
            .write(b"x".to_vec().into())
            .await
            .unwrap_err()
            .to_string();
        assert!(refused.contains("403"), "{refused}");

        let renewed = format!("{base}/renewed");
        let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = calls.clone();
        let refresh: Refresh = Arc::new(move || {
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Box::pin(async { Ok(adls(container_sas(3600, None), 3600)) })
        });
        storage
            .use_vended(
                "ns.renewed",
                &renewed,
                &adls(container_sas(-60, None), -60),
                refresh,
            )
            .unwrap();
        round_trip(&io, &storage, &renewed).await;
        assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 1);

        let stale = format!("{base}/stale");
        storage
            .use_vended(
                "shop.orders",
                &stale,
                &adls(container_sas(-60, None), -60),
                no_refresh,
            )
            .unwrap();
        let failed = io
            .new_output(format!("{stale}/f.bin"))
            .unwrap()
            .write(b"x".to_vec().into())
            .await
            .unwrap_err()
            .to_string();
        assert!(
            failed.contains("shop.orders") && failed.contains("could not be renewed"),
            "{failed}"
        );
    });
}
