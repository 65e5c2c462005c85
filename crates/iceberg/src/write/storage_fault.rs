//! The storage failure an `iceberg::Error` carries in its source chain
//! (transient or permanent), and the error of a location that names no
//! store. Below every store of `write/` ([`super::storage`], the clouds,
//! `FileIO`), which all report through it.

use std::fmt;

/// A storage failure, kept in the `iceberg::Error` source chain so that the
/// write path can tell storage from encoding failures and transient from
/// permanent ones.
#[derive(Debug)]
pub(crate) struct StorageFault {
    pub(crate) retryable: bool,
}

/// Short, as the message is already the error's own text (printing it
/// again as the source doubled every storage error).
impl fmt::Display for StorageFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.retryable {
            "a transient storage failure"
        } else {
            "a permanent storage failure"
        })
    }
}

impl std::error::Error for StorageFault {}

pub(super) fn fault(op: &str, location: &str, e: object_store::Error) -> iceberg::Error {
    use object_store::Error as E;
    let retryable = !matches!(
        e,
        E::NotFound { .. }
            | E::InvalidPath { .. }
            | E::NotSupported { .. }
            | E::AlreadyExists { .. }
            | E::Precondition { .. }
            | E::NotModified { .. }
            | E::NotImplemented
            | E::PermissionDenied { .. }
            | E::Unauthenticated { .. }
            | E::UnknownConfigurationKey { .. }
    );
    let message = format!("{op} {location}: {e}");
    iceberg::Error::new(iceberg::ErrorKind::Unexpected, message)
        .with_retryable(retryable)
        .with_source(StorageFault { retryable })
}

/// The bucket a `s3://` or `gs://` location names.
pub(super) fn bucket_of<'u>(url: &'u url::Url, location: &str) -> iceberg::Result<&'u str> {
    url.host_str()
        .filter(|b| !b.is_empty())
        .ok_or_else(|| bad_location(location, "no bucket"))
}

pub(super) fn bad_location(location: &str, why: &str) -> iceberg::Error {
    let message = format!("location {location}: {why}");
    iceberg::Error::new(iceberg::ErrorKind::DataInvalid, message)
        .with_source(StorageFault { retryable: false })
}
