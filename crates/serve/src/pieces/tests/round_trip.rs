//! An export imported again gives the same job, over every field of the
//! job file's schema: jobs that together set every field (some exclude
//! others: one SASL mechanism, one catalog), each exported as the service
//! exports it (secrets as `${VAR}`, the `[serve]` table) and split as an
//! import splits it.

use std::collections::BTreeSet;

use serde_json::{json, Value};
use topicberg_core::config::{JobMode, ServeSection};

use super::super::*;
use crate::ui::form_model::{forms, Form};

const CERT: &str = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
const KEY: &str = "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n";

/// A job as the service stores it.
struct Stored {
    name: &'static str,
    engines: Vec<String>,
    namespace: Option<&'static str>,
    source: Piece,
    destination: Piece,
    sync: Piece,
    streams: Vec<Piece>,
    maintain: Piece,
    serve: ServeSection,
}

fn piece(v: Value) -> Piece {
    serde_json::from_value(v).unwrap()
}

fn scram_rest_job() -> Stored {
    Stored {
        name: "round_a",
        engines: vec!["spark".into(), "databricks".into()],
        namespace: Some("lake_a"),
        source: piece(json!({
            "bootstrap_servers": "k1:9093,k2:9093", "consumer_group": "group-a",
            "topic_pattern": "^(orders|customers)$", "missing_topics": "wait",
            "security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512",
            "sasl_username": "user-a", "sasl_password": "pw-a",
            "ssl_ca_pem": CERT, "ssl_certificate_pem": CERT, "ssl_key_pem": KEY,
            "ssl_verify_hostname": false, "max_threads": 3, "fetch": "librdkafka",
            "connect_timeout": "5s",
            "schema_registry_url": "https://registry.example:8081",
            "schema_registry_username": "reg-user", "schema_registry_password": "reg-pw",
            "schema_registry_ca_pem": CERT,
        })),
        destination: piece(json!({
            "catalog": "rest", "uri": "https://catalog.example/api", "warehouse": "wh-a",
            "credential": "client:secret", "oauth2_server_uri": "https://idp.example/token",
            "scope": "PRINCIPAL_ROLE:ALL", "s3_endpoint": "https://s3.example",
            "s3_region": "eu-west-1", "s3_access_key": "AKIA", "s3_secret_key": "s3-secret",
            "s3_path_style": true, "ca_pem": CERT, "format_version": 3,
        })),
        sync: piece(json!({
            "target_file_size_mb": 64, "batch_rows": 4096, "zstd_level": 5,
            "max_columns": 500, "commit_interval": "30s", "stop_timeout": "20s",
            "commit_records": 100000, "commit_mb": 64, "spill_mb": 256,
            "state_dir": "/var/lib/topicberg/state/a",
        })),
        streams: vec![
            piece(json!({
                "topic": "orders", "mode": "upsert", "dedup_keys": ["id"],
                "order_by": "version", "delete_format": "dv",
                "on_invalid": "dlq", "columns": ["id", "version", "total"],
                "table": "orders_v", "allow_data_loss": true, "value_format": "json",
                "key_format": "json", "partition_by": ["bucket(8, id)"],
                "sort_by": ["id desc"], "kafka_headers": true,
            })),
            piece(json!({
                "topic": "customers", "mode": "upsert", "change_events": "debezium",
                "on_truncate": "fail", "soft_deletes": true,
            })),
        ],
        maintain: piece(json!({
            "target_file_size_mb": 256, "min_input_files": 3, "min_deleted_percent": 10,
            "keep_snapshots": 4, "max_snapshot_age": "3d", "orphan_min_age": "2d",
            "max_manifests": 50, "follow_every": "15m", "follow_max_snapshot_age": "6h",
            "follow_rewrite_mb": 512,
        })),
        serve: ServeSection {
            schedule: Some("every 5 minutes".into()),
            maintain_schedule: Some("daily at 04:00".into()),
            mode: JobMode::Scheduled,
            topic_pattern: None,
        },
    }
}

fn oauth_token_job() -> Stored {
    Stored {
        name: "round_b",
        engines: Vec::new(),
        namespace: None,
        source: piece(json!({
            "bootstrap_servers": "k:9093", "topic_pattern": "^events$",
            "security_protocol": "SASL_SSL", "sasl_mechanism": "OAUTHBEARER",
            "oauth_token_endpoint": "https://idp.example/token", "oauth_client_id": "cid",
            "oauth_client_secret": "csecret", "oauth_scope": "kafka",
        })),
        destination: piece(json!({
            "catalog": "rest", "uri": "https://catalog.example/api", "warehouse": "wh-b",
            "token": "bearer-b", "azure_account": "acct", "azure_access_key": "az-key",
            "azure_endpoint": "https://acct.blob.example",
        })),
        sync: Piece::new(),
        streams: vec![piece(json!({"topic": "events"}))],
        maintain: Piece::new(),
        serve: ServeSection {
            schedule: None,
            maintain_schedule: None,
            mode: JobMode::Continuous,
            topic_pattern: None,
        },
    }
}

