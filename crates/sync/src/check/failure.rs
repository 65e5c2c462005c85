//! Why a step of `check` failed, each with its likely fix.

use topicberg_core::{RegistryError, RegistryErrorKind, ValueFormat};
use topicberg_iceberg::{CatalogErrorKind, IcebergError, IcebergErrorKind};
use topicberg_kafka::{KafkaError, KafkaErrorKind};

use crate::destination::SetupError;
use crate::error::SyncErrorKind;

/// A failed step of `check`: the error, and the likely fix where the error
/// does not name it itself.
#[derive(Debug, thiserror::Error)]
pub enum CheckFailure {
    /// The brokers did not answer, or refused us.
    #[error("{source}{}", kafka_hint(.source.kind))]
    Kafka {
        /// The ping's error.
        #[source]
        source: KafkaError,
    },
    /// The topics could not be listed, or two of them would share a table.
    #[error(transparent)]
    Topics(SetupError),
    /// The consumer group's offsets or the topics' watermarks could not be
    /// read (the ACLs of the group or the topics).
    #[error(transparent)]
    Group(KafkaError),
    /// The schema registry did not answer, or refused us.
    #[error("{source} ({})", registry_hint(.source))]
    Registry {
        /// The registry's error.
        #[source]
        source: RegistryError,
    },
    /// A stream reads registry-framed messages and the job names no
    /// registry (a job built in code: the job file's validation refuses it).
    #[error(
        "stream {topic} reads {format} messages but [source] has no schema_registry_url; \
         set it to the registry's URL, e.g. \"http://host:8081\""
    )]
    NoRegistry {
        /// The stream's topic.
        topic: String,
        /// The format that needs a registry.
        format: ValueFormat,
    },
    /// The registry could not say how a stream's values are read.
    #[error("{topic}: {source} ({})", registry_hint(.source))]
    Format {
        /// The stream's topic.
        topic: String,
        /// The registry's error.
        #[source]
        source: RegistryError,
    },
    /// The catalog did not answer, or refused us.
    #[error("{source}{}", catalog_hint(&.source.to_string()))]
    Catalog {
        /// The connection's error.
        #[source]
        source: SetupError,
    },
    /// The throw-away table could not be created.
    #[error("{source}{}", create_hint(.source.kind))]
    CreateTable {
        /// The catalog's error.
        #[source]
        source: IcebergError,
    },
    /// Its data file could not be written.
    #[error(
        "{0} (check s3_endpoint, s3_region, the storage credentials named above and that the \
         bucket exists and is writable)"
    )]
    WriteFile(#[source] IcebergError),
    /// It could not be dropped.
    #[error(transparent)]
    DropTable(IcebergError),
}

impl CheckFailure {
    /// What kind of failure.
    pub fn kind(&self) -> SyncErrorKind {
        match self {
            Self::Kafka { .. } | Self::Group(_) => SyncErrorKind::Kafka,
            Self::Topics(e) | Self::Catalog { source: e } => e.kind(),
            Self::Registry { .. } | Self::Format { .. } => SyncErrorKind::Registry,
            Self::NoRegistry { .. } => SyncErrorKind::Config,
            Self::CreateTable { .. } | Self::WriteFile(_) | Self::DropTable(_) => {
                SyncErrorKind::Iceberg
            }
        }
    }

    /// Whether the step may pass when tried again without a change.
    pub fn retryable(&self) -> bool {
        match self {
            Self::Kafka { source: e } | Self::Group(e) => e.retryable(),
            Self::Topics(e) | Self::Catalog { source: e } => e.retryable(),
            Self::Registry { source: e } | Self::Format { source: e, .. } => e.is_retryable(),
            Self::NoRegistry { .. } => false,
            Self::CreateTable { source: e } | Self::WriteFile(e) | Self::DropTable(e) => {
                e.retryable()
            }
        }
    }
}

/// The likely fix of a failed ping: the error itself names the user,
/// mechanism, the TLS cause and the fields to fix.
fn kafka_hint(kind: KafkaErrorKind) -> &'static str {
    match kind {
        KafkaErrorKind::Unreachable => {
            " (check bootstrap_servers and that the brokers advertise an address this machine can reach)"
        }
        _ => "",
    }
}

/// The likely fix of a failed catalog connection.
fn catalog_hint(text: &str) -> &'static str {
    if text.contains("401") || text.contains("Unauthorized") || text.contains("invalid_client") {
        " (wrong client id or secret)"
    } else if text.contains("403") {
        " (the principal lacks a privilege on the catalog)"
    } else if text.contains("404") {
        " (check uri and warehouse)"
    } else {
        ""
    }
}

/// The likely fix of a failed table creation.
fn create_hint(kind: IcebergErrorKind) -> &'static str {
    match kind {
        IcebergErrorKind::Catalog(CatalogErrorKind::Forbidden) => {
            " (grant the principal the right to create namespaces and tables, e.g. CATALOG_MANAGE_CONTENT on Polaris)"
        }
        IcebergErrorKind::Catalog(CatalogErrorKind::NotFound) => " (check the warehouse name)",
        _ => "",
    }
}

/// The likely fix of a registry error, by its kind.
fn registry_hint(e: &RegistryError) -> &'static str {
    match e.kind {
        RegistryErrorKind::Unauthorized => {
            "check schema_registry_username and schema_registry_password (Confluent Cloud: \
             the Schema Registry's API key and secret, not the Kafka cluster's)"
        }
        RegistryErrorKind::Unavailable if e.message.to_lowercase().contains("certificate") => {
            "the registry's TLS certificate is not trusted: set schema_registry_ca_pem to the \
             CA that signed it"
        }
        RegistryErrorKind::Unavailable => {
            "check schema_registry_url and that the registry is running and reachable from \
             this machine"
        }
        RegistryErrorKind::NotFound => {
            "check schema_registry_url: no schema registry API answers at that path"
        }
        RegistryErrorKind::Invalid => "check schema_registry_url and schema_registry_ca_pem",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hints_name_the_field_to_fix() {
        let error = |kind, message: &str| RegistryError {
            kind,
            registry: "https://sr:8081".into(),
            what: "GET /subjects".into(),
            message: message.into(),
        };
        let shown = CheckFailure::Registry {
            source: error(RegistryErrorKind::Unauthorized, "HTTP 401"),
        }
        .to_string();
        assert!(shown.starts_with("schema registry https://sr:8081: GET /subjects: HTTP 401 ("));
        assert!(shown.contains("schema_registry_password"), "{shown}");
        let tls = error(
            RegistryErrorKind::Unavailable,
            "error trying to connect: certificate verify failed",
        );
        assert!(CheckFailure::Registry { source: tls }
            .to_string()
            .contains("schema_registry_ca_pem"));
        let down = error(RegistryErrorKind::Unavailable, "connection refused");
        assert!(CheckFailure::Registry { source: down }
            .to_string()
            .contains("check schema_registry_url"));
    }
}
