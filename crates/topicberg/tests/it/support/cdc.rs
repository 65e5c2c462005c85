//! Change data capture for the tests: the test bed's PostgreSQL (component
//! `postgres`, database `topicberg`, logical decoding on) and Debezium's
//! PostgreSQL connector on its Kafka Connect worker (component `connect`),
//! registered and deleted through Connect's REST API.
//!
//! A [`Connector`] watches some tables of `public`; Debezium writes each
//! table's changes to the topic `<topic prefix>.public.<table>` (created by
//! Connect with the connector's partition count: the broker does not create
//! topics on demand) as JSON, one message per row change keyed by the primary
//! key, and a tombstone (null value) after each delete.

use std::process::{Command, Output};
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Headers as _;
use rdkafka::{Message, Offset, TopicPartitionList};
use serde_json::{json, Value};

use crate::support::plaintext;
use crate::testbed::{get, unique_name};

/// How long a connector may take to start (task RUNNING, its slot streaming).
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// How long dropping a connector may wait for its replication slot to be released.
const DROP_TIMEOUT: Duration = Duration::from_secs(20);
/// Between two polls of a condition.
const POLL: Duration = Duration::from_millis(100);

fn run_psql(sql: &str) -> Output {
    Command::new(get("TESTBED_PSQL"))
        .args(["-h", "127.0.0.1", "-p", &get("TESTBED_POSTGRES_PORT")])
        .args(["-U", "postgres", "-d", "topicberg"])
        // -X: no ~/.psqlrc; -q: no command tags ("INSERT 0 1"), query results only.
        .args(["-X", "-q", "-v", "ON_ERROR_STOP=1", "-At", "-c", sql])
        .env("PGCONNECT_TIMEOUT", "10")
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", get("TESTBED_PSQL")))
}

/// Runs `sql` (one or more statements) in the test bed's database `topicberg`
/// as `postgres`; its output, unaligned, tuples only (`-At`: one line per row,
/// columns separated by `|`), without the final newline. Panics with psql's
/// stderr when a statement fails.
pub fn psql(sql: &str) -> String {
    let out = run_psql(sql);
    assert!(
        out.status.success(),
        "psql failed ({}) on: {sql}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .expect("psql output is UTF-8")
        .trim_end_matches('\n')
        .to_string()
}

/// The rows of a query, each a JSON object (column name to value, as
/// PostgreSQL's `json_agg` writes them).
pub fn query_json(sql: &str) -> Vec<Value> {
    let out = psql(&format!(
        "select coalesce(json_agg(t), '[]') from ({sql}) t"
    ));
    match serde_json::from_str(&out) {
        Ok(Value::Array(rows)) => rows,
        Ok(other) => panic!("json_agg of {sql} is not an array: {other}"),
        Err(e) => panic!("json_agg of {sql} is not JSON ({e}): {out}"),
    }
}

/// Blocking calls to the Connect worker's REST API.
struct ConnectApi {
    rt: tokio::runtime::Runtime,
    http: reqwest::Client,
    base: String,
}

impl ConnectApi {
    fn new() -> ConnectApi {
        ConnectApi {
            rt: tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap(),
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(30))
                .build()
                .unwrap(),
            base: get("TESTBED_CONNECT_URL"),
        }
    }

    /// `METHOD path` with an optional JSON body: the status and the body.
    fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
    ) -> reqwest::Result<(u16, String)> {
        let mut req = self.http.request(method, format!("{}{path}", self.base));
        if let Some(body) = body {
            req = req.json(body);
        }
        self.rt.block_on(async {
            let resp = req.send().await?;
            let status = resp.status().as_u16();
            Ok((status, resp.text().await?))
        })
    }
}

/// A Debezium PostgreSQL connector registered on the test bed's Connect
/// worker; deleted, with its replication slot and publication, when dropped.
pub struct Connector {
    /// The connector's name on the worker.
    pub name: String,
    /// Its logical replication slot (pgoutput).
    pub slot: String,
    /// The first part of its topics' names.
    pub topic_prefix: String,
    /// Its publication (created by Debezium for the tables watched).
    pub publication: String,
    api: ConnectApi,
}