fn sql_job() -> Stored {
    Stored {
        name: "round_c",
        engines: Vec::new(),
        namespace: None,
        source: piece(json!({"bootstrap_servers": "k:9092", "topic_pattern": "^c$"})),
        destination: piece(json!({
            "catalog": "sql", "path": "wh", "warehouse": "gs://bucket/wh",
            "gcs_service_account_path": "/keys/sa.json",
        })),
        sync: Piece::new(),
        streams: Vec::new(),
        maintain: Piece::new(),
        serve: ServeSection::default(),
    }
}

/// The job file the service exports for `job`.
fn export(job: &Stored) -> String {
    let serve = export_serve(
        job.serve.schedule.as_deref().unwrap_or_default(),
        job.serve.maintain_schedule.as_deref().unwrap_or_default(),
        job.serve.mode,
        &job.source,
        !job.streams.is_empty(),
    );
    let pieces = JobPieces {
        name: job.name,
        target_engines: &job.engines,
        namespace: job.namespace,
        source: &job.source,
        destination: &job.destination,
        sync: &job.sync,
        streams: &job.streams,
        maintain: &job.maintain,
    };
    let file = assemble_job_toml(&pieces, Secrets::Placeholders).unwrap();
    format!("{file}{}", serve_toml(&serve).unwrap())
}

/// `piece` without its secrets, as an import leaves it.
fn without_secrets(kind: PieceKind, piece: &Piece) -> Piece {
    let mut piece = piece.clone();
    for field in kind.secrets() {
        piece.remove(*field);
    }
    piece
}

fn keys(form: &Form) -> BTreeSet<String> {
    let grouped = form.groups.iter().flat_map(|g| g.fields.iter());
    let placed = form.placed.values().flatten();
    grouped.chain(placed).map(|f| f.key.clone()).collect()
}

#[test]
fn an_export_imported_again_is_the_same_job_over_every_field() {
    let jobs = [scram_rest_job(), oauth_token_job(), sql_job()];
    for job in &jobs {
        let file = export(job);
        let split = split_job_toml(&file).unwrap_or_else(|e| panic!("{}: {e:?}\n{file}", job.name));
        assert_eq!(split.name, job.name);
        assert_eq!(split.target_engines, job.engines, "{file}");
        assert_eq!(split.namespace.as_deref(), job.namespace, "{file}");
        assert_eq!(
            split.source,
            without_secrets(PieceKind::Source, &job.source),
            "{file}"
        );
        assert_eq!(
            split.destination,
            without_secrets(PieceKind::Destination, &job.destination),
            "{file}"
        );
        assert_eq!(split.sync, job.sync, "{file}");
        assert_eq!(split.streams, job.streams, "{file}");
        assert_eq!(split.maintain, job.maintain, "{file}");
        assert_eq!(split.serve, job.serve, "{file}");
        let secrets_set: Vec<String> = [
            (PieceKind::Source, &job.source),
            (PieceKind::Destination, &job.destination),
        ]
        .iter()
        .flat_map(|(kind, piece)| {
            kind.secrets()
                .iter()
                .filter(|f| piece.contains_key(**f))
                .map(move |f| format!("{}.{f}", kind.table()))
        })
        .collect();
        assert_eq!(
            split.unset_secrets, secrets_set,
            "only the secrets set are named"
        );
    }
    // Together the jobs set every field of every form.
    let forms = forms();
    let set = |pick: &dyn Fn(&Stored) -> Vec<&Piece>| -> BTreeSet<String> {
        jobs.iter()
            .flat_map(pick)
            .flat_map(|p| p.keys().cloned())
            .collect()
    };
    let tables: [(&str, &Form, BTreeSet<String>); 5] = [
        ("source", &forms.source, set(&|j| vec![&j.source])),
        (
            "destination",
            &forms.destination,
            set(&|j| vec![&j.destination]),
        ),
        (
            "streams",
            &forms.stream,
            set(&|j| j.streams.iter().collect()),
        ),
        ("sync", &forms.sync, set(&|j| vec![&j.sync])),
        ("maintain", &forms.maintain, set(&|j| vec![&j.maintain])),
    ];
    for (table, form, covered) in tables {
        let missing: Vec<String> = keys(form)
            .into_iter()
            .filter(|k| !covered.contains(k))
            .filter(|k| !(table == "destination" && k == "namespace"))
            .collect();
        assert!(
            missing.is_empty(),
            "[{table}] fields no job sets: {missing:?}"
        );
    }
    // The job level: name, target_engines, the namespace, [serve].
    assert!(jobs
        .iter()
        .any(|j| !j.engines.is_empty() && j.namespace.is_some()));
    let serve = &jobs[0].serve;
    assert!(serve.schedule.is_some() && serve.maintain_schedule.is_some());
    assert!(jobs.iter().any(|j| j.serve.mode == JobMode::Continuous));
}
