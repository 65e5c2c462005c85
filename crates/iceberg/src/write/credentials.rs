//! Storage credentials a catalog vends for a table (the Iceberg REST
//! "vended credentials" contract), and how they stay fresh.
//!
//! A client that asks with `X-Iceberg-Access-Delegation: vended-credentials`
//! gets, in the load-table answer, the table's `config` and (REST spec 1.7)
//! `storage-credentials`: per location prefix a config with
//! `s3.access-key-id`, `s3.secret-access-key`, `s3.session-token` and
//! `s3.session-token-expires-at-ms` (plus `s3.endpoint`,
//! `s3.path-style-access`, `client.region`). [`VendedProvider`] hands them
//! to `object_store` and, before they expire, asks the catalog again (its
//! `.../credentials` endpoint, or a reload of the table) through a
//! [`Refresh`] the destination gives it. The values are [`Secret`]s: never
//! printed.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use futures::future::BoxFuture;
use object_store::aws::AwsCredential;
use object_store::CredentialProvider;
use topicberg_core::Secret;

/// One entry of a load-table answer's `storage-credentials`: the config
/// for locations under `prefix`.
#[derive(Clone, PartialEq, Eq)]
pub struct StorageCredential {
    /// The location prefix it covers (`s3://bucket/path`).
    pub prefix: String,
    /// Its configuration (credential values among it).
    pub config: HashMap<String, String>,
}

/// Only the keys: the values are credentials.
impl fmt::Debug for StorageCredential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut keys: Vec<&String> = self.config.keys().collect();
        keys.sort();
        f.debug_struct("StorageCredential")
            .field("prefix", &self.prefix)
            .field("config_keys", &keys)
            .finish()
    }
}

/// S3 credentials a catalog vended, with where they lead.
#[derive(Clone, PartialEq, Eq)]
pub struct VendedS3 {
    /// The access key id.
    pub access_key_id: String,
    /// The secret access key.
    pub secret_access_key: Secret,
    /// The session token of temporary credentials.
    pub session_token: Option<Secret>,
    /// When they stop working, if the catalog said.
    pub expires_at: Option<SystemTime>,
    /// `s3.endpoint`, if the catalog named one.
    pub endpoint: Option<String>,
    /// `s3.path-style-access`, if the catalog said.
    pub path_style: Option<bool>,
    /// `client.region` (or `s3.region`), if the catalog said.
    pub region: Option<String>,
}

impl fmt::Debug for VendedS3 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("VendedS3")
            .field("access_key_id", &"<vended>")
            .field("expires_at", &self.expires_at.map(describe_expiry))
            .field("endpoint", &self.endpoint)
            .finish_non_exhaustive()
    }
}

impl VendedS3 {
    /// The S3 credentials in a table config, if it holds any.
    pub fn from_config(config: &HashMap<String, String>) -> Option<Self> {
        let key = config.get("s3.access-key-id")?;
        let secret = config.get("s3.secret-access-key")?;
        let expires_at = config
            .get("s3.session-token-expires-at-ms")
            .and_then(|ms| ms.trim().parse::<u64>().ok())
            .map(|ms| UNIX_EPOCH + Duration::from_millis(ms));
        Some(Self {
            access_key_id: key.clone(),
            secret_access_key: Secret::new(secret.clone()),
            session_token: config
                .get("s3.session-token")
                .map(|t| Secret::new(t.clone())),
            expires_at,
            endpoint: config.get("s3.endpoint").cloned(),
            path_style: config
                .get("s3.path-style-access")
                .map(|v| v.eq_ignore_ascii_case("true")),
            region: config
                .get("client.region")
                .or_else(|| config.get("s3.region"))
                .cloned(),
        })
    }

    /// The credentials for `location` among a load-table answer: the
    /// `storage-credentials` entry with the longest prefix of it, else the
    /// table `config`.
    pub fn for_location(
        location: &str,
        storage_credentials: &[StorageCredential],
        config: &HashMap<String, String>,
    ) -> Option<Self> {
        storage_credentials
            .iter()
            .filter(|c| location.starts_with(c.prefix.trim_end_matches('/')))
            .max_by_key(|c| c.prefix.len())
            .and_then(|c| Self::from_config(&c.config))
            .or_else(|| Self::from_config(config))
    }