impl Connector {
    /// Registers a connector for `tables` (of schema `public`; they must exist)
    /// whose topics get `partitions` partitions, with JSON keys and values that
    /// carry their Connect schema (`{"schema": ..., "payload": ...}`) when
    /// `schemas`, else the payload only. Rows already there come first, as
    /// snapshot reads (`op` `r`). Returns once the connector and its task are
    /// RUNNING and its replication slot streams, so that every change made
    /// afterwards reaches the topics; panics if that takes over a minute or
    /// the connector fails.
    pub fn start(tables: &[&str], partitions: i32, schemas: bool) -> Connector {
        Self::start_with(tables, partitions, schemas, &[])
    }

    /// [`Connector::start`] with more connector settings (`extra`), e.g.
    /// a transform.
    pub fn start_with(
        tables: &[&str],
        partitions: i32,
        schemas: bool,
        extra: &[(&str, &str)],
    ) -> Connector {
        assert!(!tables.is_empty(), "a connector needs tables");
        // Lowercase letters, digits and `_`: valid as a slot, publication and topic name.
        let base = unique_name("cdc");
        let connector = Connector {
            name: base.clone(),
            slot: base.clone(),
            topic_prefix: base.clone(),
            publication: format!("{base}_pub"),
            api: ConnectApi::new(),
        };
        let include: Vec<String> = tables.iter().map(|t| format!("public.{t}")).collect();
        let schemas = schemas.to_string();
        let request = json!({
            "name": connector.name,
            "config": {
                "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
                "tasks.max": "1",
                "plugin.name": "pgoutput",
                "database.hostname": "127.0.0.1",
                "database.port": get("TESTBED_POSTGRES_PORT"),
                "database.user": "postgres",
                "database.dbname": "topicberg",
                "topic.prefix": connector.topic_prefix,
                "table.include.list": include.join(","),
                "slot.name": connector.slot,
                "publication.name": connector.publication,
                "publication.autocreate.mode": "filtered",
                "topic.creation.default.replication.factor": "1",
                "topic.creation.default.partitions": partitions.to_string(),
                "key.converter": "org.apache.kafka.connect.json.JsonConverter",
                "value.converter": "org.apache.kafka.connect.json.JsonConverter",
                "key.converter.schemas.enable": schemas,
                "value.converter.schemas.enable": schemas,
                // Truncates too (Debezium skips them by default).
                "skipped.operations": "none",
            }
        });
        let mut request = request;
        for (k, v) in extra {
            request["config"][*k] = json!(v);
        }
        let (status, body) = connector
            .api
            .send(reqwest::Method::POST, "/connectors", Some(&request))
            .unwrap_or_else(|e| {
                panic!(
                    "registering connector {} at {} (scripts/testbed up connect?): {e}",
                    connector.name,
                    get("TESTBED_CONNECT_URL")
                )
            });
        assert_eq!(
            status, 201,
            "registering connector {}: {body}",
            connector.name
        );
        connector.wait_running();
        connector
    }

    /// Polls the status endpoint until the connector and all its tasks (one
    /// at least) are RUNNING, then the slot until it is active (the task
    /// reports RUNNING before its snapshot ends and streaming begins).
    fn wait_running(&self) {
        let deadline = Instant::now() + START_TIMEOUT;
        let path = format!("/connectors/{}/status", self.name);
        let mut last = String::from("no answer yet");
        loop {
            if let Ok((200, body)) = self.api.send(reqwest::Method::GET, &path, None) {
                let status: Value = serde_json::from_str(&body)
                    .unwrap_or_else(|e| panic!("{path}: not JSON ({e}): {body}"));
                let states: Vec<&str> = std::iter::once(&status["connector"])
                    .chain(status["tasks"].as_array().into_iter().flatten())
                    .map(|s| s["state"].as_str().unwrap_or(""))
                    .collect();
                assert!(
                    !states.contains(&"FAILED"),
                    "connector {} failed: {status:#}",
                    self.name
                );
                if states.len() > 1 && states.iter().all(|s| *s == "RUNNING") {
                    break;
                }
                last = body;
            }
            assert!(
                Instant::now() < deadline,
                "connector {} not RUNNING after {START_TIMEOUT:?}; last status: {last}",
                self.name
            );
            std::thread::sleep(POLL);
        }
        let active = format!(
            "select active from pg_replication_slots where slot_name = '{}'",
            self.slot
        );
        while psql(&active) != "t" {
            assert!(
                Instant::now() < deadline,
                "slot {} of connector {} not streaming after {START_TIMEOUT:?} (active: {:?})",
                self.slot,
                self.name,
                psql(&active)
            );
            std::thread::sleep(POLL);
        }
    }

