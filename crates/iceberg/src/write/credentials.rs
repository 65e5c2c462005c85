//! Storage credentials a catalog vends for a table (the Iceberg REST
//! "vended credentials" contract), and how they stay fresh.
//!
//! A client that asks with `X-Iceberg-Access-Delegation: vended-credentials`
//! gets, in the load-table answer, the table's `config` and (REST spec 1.7)
//! `storage-credentials`: per location prefix a config with
//! `s3.access-key-id`, `s3.secret-access-key`, `s3.session-token` and
//! `s3.session-token-expires-at-ms` (plus `s3.endpoint`,
//! `s3.path-style-access`, `client.region`); for Google Cloud Storage
//! `gcs.oauth2.token` and `gcs.oauth2.token-expires-at`; for Azure (ADLS
//! Gen2 / Blob) `adls.sas-token.<account host>` and
//! `adls.sas-token-expires-at-ms.<account host>` (the key names Iceberg's
//! own FileIOs read). [`VendedProvider`] hands them to `object_store` and,
//! before they expire, asks the catalog again (its `.../credentials`
//! endpoint, or a reload of the table) through a [`Refresh`] the
//! destination gives it. The values are [`Secret`]s: never printed.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use futures::future::BoxFuture;
use object_store::aws::AwsCredential;
use object_store::azure::AzureCredential;
use object_store::gcp::GcpCredential;
use object_store::CredentialProvider;
use topicberg_core::Secret;

use super::storage_fault::StorageFault;
use crate::error::CatalogError;

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

    fn aws(&self) -> AwsCredential {
        AwsCredential {
            key_id: self.access_key_id.clone(),
            secret_key: self.secret_access_key.expose().to_string(),
            token: self.session_token.as_ref().map(|t| t.expose().to_string()),
        }
    }
}

/// A bearer token (GCS) or SAS token (Azure) a catalog vended.
#[derive(Clone, PartialEq, Eq)]
pub struct VendedToken {
    /// The token; never printed.
    pub token: Secret,
    /// When it stops working, if the catalog said.
    pub expires_at: Option<SystemTime>,
}

/// Storage credentials a catalog vended for a table, by store.
#[derive(Clone, PartialEq, Eq)]
pub enum Vended {
    /// S3 key, secret and session token.
    S3(VendedS3),
    /// A Google Cloud Storage OAuth2 access token.
    Gcs(VendedToken),
    /// An Azure SAS token (the query string, without `?`).
    Adls(VendedToken),
}

impl fmt::Debug for Vended {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::S3(s3) => s3.fmt(f),
            Self::Gcs(t) | Self::Adls(t) => f
                .debug_struct(self.store())
                .field("token", &"<vended>")
                .field("expires_at", &t.expires_at.map(describe_expiry))
                .finish(),
        }
    }
}

fn millis(value: Option<&String>) -> Option<SystemTime> {
    value
        .and_then(|ms| ms.trim().parse::<u64>().ok())
        .map(|ms| UNIX_EPOCH + Duration::from_millis(ms))
}

