//! topicberg's Kafka source.
//!
//! - [`connection`]: how to reach and authenticate to the brokers, turned into
//!   librdkafka settings in one place.
//! - [`ping`]: a real metadata request with a deadline, whose error says what
//!   went wrong (unreachable, authentication) in words a user can act on.
//!
//! - [`registry`]: the schema registry (Confluent-compatible) the source's
//!   Avro and Protobuf messages are framed against: subjects, latest
//!   versions, schemas by id (cached, references resolved), core's
//!   `SchemaSource` for the decoder.
//!
//! Partition discovery, watermarks, offsets and the bounded drain build on
//! these.

mod batch;
pub mod connection;
mod consume;
pub mod drain;
mod error;
mod failure;
mod fetch;
mod group_context;
mod group_members;
pub mod member;
pub mod offsets;
mod partition_range;
pub mod ping;
mod reach;
pub mod registry;
mod retention;
pub mod spill;
mod tls_errors;
mod tls_probe;
pub mod topics;

pub use connection::{
    clients_closing, ClientCertificate, KafkaConnection, OAuthClient, SaslMechanism,
    SecurityProtocol,
};
pub use drain::{drain, drain_checked};
pub use error::{KafkaError, KafkaErrorKind};
pub use fetch::{fill_spill, FetchBuffers};
pub use group_members::{describe_group, GroupMemberView, GroupMembers};
pub use member::{GroupMember, GroupProtocol, Lease};
pub use offsets::{read_partition_states, GroupClient, PartitionState, TopicPartition};
pub use partition_range::{DrainError, DrainSettings, DrainedPartition, PartitionRange};
pub use ping::{ping, BrokerMetadata};
pub use registry::{RegistryClient, RetryPolicy, SubjectVersion};
pub use retention::topic_retention;
pub use spill::{Spill, SpilledTopic};
pub use topics::{select_topics, SelectedTopic, TopicSelection};