    /// The topic of `table`'s changes.
    pub fn topic(&self, table: &str) -> String {
        format!("{}.public.{table}", self.topic_prefix)
    }

    /// The topic every table's changes go to when the connector routes
    /// them into one ([`Connector::ONE_TOPIC`]).
    pub fn one_topic(&self) -> String {
        format!("{}.all", self.topic_prefix)
    }

    /// Connector settings that route every table's changes into one topic
    /// (Debezium's `ByLogicalTableRouter`; it adds the table to the key).
    pub const ONE_TOPIC: [(&'static str, &'static str); 4] = [
        ("transforms", "one"),
        (
            "transforms.one.type",
            "io.debezium.transforms.ByLogicalTableRouter",
        ),
        ("transforms.one.topic.regex", "(.*)[.]public[.].*"),
        ("transforms.one.topic.replacement", "$1.all"),
    ];

    /// Deletes the connector (synchronous: its task has stopped when the
    /// worker answers), then drops its slot once PostgreSQL sees it released,
    /// and its publication. Best effort: never panics; reports what it could
    /// not clean up on stderr.
    fn delete(&self) {
        let path = format!("/connectors/{}", self.name);
        match self.api.send(reqwest::Method::DELETE, &path, None) {
            Ok((204 | 404, _)) => {}
            Ok((status, body)) => eprintln!("DELETE {path}: {status} {body}"),
            Err(e) => eprintln!("DELETE {path}: {e}"),
        }
        let deadline = Instant::now() + DROP_TIMEOUT;
        let drop_slot = format!(
            "select pg_drop_replication_slot(slot_name) from pg_replication_slots \
             where slot_name = '{0}' and not active; \
             select count(*) from pg_replication_slots where slot_name = '{0}'",
            self.slot
        );
        loop {
            let out = run_psql(&drop_slot);
            let text = String::from_utf8_lossy(&out.stdout);
            if out.status.success() && text.lines().last() == Some("0") {
                break;
            }
            if Instant::now() >= deadline {
                eprintln!(
                    "replication slot {} not dropped after {DROP_TIMEOUT:?}: {}{}",
                    self.slot,
                    text,
                    String::from_utf8_lossy(&out.stderr)
                );
                break;
            }
            std::thread::sleep(POLL);
        }
        let out = run_psql(&format!("drop publication if exists {}", self.publication));
        if !out.status.success() {
            eprintln!(
                "dropping publication {}: {}",
                self.publication,
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
}

impl Drop for Connector {
    fn drop(&mut self) {
        self.delete();
    }
}

/// One message of a connector's topic.
#[derive(Debug, Clone)]
pub struct Change {
    /// The partition it was read from.
    pub partition: i32,
    /// The key, parsed.
    pub key: Value,
    /// The value, parsed; `None` for a tombstone.
    pub value: Option<Value>,
    /// The last `__op` header's value (`ExtractNewRecordState` with
    /// `add.headers=op`), as text.
    pub op_header: Option<String>,
}

/// The payload of a JsonConverter message: `payload` of `{"schema", "payload"}`
/// (schemas enabled), else the message itself.
fn payload(message: &Value) -> &Value {
    match message {
        Value::Object(fields)
            if fields.len() == 2
                && fields.contains_key("schema")
                && fields.contains_key("payload") =>
        {
            &message["payload"]
        }
        _ => message,
    }
}

impl Change {
    /// The key's payload (`{"id": 1}`).
    pub fn key(&self) -> &Value {
        payload(&self.key)
    }

    /// The change event (`before`, `after`, `source`, `op`, ...); `None` for a tombstone.
    pub fn event(&self) -> Option<&Value> {
        self.value.as_ref().map(payload)
    }

    /// The event's `op` (`r` snapshot read, `c`, `u`, `d`); `None` for a tombstone.
    pub fn op(&self) -> Option<&str> {
        self.event().and_then(|e| e["op"].as_str())
    }
}

/// The number of partitions of `topic`, once it exists (Connect creates a
/// connector's topic with its first message); panics after `deadline`.
pub fn topic_partitions(topic: &str, deadline: Duration) -> i32 {
    let consumer: BaseConsumer = plaintext().client_config().create().expect("consumer");
    let until = Instant::now() + deadline;
    loop {
        if let Ok(metadata) = consumer.fetch_metadata(Some(topic), Duration::from_secs(5)) {
            if let Some(t) = metadata.topics().iter().find(|t| t.name() == topic) {
                if t.error().is_none() && !t.partitions().is_empty() {
                    return t.partitions().len() as i32;
                }
            }
        }
        assert!(
            Instant::now() < until,
            "topic {topic} does not exist after {deadline:?}"
        );
        std::thread::sleep(POLL);
    }
}

/// Reads `topic` from the start of every partition until `enough` holds for
/// what was read (in the order read: per partition, in offset order);
/// panics after `deadline` with what was read.
pub fn read_changes(
    topic: &str,
    deadline: Duration,
    mut enough: impl FnMut(&[Change]) -> bool,
) -> Vec<Change> {
    let started = Instant::now();
    let partitions = topic_partitions(topic, deadline);
    let consumer: BaseConsumer = plaintext()
        .client_config()
        .set("group.id", unique_name("cdc-read"))
        .set("enable.auto.commit", "false")
        .create()
        .expect("consumer");
    let mut assignment = TopicPartitionList::new();
    for partition in 0..partitions {
        assignment
            .add_partition_offset(topic, partition, Offset::Beginning)
            .unwrap();
    }
    consumer.assign(&assignment).unwrap();
    let parse = |bytes: &[u8]| -> Value {
        serde_json::from_slice(bytes).unwrap_or_else(|e| {
            panic!(
                "{topic}: not JSON ({e}): {}",
                String::from_utf8_lossy(bytes)
            )
        })
    };
    let mut changes = Vec::new();
    while !enough(&changes) {
        assert!(
            started.elapsed() < deadline,
            "{topic}: not enough changes after {deadline:?}; read: {changes:#?}"
        );
        if let Some(message) = consumer.poll(Duration::from_millis(200)) {
            let message = message.unwrap_or_else(|e| panic!("reading {topic}: {e}"));
            changes.push(Change {
                partition: message.partition(),
                key: message.key().map(parse).unwrap_or(Value::Null),
                value: message.payload().map(parse),
                op_header: message.headers().and_then(|headers| {
                    headers
                        .iter()
                        .filter(|h| h.key == "__op")
                        .last()
                        .and_then(|h| h.value)
                        .map(|v| String::from_utf8_lossy(v).into_owned())
                }),
            });
        }
    }
    changes
}

/// A `[[streams]]` block syncing the change stream `topic` into `table`.
pub fn change_stream(topic: &str, table: &str) -> String {
    format!(
        "[[streams]]\ntopic = \"{topic}\"\nmode = \"upsert\"\nchange_events = \"debezium\"\ntable = \"{table}\"\n"
    )
}

/// A job syncing the change stream `topic` into `table` on the reference
/// catalog, with `extra` settings of its stream.
pub fn change_job(topic: &str, table: &str, extra: &str) -> crate::support::Job {
    change_job_with(topic, table, "", extra)
}

/// [`change_job`] with `source` settings (e.g. the schema registry).
pub fn change_job_with(topic: &str, table: &str, source: &str, extra: &str) -> crate::support::Job {
    let streams = format!("{}{extra}", change_stream(topic, table));
    crate::support::Job::new(crate::support::Catalog::Seaweed, &[topic], source, &streams)
}

/// The Iceberg table's payload columns (metadata columns start with `_`)
/// as `engine` reads them, ordered by id; `None` while it cannot read the
/// table (not created yet).
pub fn copy_rows(engine: &str, job: &crate::support::Job, table: &str) -> Option<Vec<Value>> {
    let name = format!("{}_topics.{table}", job.name);
    let out = crate::support::try_read(engine, crate::support::Catalog::Seaweed, &name);
    if !out.status.success() {
        return None;
    }
    let mut rows: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let mut row: Value = serde_json::from_str(l).expect("reader line is JSON");
            row.as_object_mut()
                .unwrap()
                .retain(|k, _| !k.starts_with('_'));
            row
        })
        .collect();
    rows.sort_by_key(|r| r["id"].as_i64());
    Some(rows)
}