    fn aws(&self) -> AwsCredential {
        AwsCredential {
            key_id: self.access_key_id.clone(),
            secret_key: self.secret_access_key.expose().to_string(),
            token: self.session_token.as_ref().map(|t| t.expose().to_string()),
        }
    }
}

/// `2026-12-01T16:40:00Z (in 59 s)`-like text for reports and `check`.
pub fn describe_expiry(at: SystemTime) -> String {
    let secs = at
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default();
    let left = at
        .duration_since(SystemTime::now())
        .map(|d| format!("in {} s", d.as_secs()))
        .unwrap_or_else(|_| "already expired".into());
    format!("{} ({left})", rfc3339(secs))
}

fn rfc3339(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Asks the catalog for fresh credentials of one table.
pub type Refresh = Arc<dyn Fn() -> BoxFuture<'static, Result<VendedS3, String>> + Send + Sync>;

/// The vended credentials of one table, renewed before they expire.
pub struct VendedProvider {
    table: String,
    current: Mutex<Held>,
    refresh: Refresh,
    /// Serializes refreshes: one request to the catalog at a time.
    refreshing: tokio::sync::Mutex<()>,
}

struct Held {
    credential: Arc<AwsCredential>,
    obtained: SystemTime,
    expires_at: Option<SystemTime>,
}

impl fmt::Debug for VendedProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("VendedProvider")
            .field("table", &self.table)
            .field("expires_at", &self.expires_at().map(describe_expiry))
            .finish_non_exhaustive()
    }
}

impl VendedProvider {
    /// Credentials of `table` as vended, renewed through `refresh`.
    pub fn new(table: &str, vended: &VendedS3, refresh: Refresh) -> Self {
        Self {
            table: table.to_string(),
            current: Mutex::new(Held {
                credential: Arc::new(vended.aws()),
                obtained: SystemTime::now(),
                expires_at: vended.expires_at,
            }),
            refresh,
            refreshing: tokio::sync::Mutex::new(()),
        }
    }

    /// When the credentials in use expire, if known.
    pub fn expires_at(&self) -> Option<SystemTime> {
        self.current.lock().expect("credentials").expires_at
    }

    /// Takes credentials vended again (a reload of the table).
    pub fn replace(&self, vended: &VendedS3) {
        *self.current.lock().expect("credentials") = Held {
            credential: Arc::new(vended.aws()),
            obtained: SystemTime::now(),
            expires_at: vended.expires_at,
        };
    }

    /// The credentials, unless they are due for renewal: within 5 minutes
    /// of expiry, or past half their life for short-lived ones.
    fn fresh(&self) -> Option<Arc<AwsCredential>> {
        let held = self.current.lock().expect("credentials");
        let Some(expires_at) = held.expires_at else {
            return Some(held.credential.clone());
        };
        let life = expires_at.duration_since(held.obtained).unwrap_or_default();
        let margin = (life / 2).min(Duration::from_secs(300));
        let due = expires_at.checked_sub(margin).unwrap_or(expires_at);
        (SystemTime::now() < due).then(|| held.credential.clone())
    }
}

#[async_trait]
impl CredentialProvider for VendedProvider {
    type Credential = AwsCredential;