impl Vended {
    /// The store these credentials reach, in words.
    pub fn store(&self) -> &'static str {
        match self {
            Self::S3(_) => "S3",
            Self::Gcs(_) => "GCS",
            Self::Adls(_) => "Azure",
        }
    }

    /// When they stop working, if the catalog said.
    pub fn expires_at(&self) -> Option<SystemTime> {
        match self {
            Self::S3(s3) => s3.expires_at,
            Self::Gcs(t) | Self::Adls(t) => t.expires_at,
        }
    }

    /// The credentials for `location` among a load-table answer, for the
    /// store of its scheme: the `storage-credentials` entry with the
    /// longest prefix of it, else the table `config`.
    pub fn for_location(
        location: &str,
        storage_credentials: &[StorageCredential],
        config: &HashMap<String, String>,
    ) -> Option<Self> {
        storage_credentials
            .iter()
            .filter(|c| location.starts_with(c.prefix.trim_end_matches('/')))
            .max_by_key(|c| c.prefix.len())
            .and_then(|c| Self::from_config(location, &c.config))
            .or_else(|| Self::from_config(location, config))
    }

    fn from_config(location: &str, config: &HashMap<String, String>) -> Option<Self> {
        let url = url::Url::parse(location).ok()?;
        match url.scheme() {
            "s3" | "s3a" | "s3n" => VendedS3::from_config(config).map(Self::S3),
            "gs" | "gcs" => Some(Self::Gcs(VendedToken {
                token: Secret::new(config.get("gcs.oauth2.token")?.clone()),
                expires_at: millis(config.get("gcs.oauth2.token-expires-at")),
            })),
            "abfss" | "abfs" | "wasbs" | "wasb" => {
                // Keyed by the account's host; the DFS and Blob hosts of one
                // account share a SAS.
                let host = url.host_str()?;
                let account = host.split('.').next()?;
                let suffix = config
                    .keys()
                    .filter_map(|k| k.strip_prefix("adls.sas-token."))
                    .filter(|h| *h == host || h.split('.').next() == Some(account))
                    .max_by_key(|h| *h == host)?
                    .to_string();
                let token = config.get(&format!("adls.sas-token.{suffix}"))?;
                Some(Self::Adls(VendedToken {
                    token: Secret::new(token.trim_start_matches('?')),
                    expires_at: millis(
                        config.get(&format!("adls.sas-token-expires-at-ms.{suffix}")),
                    ),
                }))
            }
            _ => None,
        }
    }
}

/// A credential `object_store` signs with, made from what a catalog vended.
pub trait FromVended: fmt::Debug + Send + Sync + Sized + 'static {
    /// The store's name in messages.
    const STORE: &'static str;
    /// The credential, if `vended` is for this store.
    fn from_vended(vended: &Vended) -> Option<Self>;
}

impl FromVended for AwsCredential {
    const STORE: &'static str = "S3";
    fn from_vended(vended: &Vended) -> Option<Self> {
        match vended {
            Vended::S3(s3) => Some(s3.aws()),
            _ => None,
        }
    }
}

impl FromVended for GcpCredential {
    const STORE: &'static str = "GCS";
    fn from_vended(vended: &Vended) -> Option<Self> {
        match vended {
            Vended::Gcs(t) => Some(GcpCredential {
                bearer: t.token.expose().to_string(),
            }),
            _ => None,
        }
    }
}

impl FromVended for AzureCredential {
    const STORE: &'static str = "Azure";
    fn from_vended(vended: &Vended) -> Option<Self> {
        match vended {
            Vended::Adls(t) => Some(AzureCredential::SASToken(
                url::form_urlencoded::parse(t.token.expose().as_bytes())
                    .map(|(k, v)| (k.into_owned(), v.into_owned()))
                    .collect(),
            )),
            _ => None,
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

/// Why the catalog gave no fresh credentials for a table.
#[derive(Debug, thiserror::Error)]
pub enum RefreshError {
    /// Asking the catalog failed.
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    /// The catalog answered without credentials for the table.
    #[error("the catalog vended no storage credentials for the table")]
    NoCredentials,
}

impl RefreshError {
    /// Whether asking again may help (the catalog was unreachable or
    /// failing).
    pub fn retryable(&self) -> bool {
        match self {
            Self::Catalog(e) => e.retryable(),
            Self::NoCredentials => false,
        }
    }
}

/// Asks the catalog for fresh credentials of one table.
pub type Refresh = Arc<dyn Fn() -> BoxFuture<'static, Result<Vended, RefreshError>> + Send + Sync>;

/// The vended credentials of one table, renewed before they expire; `C` is
/// the store's credential type.
pub struct VendedProvider<C> {
    table: String,
    current: Mutex<Held<C>>,
    refresh: Refresh,
    /// Serializes refreshes: one request to the catalog at a time.
    refreshing: tokio::sync::Mutex<()>,
}

struct Held<C> {
    credential: Arc<C>,
    obtained: SystemTime,
    expires_at: Option<SystemTime>,
}

/// What the storage needs of a table's provider, whatever its store.
pub trait VendedSource: Send + Sync {
    /// When the credentials in use expire, if known.
    fn expires_at(&self) -> Option<SystemTime>;
    /// Takes credentials vended again (a reload of the table); `false`
    /// when they are for another store.
    fn replace(&self, vended: &Vended) -> bool;
}

impl<C: FromVended> VendedSource for VendedProvider<C> {
    fn expires_at(&self) -> Option<SystemTime> {
        VendedProvider::expires_at(self)
    }
    fn replace(&self, vended: &Vended) -> bool {
        VendedProvider::replace(self, vended)
    }
}

impl<C> fmt::Debug for VendedProvider<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("VendedProvider")
            .field("table", &self.table)
            .field("expires_at", &self.expires_at().map(describe_expiry))
            .finish_non_exhaustive()
    }
}

impl<C> VendedProvider<C> {
    /// When the credentials in use expire, if known.
    pub fn expires_at(&self) -> Option<SystemTime> {
        self.current.lock().expect("credentials").expires_at
    }
}

impl<C: FromVended> VendedProvider<C> {
    /// Credentials of `table` as vended, renewed through `refresh`; `None`
    /// when `vended` is for another store.
    pub fn new(table: &str, vended: &Vended, refresh: Refresh) -> Option<Self> {
        Some(Self {
            table: table.to_string(),
            current: Mutex::new(Held {
                credential: Arc::new(C::from_vended(vended)?),
                obtained: SystemTime::now(),
                expires_at: vended.expires_at(),
            }),
            refresh,
            refreshing: tokio::sync::Mutex::new(()),
        })
    }

