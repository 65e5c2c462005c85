//! How every store's client (S3, Azure, Google Cloud Storage) retries a
//! request on a transient failure: [`S3RetryPolicy`], its defaults and the
//! environment variable that replaces them. Which failures are transient is
//! said in [`super::storage`]'s module docs.

use std::time::Duration;

use object_store::{BackoffConfig, RetryConfig};

/// How S3 requests are retried on transient failures (see the module
/// docs for which failures those are). Each request is retried at most
/// `max_retries` times, and not after `retry_timeout` since its first
/// attempt; the waits start at `init_backoff` and grow up to twofold each
/// time (random jitter), capped at `max_backoff`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct S3RetryPolicy {
    /// Retries after the first attempt (0: none).
    pub max_retries: usize,
    /// The first wait.
    pub init_backoff: Duration,
    /// The longest wait.
    pub max_backoff: Duration,
    /// No retry starts later than this after the first attempt.
    pub retry_timeout: Duration,
}

/// The environment variable that replaces [`S3RetryPolicy::default`] (a
/// test hook, like `TOPICBERG_FAULT`): comma-separated `key=value` with
/// keys `max_retries`, `init_backoff_ms`, `max_backoff_ms`,
/// `retry_timeout_ms`; keys left out keep their defaults.
pub const S3_RETRY_ENV: &str = "TOPICBERG_S3_RETRY";

impl Default for S3RetryPolicy {
    /// 8 retries, waits from 200 ms up to 5 s (at most about 21 s of
    /// waiting in all), none started after 60 s.
    fn default() -> Self {
        Self {
            max_retries: 8,
            init_backoff: Duration::from_millis(200),
            max_backoff: Duration::from_secs(5),
            retry_timeout: Duration::from_secs(60),
        }
    }
}

/// Why a [`S3_RETRY_ENV`] value does not parse (it is then ignored).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RetryPolicyError {
    /// An item without `=`.
    #[error("`{item}` is not key=value")]
    NotKeyValue {
        /// The item as written.
        item: String,
    },
    /// A value that is not a whole number.
    #[error("`{item}`: not a whole number")]
    NotANumber {
        /// The item as written.
        item: String,
        /// Why the value is no number.
        #[source]
        source: std::num::ParseIntError,
    },
    /// A key the policy does not have.
    #[error("unknown key `{key}`")]
    UnknownKey {
        /// The key as written.
        key: String,
    },
}

impl S3RetryPolicy {
    /// The policy [`S3_RETRY_ENV`] sets, or the default. A malformed value
    /// is logged and ignored.
    pub fn from_env() -> Self {
        match std::env::var(S3_RETRY_ENV) {
            Ok(text) => Self::parse(&text).unwrap_or_else(|e| {
                tracing::warn!(variable = S3_RETRY_ENV, error = %e, "ignored; using the default S3 retry policy");
                Self::default()
            }),
            Err(_) => Self::default(),
        }
    }

    /// Parses `max_retries=3,init_backoff_ms=50,...` over the defaults.
    pub fn parse(text: &str) -> Result<Self, RetryPolicyError> {
        let mut policy = Self::default();
        for item in text.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (key, value) =
                item.split_once('=')
                    .ok_or_else(|| RetryPolicyError::NotKeyValue {
                        item: item.to_owned(),
                    })?;
            let number: u64 =
                value
                    .trim()
                    .parse()
                    .map_err(|source| RetryPolicyError::NotANumber {
                        item: item.to_owned(),
                        source,
                    })?;
            match key.trim() {
                "max_retries" => policy.max_retries = number as usize,
                "init_backoff_ms" => policy.init_backoff = Duration::from_millis(number),
                "max_backoff_ms" => policy.max_backoff = Duration::from_millis(number),
                "retry_timeout_ms" => policy.retry_timeout = Duration::from_millis(number),
                other => {
                    return Err(RetryPolicyError::UnknownKey {
                        key: other.to_owned(),
                    })
                }
            }
        }
        Ok(policy)
    }

    pub(super) fn retry_config(&self) -> RetryConfig {
        RetryConfig {
            backoff: BackoffConfig {
                init_backoff: self.init_backoff,
                max_backoff: self.max_backoff.max(self.init_backoff),
                base: 2.0,
            },
            max_retries: self.max_retries,
            retry_timeout: self.retry_timeout,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_policy_parses_over_the_defaults() {
        let policy = S3RetryPolicy::parse("max_retries=3, init_backoff_ms=50").unwrap();
        assert_eq!(policy.max_retries, 3);
        assert_eq!(policy.init_backoff, Duration::from_millis(50));
        assert_eq!(policy.max_backoff, S3RetryPolicy::default().max_backoff);
        assert_eq!(S3RetryPolicy::parse("").unwrap(), S3RetryPolicy::default());
        assert!(S3RetryPolicy::parse("retries=3").is_err());
        assert!(S3RetryPolicy::parse("max_retries=-1").is_err());
        let config = S3RetryPolicy::default().retry_config();
        assert_eq!(config.max_retries, 8);
        assert_eq!(config.retry_timeout, Duration::from_secs(60));
    }
}
