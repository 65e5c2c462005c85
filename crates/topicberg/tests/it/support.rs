//! Shared pieces of the end-to-end tests: topics with messages, job files,
//! running the real `topicberg` binary, reading tables with the readers.

use std::path::PathBuf;
use std::process::Output;
use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use serde_json::Value;
use topicberg_kafka::KafkaConnection;

use crate::testbed::{command, get, repo_root, unique_name};

/// The PLAINTEXT listener.
pub fn plaintext() -> KafkaConnection {
    KafkaConnection::plaintext(get("TESTBED_KAFKA_BOOTSTRAP"))
}

/// Creates a topic with `partitions` partitions.
pub fn create_topic(topic: &str, partitions: i32) {
    let admin: AdminClient<DefaultClientContext> =
        plaintext().client_config().create().expect("admin client");
    let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(20)));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let results = rt
        .block_on(admin.create_topics(
            &[NewTopic::new(topic, partitions, TopicReplication::Fixed(1))],
            &options,
        ))
        .expect("create_topics request");
    for r in results {
        r.unwrap_or_else(|(t, e)| panic!("creating topic {t}: {e}"));
    }
}

/// Produces `(key, value)` messages (default partitioner: by key) and waits
/// until the broker acknowledged every one.
pub fn produce(topic: &str, messages: &[(String, String)]) {
    let producer: BaseProducer = plaintext().client_config().create().expect("producer");
    for (key, value) in messages {
        loop {
            match producer.send(BaseRecord::to(topic).key(key).payload(value)) {
                Ok(()) => break,
                Err((e, _)) if e.to_string().contains("QueueFull") => {
                    producer.poll(Duration::from_millis(50));
                }
                Err((e, _)) => panic!("producing to {topic}: {e}"),
            }
        }
    }
    producer
        .flush(Duration::from_secs(60))
        .expect("every message acknowledged");
}

/// The seeds' sample messages (`scripts/demo.d/sample_messages.py`).
pub fn sample_messages(topic_shape: &str, batch: &str) -> Vec<(String, String)> {
    let script = repo_root().join("scripts/demo.d/sample_messages.py");
    let out = command("python3")
        .arg(&script)
        .args([topic_shape, batch])
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let (k, v) = l.split_once('\t').expect("key<TAB>value");
            (k.to_string(), v.to_string())
        })
        .collect()
}

/// Which test-bed catalog a job writes to.
#[derive(Clone, Copy, Debug)]
pub enum Catalog {
    /// SeaweedFS's REST catalog.
    Seaweed,
    /// Apache Iceberg's reference REST catalog.
    Fixture,
}

impl Catalog {
    /// The readers' `--catalog` value.
    pub fn reader_name(self) -> &'static str {
        match self {
            Catalog::Seaweed => "seaweed",
            Catalog::Fixture => "fixture",
        }
    }

    fn prefix(self) -> &'static str {
        match self {
            Catalog::Seaweed => "SEAWEED",
            Catalog::Fixture => "FIXTURE",
        }
    }
}

/// A job file in a fresh folder.
pub struct Job {
    /// The job name (namespace `<name>_topics`).
    pub name: String,
    /// The job file.
    pub path: PathBuf,
}