    /// Takes credentials vended again (a reload of the table); `false`
    /// (and nothing changed) when they are for another store.
    pub fn replace(&self, vended: &Vended) -> bool {
        let Some(credential) = C::from_vended(vended) else {
            return false;
        };
        *self.current.lock().expect("credentials") = Held {
            credential: Arc::new(credential),
            obtained: SystemTime::now(),
            expires_at: vended.expires_at(),
        };
        true
    }

    /// The credentials, unless they are due for renewal: within 5 minutes
    /// of expiry, or past half their life for short-lived ones.
    fn fresh(&self) -> Option<Arc<C>> {
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
impl<C: FromVended> CredentialProvider for VendedProvider<C> {
    type Credential = C;

    async fn get_credential(&self) -> object_store::Result<Arc<C>> {
        if let Some(credential) = self.fresh() {
            return Ok(credential);
        }
        let _one = self.refreshing.lock().await;
        if let Some(credential) = self.fresh() {
            return Ok(credential);
        }
        match (self.refresh)().await {
            Ok(vended) => {
                if !self.replace(&vended) {
                    return Err(object_store::Error::Generic {
                        store: C::STORE,
                        source: format!(
                            "the catalog renewed the storage credentials of table {} for {}, not {}",
                            self.table,
                            vended.store(),
                            C::STORE
                        )
                        .into(),
                    });
                }
                tracing::info!(
                    table = %self.table,
                    expires_at = %vended.expires_at().map(describe_expiry).unwrap_or_else(|| "not said".into()),
                    "storage credentials renewed from the catalog"
                );
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
                    store: C::STORE,
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

/// A provider of `vended`, for the store its type `C` signs.
pub(super) fn vended_provider<C: FromVended>(
    table: &str,
    vended: &Vended,
    refresh: Refresh,
) -> iceberg::Result<VendedProvider<C>> {
    VendedProvider::new(table, vended, refresh).ok_or_else(|| {
        let message = format!(
            "the catalog vended {} credentials for table {table}, not {}",
            vended.store(),
            C::STORE
        );
        iceberg::Error::new(iceberg::ErrorKind::DataInvalid, message)
            .with_source(StorageFault { retryable: false })
    })
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

    fn s3(key: &str, expires_in_ms: i64) -> Vended {
        Vended::S3(VendedS3::from_config(&config(key, expires_in_ms)).unwrap())
    }

    #[test]
    fn gcs_tokens_and_adls_sas_tokens_are_read_for_their_locations_only() {
        let config = HashMap::from([
            ("gcs.oauth2.token".to_string(), "ya29.gcs-token".to_string()),
            (
                "gcs.oauth2.token-expires-at".to_string(),
                "4102444800000".to_string(),
            ),
            (
                "adls.sas-token.acct.dfs.core.windows.net".to_string(),
                "?sv=2023-11-03&sig=a%2Bb".to_string(),
            ),
            (
                "adls.sas-token-expires-at-ms.acct.dfs.core.windows.net".to_string(),
                "4102444800000".to_string(),
            ),
        ]);
        let gcs = Vended::for_location("gs://b/ns/t", &[], &config).unwrap();
        let bearer = GcpCredential::from_vended(&gcs).unwrap().bearer;
        assert_eq!(bearer, "ya29.gcs-token");
        assert!(gcs.expires_at().is_some());
        assert!(AwsCredential::from_vended(&gcs).is_none());
        // The Blob host of the same account takes the DFS host's SAS.
        for location in [
            "abfss://c@acct.dfs.core.windows.net/ns/t",
            "wasbs://c@acct.blob.core.windows.net/ns/t",
        ] {
            let adls = Vended::for_location(location, &[], &config).unwrap();
            let Some(AzureCredential::SASToken(pairs)) = AzureCredential::from_vended(&adls) else {
                panic!("{adls:?}")
            };
            assert_eq!(pairs[0], ("sv".to_string(), "2023-11-03".to_string()));
            assert_eq!(pairs[1], ("sig".to_string(), "a+b".to_string()));
            let shown = format!("{adls:?}");
            assert!(!shown.contains("sig") && !shown.contains("2023"), "{shown}");
        }
        assert!(
            Vended::for_location("abfss://c@other.dfs.core.windows.net/t", &[], &config).is_none()
        );
        assert!(Vended::for_location("s3://b/t", &[], &config).is_none());
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
        let key = |location: &str| match Vended::for_location(location, &entries, &config("CFG", 1))
        {
            Some(Vended::S3(v)) => v.access_key_id,
            other => panic!("{other:?}"),
        };
        assert_eq!(key("s3://b/ns/t/data/x.parquet"), "LONG");
        assert_eq!(key("s3://other/x"), "CFG");
    }

    #[tokio::test]
    async fn credentials_are_renewed_past_half_their_life_and_kept_while_valid() {
        let calls = Arc::new(AtomicUsize::new(0));
        let counted = calls.clone();
        let refresh: Refresh = Arc::new(move || {
            let n = counted.fetch_add(1, Ordering::SeqCst);
            Box::pin(async move { Ok(s3(&format!("NEW{n}"), 600_000)) })
        });
        // Valid for 10 minutes: used as they are.
        let p =
            VendedProvider::<AwsCredential>::new("ns.t", &s3("FIRST", 600_000), refresh.clone())
                .unwrap();
        assert_eq!(p.get_credential().await.unwrap().key_id, "FIRST");
        assert_eq!(calls.load(Ordering::SeqCst), 0);
        // Already past half of a short life: renewed once.
        let p = VendedProvider::<AwsCredential>::new("ns.t", &s3("OLD", 0), refresh).unwrap();
        assert_eq!(p.get_credential().await.unwrap().key_id, "NEW0");
        assert_eq!(p.get_credential().await.unwrap().key_id, "NEW0");
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn expired_credentials_that_cannot_be_renewed_fail_naming_the_table() {
        let refresh: Refresh = Arc::new(|| {
            Box::pin(async {
                Err(RefreshError::Catalog(CatalogError::new(
                    crate::CatalogErrorKind::Forbidden,
                    "loading the credentials of shop.orders",
                    "the catalog answered 403",
                )))
            })
        });
        let p = VendedProvider::<AwsCredential>::new("shop.orders", &s3("OLD", -1_000), refresh)
            .unwrap();
        let e = p.get_credential().await.unwrap_err().to_string();
        assert!(e.contains("shop.orders") && e.contains("403"), "{e}");
    }

    #[test]
    fn expiry_reads_as_utc_time() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(1_796_141_026), "2026-12-01T16:03:46Z");
    }
}