    async fn get_credential(&self) -> object_store::Result<Arc<AwsCredential>> {
        if let Some(credential) = self.fresh() {
            return Ok(credential);
        }
        let _one = self.refreshing.lock().await;
        if let Some(credential) = self.fresh() {
            return Ok(credential);
        }
        match (self.refresh)().await {
            Ok(vended) => {
                tracing::info!(
                    table = %self.table,
                    expires_at = %vended.expires_at.map(describe_expiry).unwrap_or_else(|| "not said".into()),
                    "storage credentials renewed from the catalog"
                );
                self.replace(&vended);
                Ok(self.current.lock().expect("credentials").credential.clone())
            }
            Err(e) => {
                let expired = self.expires_at().is_some_and(|at| at <= SystemTime::now());
                if !expired {
                    // Still valid: use them, renewing is tried again on the
                    // next request.
                    tracing::warn!(table = %self.table, error = %e, "renewing vended storage credentials failed; the current ones are still valid");
                    return Ok(self.current.lock().expect("credentials").credential.clone());
                }
                Err(object_store::Error::Generic {
                    store: "S3",
                    source: format!(
                        "the storage credentials the catalog vended for table {} expired and could not be renewed: {e}",
                        self.table
                    )
                    .into(),
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn config(key: &str, expires_in_ms: i64) -> HashMap<String, String> {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64;
        HashMap::from([
            ("s3.access-key-id".to_string(), key.to_string()),
            (
                "s3.secret-access-key".to_string(),
                "secret-value".to_string(),
            ),
            ("s3.session-token".to_string(), "token-value".to_string()),
            (
                "s3.session-token-expires-at-ms".to_string(),
                (now + expires_in_ms).to_string(),
            ),
            ("client.region".to_string(), "us-east-1".to_string()),
        ])
    }

    #[test]
    fn vended_credentials_parse_and_never_print_their_values() {
        let v = VendedS3::from_config(&config("AKIA1", 60_000)).unwrap();
        assert_eq!(v.access_key_id, "AKIA1");
        assert_eq!(v.region.as_deref(), Some("us-east-1"));
        let shown = format!("{v:?}");
        assert!(
            !shown.contains("secret-value") && !shown.contains("AKIA1"),
            "{shown}"
        );
        assert!(!shown.contains("token-value"), "{shown}");
        assert!(VendedS3::from_config(&HashMap::new()).is_none());
    }

    #[test]
    fn the_longest_storage_credential_prefix_wins_over_the_table_config() {
        let entries = vec![
            StorageCredential {
                prefix: "s3://b".into(),
                config: config("SHORT", 60_000),
            },
            StorageCredential {
                prefix: "s3://b/ns/t".into(),
                config: config("LONG", 60_000),
            },
        ];
        let v = VendedS3::for_location("s3://b/ns/t/data/x.parquet", &entries, &config("CFG", 1))
            .unwrap();
        assert_eq!(v.access_key_id, "LONG");
        let v = VendedS3::for_location("s3://other/x", &entries, &config("CFG", 1)).unwrap();
        assert_eq!(v.access_key_id, "CFG");
    }

    #[tokio::test]
    async fn credentials_are_renewed_past_half_their_life_and_kept_while_valid() {
        let calls = Arc::new(AtomicUsize::new(0));
        let counted = calls.clone();
        let refresh: Refresh = Arc::new(move || {
            let n = counted.fetch_add(1, Ordering::SeqCst);
            Box::pin(async move {
                Ok(VendedS3::from_config(&config(&format!("NEW{n}"), 600_000)).unwrap())
            })
        });
        // Valid for 10 minutes: used as they are.
        let long = VendedS3::from_config(&config("FIRST", 600_000)).unwrap();
        let p = VendedProvider::new("ns.t", &long, refresh.clone());
        assert_eq!(p.get_credential().await.unwrap().key_id, "FIRST");
        assert_eq!(calls.load(Ordering::SeqCst), 0);
        // Already past half of a short life: renewed once.
        let short = VendedS3::from_config(&config("OLD", 0)).unwrap();
        let p = VendedProvider::new("ns.t", &short, refresh);
        assert_eq!(p.get_credential().await.unwrap().key_id, "NEW0");
        assert_eq!(p.get_credential().await.unwrap().key_id, "NEW0");
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn expired_credentials_that_cannot_be_renewed_fail_naming_the_table() {
        let refresh: Refresh =
            Arc::new(|| Box::pin(async { Err("the catalog answered 403".to_string()) }));
        let expired = VendedS3::from_config(&config("OLD", -1_000)).unwrap();
        let p = VendedProvider::new("shop.orders", &expired, refresh);
        let e = p.get_credential().await.unwrap_err().to_string();
        assert!(e.contains("shop.orders") && e.contains("403"), "{e}");
    }

    #[test]
    fn expiry_reads_as_utc_time() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(1_796_141_026), "2026-12-01T16:03:46Z");
    }
}
