//! The broker answers on both listeners, with each mechanism, through
//! rdkafka: create a topic, produce, consume, compare.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::Message;
use topicberg_kafka::{ping, KafkaConnection, KafkaErrorKind, SaslMechanism};

use crate::testbed::{get, unique_name};

const PARTITIONS: i32 = 3;
const MESSAGES: usize = 60;

fn plaintext() -> KafkaConnection {
    KafkaConnection::plaintext(get("TESTBED_KAFKA_BOOTSTRAP"))
}

fn sasl(mechanism: SaslMechanism) -> KafkaConnection {
    let (user, password) = match mechanism {
        SaslMechanism::Plain => (
            get("TESTBED_KAFKA_PLAIN_USER"),
            get("TESTBED_KAFKA_PLAIN_PASSWORD"),
        ),
        _ => (
            get("TESTBED_KAFKA_SCRAM_USER"),
            get("TESTBED_KAFKA_SCRAM_PASSWORD"),
        ),
    };
    KafkaConnection::sasl_plaintext(
        get("TESTBED_KAFKA_SASL_BOOTSTRAP"),
        mechanism,
        user,
        password,
    )
}

/// Fails fast, naming Kafka, when the broker is not there.
fn require_kafka(connection: &KafkaConnection) {
    if let Err(e) = ping(connection, Duration::from_secs(15)) {
        panic!(
            "Kafka test bed broker at {} is not available ({e}); run scripts/testbed up",
            connection.bootstrap_servers
        );
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn create_topic(connection: &KafkaConnection, topic: &str) {
    let admin: AdminClient<DefaultClientContext> =
        connection.client_config().create().expect("admin client");
    let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(20)));
    let results = runtime()
        .block_on(admin.create_topics(
            &[NewTopic::new(topic, PARTITIONS, TopicReplication::Fixed(1))],
            &options,
        ))
        .expect("create_topics request");
    for result in results {
        result.unwrap_or_else(|(t, e)| panic!("creating topic {t}: {e}"));
    }
}

fn delete_topic(connection: &KafkaConnection, topic: &str) {
    let admin: AdminClient<DefaultClientContext> =
        connection.client_config().create().expect("admin client");
    let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(20)));
    let _ = runtime().block_on(admin.delete_topics(&[topic], &options));
}

/// Creates a topic, produces keyed messages across its partitions, reads
/// them back with a fresh consumer group, and checks nothing was lost,
/// changed or duplicated.
fn round_trip(connection: &KafkaConnection) {
    require_kafka(connection);
    let topic = unique_name("it_smoke");
    create_topic(connection, &topic);

    let producer: BaseProducer = connection.client_config().create().expect("producer");
    let mut sent = BTreeSet::new();
    for i in 0..MESSAGES {
        let key = format!("k{i}");
        let value = format!(
            "{{\"id\":{i},\"listener\":\"{}\"}}",
            connection.bootstrap_servers
        );
        let partition = (i as i32) % PARTITIONS;
        producer
            .send(
                BaseRecord::to(&topic)
                    .key(&key)
                    .payload(&value)
                    .partition(partition),
            )
            .unwrap_or_else(|(e, _)| panic!("enqueueing message {i} to {topic}: {e}"));
        sent.insert((partition, key, value));
    }
    producer
        .flush(Duration::from_secs(30))
        .expect("every message acknowledged by the broker");

    let consumer: BaseConsumer = connection
        .client_config()
        .set("group.id", unique_name("it_group"))
        .set("auto.offset.reset", "earliest")
        .set("enable.auto.commit", "false")
        .create()
        .expect("consumer");
    consumer.subscribe(&[&topic]).expect("subscribe");
    let mut received = BTreeSet::new();
    let mut count = 0;
    let deadline = Instant::now() + Duration::from_secs(60);
    while count < MESSAGES && Instant::now() < deadline {
        if let Some(result) = consumer.poll(Duration::from_millis(500)) {
            let m = result.unwrap_or_else(|e| panic!("consuming {topic}: {e}"));
            let key = String::from_utf8(m.key().unwrap().to_vec()).unwrap();
            let value = String::from_utf8(m.payload().unwrap().to_vec()).unwrap();
            received.insert((m.partition(), key, value));
            count += 1;
        }
    }
    drop(consumer);
    delete_topic(connection, &topic);
    assert_eq!(
        count, MESSAGES,
        "messages consumed from {topic} (duplicates or missing)"
    );
    assert_eq!(
        received, sent,
        "what was consumed from {topic} differs from what was produced"
    );
}

#[test]
fn kafka_round_trip_on_plaintext_listener() {
    round_trip(&plaintext());
}

#[test]
fn kafka_round_trip_with_scram_sha_512_on_sasl_listener() {
    round_trip(&sasl(SaslMechanism::ScramSha512));
}

#[test]
fn kafka_round_trip_with_plain_on_sasl_listener() {
    round_trip(&sasl(SaslMechanism::Plain));
}

#[test]
fn kafka_wrong_scram_password_is_an_authentication_error() {
    require_kafka(&plaintext());
    let mut connection = sasl(SaslMechanism::ScramSha512);
    connection.sasl.as_mut().unwrap().password = "not-the-password".into();
    let err = ping(&connection, Duration::from_secs(15))
        .expect_err("a wrong password must not authenticate");
    assert_eq!(err.kind, KafkaErrorKind::Authentication, "{err}");
    assert!(
        !err.to_string().contains("not-the-password"),
        "the password leaked into: {err}"
    );
}
