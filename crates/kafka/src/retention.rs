//! How long a topic keeps its messages (`retention.ms`): the replay window a
//! job must sync within, or lose messages.

use std::collections::BTreeMap;
use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions, ResourceSpecifier};
use rdkafka::client::DefaultClientContext;

use crate::{KafkaConnection, KafkaError, KafkaErrorKind};

/// Each topic's `retention.ms`: `Some(ms)`, or `None` for infinite
/// retention (`-1`). Topics the broker could not describe are left out.
pub async fn topic_retention(
    connection: &KafkaConnection,
    topics: &[String],
    timeout: Duration,
) -> Result<BTreeMap<String, Option<i64>>, KafkaError> {
    let admin: AdminClient<DefaultClientContext> = connection
        .client_config()
        .create()
        .map_err(|e| KafkaError::new(KafkaErrorKind::Config, "creating an admin client", e))?;
    let specifiers: Vec<ResourceSpecifier<'_>> =
        topics.iter().map(|t| ResourceSpecifier::Topic(t)).collect();
    let options = AdminOptions::new().request_timeout(Some(timeout));
    let results = admin
        .describe_configs(specifiers.iter(), &options)
        .await
        .map_err(|e| {
            KafkaError::new(
                KafkaErrorKind::Broker,
                "describing topic configs (retention.ms)",
                e,
            )
        })?;
    let mut out = BTreeMap::new();
    for (topic, result) in topics.iter().zip(results) {
        let Ok(resource) = result else { continue };
        let value = resource
            .get("retention.ms")
            .and_then(|e| e.value.as_deref())
            .and_then(|v| v.parse::<i64>().ok());
        if let Some(ms) = value {
            out.insert(topic.clone(), (ms >= 0).then_some(ms));
        }
    }
    Ok(out)
}