impl Job {
    /// A job reading exactly `topics` into `catalog`, with `source_extra`
    /// lines appended to `[source]` and `extra` to the end of the file.
    pub fn new(catalog: Catalog, topics: &[&str], source_extra: &str, extra: &str) -> Job {
        let name = unique_name("it_job");
        let dir = std::env::temp_dir().join(&name);
        std::fs::create_dir_all(&dir).unwrap();
        let pattern = format!(
            "^({})$",
            topics
                .iter()
                .map(|t| regex_escape(t))
                .collect::<Vec<_>>()
                .join("|")
        );
        let p = catalog.prefix();
        let text = format!(
            r#"name = "{name}"
[source]
bootstrap_servers = "{bootstrap}"
topic_pattern = "{pattern}"
max_threads = 3
{source_extra}
[destination]
catalog = "rest"
uri = "{uri}"
warehouse = "{warehouse}"
credential = "{credential}"
s3_endpoint = "{s3}"
s3_region = "us-east-1"
s3_access_key = "{s3_key}"
s3_secret_key = "${{TESTBED_S3_SECRET_KEY}}"
{extra}
"#,
            bootstrap = get("TESTBED_KAFKA_BOOTSTRAP"),
            uri = get(&format!("TESTBED_{p}_URI")),
            warehouse = get(&format!("TESTBED_{p}_WAREHOUSE")),
            credential = get(&format!("TESTBED_{p}_CREDENTIAL")),
            s3 = get("TESTBED_S3_ENDPOINT"),
            s3_key = get("TESTBED_S3_ACCESS_KEY"),
        );
        let path = dir.join("job.toml");
        std::fs::write(&path, text).unwrap();
        Job { name, path }
    }

    /// A job writing into the embedded catalog (a fresh local folder).
    pub fn embedded(topics: &[&str]) -> Job {
        let job = Job::new(Catalog::Seaweed, topics, "", "");
        let text = std::fs::read_to_string(&job.path).unwrap();
        let source = text.split("[destination]").next().unwrap().to_string();
        let warehouse = job.path.with_file_name("warehouse");
        std::fs::write(
            &job.path,
            format!(
                "{source}[destination]\ncatalog = \"sql\"\npath = \"{}\"\n",
                warehouse.display()
            ),
        )
        .unwrap();
        job
    }

    /// Reads a table of an embedded-catalog job with an independent reader.
    pub fn read_embedded(&self, engine: &str, table: &str) -> String {
        let read = format!("{}/read", get("TESTBED_READERS"));
        let warehouse = self.path.with_file_name("warehouse");
        let out = command(&read)
            .args([
                engine,
                "--catalog",
                "sql",
                "--sql-path",
                warehouse.to_str().unwrap(),
                table,
            ])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{engine} could not read {table}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// `<namespace>.<table>` for a topic.
    pub fn table(&self, topic: &str) -> String {
        format!("{}_topics.{}", self.name, topic.to_lowercase())
    }

    /// Runs `topicberg <command> -c <job> [args]` with `env` set.
    pub fn run(&self, subcommand: &str, args: &[&str], env: &[(&str, &str)]) -> Output {
        let mut cmd = command(env!("CARGO_BIN_EXE_topicberg"));
        cmd.arg(subcommand).arg("-c").arg(&self.path).args(args);
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.output().expect("running topicberg")
    }

    /// Runs a sync that must succeed; returns its JSON report.
    pub fn sync(&self) -> Value {
        let report = self
            .path
            .with_file_name(format!("report-{}.json", uuid::Uuid::new_v4().simple()));
        let out = self.run("sync", &["--report-json", report.to_str().unwrap()], &[]);
        assert!(
            out.status.success(),
            "sync failed ({}):\nstdout:\n{}\nstderr:\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&std::fs::read(&report).expect("report written"))
            .expect("report JSON")
    }
}

/// A table's entry in a sync report.
pub fn table_report<'a>(report: &'a Value, table: &str) -> &'a Value {
    report["tables"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["table"] == table)
        .unwrap_or_else(|| panic!("{table} missing from report {report}"))
}

/// Reads a table with an independent reader: raw canonical lines.
pub fn read_lines(engine: &str, catalog: Catalog, table: &str) -> String {
    let read = format!("{}/read", get("TESTBED_READERS"));
    let out = command(&read)
        .args([engine, "--catalog", catalog.reader_name(), table])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{engine} could not read {table}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Reads a table with an independent reader: parsed rows.
pub fn read_rows(engine: &str, catalog: Catalog, table: &str) -> Vec<Value> {
    read_lines(engine, catalog, table)
        .lines()
        .map(|l| serde_json::from_str(l).expect("reader line is JSON"))
        .collect()
}

fn regex_escape(text: &str) -> String {
    text.chars()
        .flat_map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                vec![c]
            } else {
                vec!['\\', c]
            }
        })
        .collect()
}
