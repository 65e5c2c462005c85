//! topicberg's Kafka source.
//!
//! - [`connection`]: how to reach and authenticate to the brokers, turned into
//!   librdkafka settings in one place.
//! - [`ping`]: a real metadata request with a deadline, whose error says what
//!   went wrong (unreachable, authentication) in words a user can act on.
//!
//! Partition discovery, watermarks, offsets and the bounded drain build on
//! these.

pub mod connection;
mod error;
pub mod ping;

pub use connection::{KafkaConnection, SaslMechanism, SecurityProtocol};
pub use error::{KafkaError, KafkaErrorKind};
pub use ping::{ping, BrokerMetadata};
