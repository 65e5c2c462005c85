//! Every answer against a `json!` body with the same keys, byte for byte.

use serde::Serialize;
use serde_json::{json, Value};
use topicberg_core::config::{DeleteFormat, FormatVersion, ResolvedUpsert, StreamSettings};
use topicberg_sync::check::{CheckFailure, CheckStep};
use topicberg_sync::discover::DiscoveredTopic;

use super::*;
use crate::store::{JobRow, PieceRow, RunRow};

/// `answer` written out is `expected` written out.
fn same<T: Serialize>(answer: &T, expected: Value) {
    assert_eq!(serde_json::to_string(answer).unwrap(), expected.to_string());
}

fn run(report: Option<Value>) -> RunRow {
    RunRow {
        id: 7,
        job_id: 3,
        kind: "sync".into(),
        trigger: "manual".into(),
        started_ms: 1_700_000_000_000,
        finished_ms: Some(1_700_000_002_500),
        status: "failed".into(),
        error: Some("boom".into()),
        report,
        lag: Some(12),
    }
}

fn report() -> Value {
    json!({"tables": [
        {"topic": "a", "table": "a", "status": "succeeded", "records": 5, "bytes": 50, "extra": 1,
         "dead_letter_records": 2, "skipped_records": 1, "expired_messages": 4,
         "schema_changes": ["added column x", "widened y"]},
        {"topic": "b", "table": "b", "status": "failed", "records": 2, "bytes": 20},
    ], "other": true})
}

/// A run in a list, as a `json!` body.
fn summary_json(run: &RunRow) -> Value {
    let tables: Vec<&Value> = run
        .report
        .as_ref()
        .and_then(|r| r["tables"].as_array())
        .map(|t| t.iter().collect())
        .unwrap_or_default();
    let sum = |key: &str| tables.iter().filter_map(|t| t[key].as_u64()).sum::<u64>();
    json!({
        "id": run.id,
        "job_id": run.job_id,
        "kind": run.kind,
        "lag": run.lag,
        "trigger": run.trigger,
        "status": run.status,
        "started_ms": run.started_ms,
        "started": iso(run.started_ms),
        "finished_ms": run.finished_ms,
        "finished": run.finished_ms.and_then(iso),
        "duration_ms": run.finished_ms.map(|f| f - run.started_ms),
        "error": run.error,
        "records": sum("records"),
        "bytes": sum("bytes"),
        "notes": {
            "dead_letter_records": sum("dead_letter_records"),
            "expired_messages": tables.iter().filter_map(|t| t["expired_messages"].as_i64()).sum::<i64>(),
            "schema_changes": tables.iter().filter_map(|t| t["schema_changes"].as_array()).map(Vec::len).sum::<usize>(),
            "skipped_records": sum("skipped_records"),
        },
        "tables": tables.iter().map(|t| json!({
            "topic": t["topic"], "table": t["table"], "status": t["status"],
            "records": t["records"], "bytes": t["bytes"],
        })).collect::<Vec<_>>(),
    })
}

/// A run's page, as a `json!` body.
fn detail_json(run: &RunRow) -> Value {
    let mut detail = summary_json(run);
    let mut tables: Vec<Value> = run
        .report
        .as_ref()
        .and_then(|r| r["tables"].as_array().cloned())
        .unwrap_or_default();
    tables.sort_by_key(|t| t["status"] != "failed");
    detail["tables"] = Value::Array(tables);
    detail["report"] = run.report.clone().unwrap_or(Value::Null);
    detail
}

#[test]
fn runs() {
    let notes =
        serde_json::to_value(RunView::summary(&run(Some(report())))).unwrap()["notes"].clone();
    assert_eq!(
        notes,
        json!({"dead_letter_records": 2, "expired_messages": 4, "schema_changes": 2, "skipped_records": 1})
    );
    for report in [Some(report()), None, Some(json!({"tables": "odd"}))] {
        let mut run = run(report);
        same(&RunView::summary(&run), summary_json(&run));
        same(&RunView::detail(&run), detail_json(&run));
        run.finished_ms = None;
        run.error = None;
        same(&RunView::summary(&run), summary_json(&run));
        same(&RunView::detail(&run), detail_json(&run));
    }
}

#[test]
fn jobs() {
    let job = JobRow {
        id: 3,
        name: "orders".into(),
        source_id: 1,
        destination_id: 2,
        target_engines: vec!["spark".into()],
        namespace: None,
        sync: serde_json::from_value(json!({"max_threads": 2})).unwrap(),
        streams: vec![serde_json::from_value(json!({"topic": "a"})).unwrap()],
        schedule: "every 5 minutes".into(),
        paused: false,
        maintain: Piece::new(),
        maintain_schedule: String::new(),
        mode: crate::run_store::JobMode::Scheduled,
    };
    let last = run(Some(report()));
    let next = Some("2026-12-01T13:00:00Z".to_string());
    let expected = |running: bool, next: &Option<String>, last: Option<&RunRow>| {
        json!({
            "current_run": null,
            "id": job.id,
            "name": job.name,
            "source_id": job.source_id,
            "destination_id": job.destination_id,
            "target_engines": job.target_engines,
            "namespace": job.namespace,
            "sync": job.sync,
            "streams": job.streams,
            "schedule": job.schedule,
            "paused": job.paused,
            "running": running,
            "next_run": next,
            "last_run": last.map(summary_json),
            "last_maintain": null,
            "maintain": {},
            "maintain_schedule": "",
            "mode": "scheduled",
            "follower": null,
        })
    };
    let mut view = JobView::new(&job, true, next.clone(), Some(&last));
    same(&view, expected(true, &next, Some(&last)));
    let mut with_warnings = expected(true, &next, Some(&last));
    with_warnings["warnings"] = json!(["too long"]);
    view.warnings = Some(vec!["too long".into()]);
    same(&view, with_warnings);
    same(
        &JobView::new(&job, false, None, None),
        expected(false, &None, None),
    );
}

#[test]
fn pieces_and_small_answers() {
    let row = PieceRow {
        id: 4,
        name: "kafka".into(),
        config: serde_json::from_value(json!({
            "bootstrap_servers": "b:1", "sasl_password": "s3cr3t", "topic_pattern": "^a"
        }))
        .unwrap(),
    };
    let mut expected = pieces::redact(PieceKind::Source, &row.config);
    expected.insert("id".into(), json!(row.id));
    expected.insert("name".into(), json!(row.name));
    let view = PieceView {
        kind: PieceKind::Source,
        row: &row,
    };
    same(&view, Value::Object(expected));
    assert!(!serde_json::to_string(&view).unwrap().contains("s3cr3t"));
    same(&Done { ok: true }, json!({ "ok": true }));
    same(
        &SetupDone {
            ok: true,
            username: "admin",
        },
        json!({ "ok": true, "username": "admin" }),
    );
    same(
        &SessionInfo {
            csrf: "c".into(),
            username: "admin".into(),
        },
        json!({ "csrf": "c", "username": "admin" }),
    );
    same(&SyncStarted { run_id: 9 }, json!({ "run_id": 9 }));
    same(
        &Cancelled { cancelled: false },
        json!({ "cancelled": false }),
    );
    let problems = ["p".to_string()];
    same(
        &crate::error::ErrorBody {
            error: "e",
            problems: &problems,
        },
        json!({"error": "e", "problems": ["p"]}),
    );
    same(
        &crate::error::ErrorBody {
            error: "e",
            problems: &[],
        },
        json!({"error": "e"}),
    );
}

#[test]
fn connection_tests() {
    let mut warned = CheckStep::new("format", Ok("orders: avro".into()));
    warned.warnings.push("no subject".into());
    let steps = [
        CheckStep::new("brokers", Ok("reached".into())),
        CheckStep::new(
            "auth",
            Err(CheckFailure::NoRegistry {
                topic: "orders".into(),
                format: topicberg_core::ValueFormat::Avro,
            }),
        ),
        warned,
    ];
    let expected = |steps: &[CheckStep]| {
        let ok = !steps.is_empty() && steps.iter().all(|s| s.outcome.is_ok());
        json!({
            "ok": ok,
            "steps": steps.iter().map(|s| {
                let mut step = match &s.outcome {
                    Ok(text) => json!({"step": s.step, "ok": true, "message": text}),
                    Err(e) => json!({"step": s.step, "ok": false, "message": e.to_string()}),
                };
                if !s.warnings.is_empty() {
                    step["warnings"] = json!(s.warnings);
                }
                step
            }).collect::<Vec<_>>(),
        })
    };
    for steps in [&steps[..], &steps[..1], &steps[2..], &[]] {
        same(&ConnectionTest::new(steps), expected(steps));
    }
}

/// A topic of the streams page, as a `json!` body.
fn topic_json<E: std::fmt::Display>(
    topic: &DiscoveredTopic,
    stream: &StreamSettings,
    upsert: &Result<ResolvedUpsert, E>,
) -> Value {
    json!({
        "topic": topic.topic,
        "partitions": topic.partitions,
        "sampled_messages": topic.sampled_messages,
        "invalid_messages": topic.invalid_messages,
        "invalid_example": topic.invalid_example,
        "columns": topic.columns.iter().map(|(n, ty)| json!({"name": n, "type": ty})).collect::<Vec<_>>(),
        "table": topic.table,
        "configured": stream.configured,
        "mode": stream.mode.as_str(),
        "dedup_keys": stream.dedup_keys,
        "on_invalid": stream.on_invalid.as_str(),
        "upsert_delete_format": match upsert {
            Ok(plan) => json!({
                "delete_format": plan.delete_format.as_str(),
                "label": plan.delete_format.label(),
                "format_version": plan.format_version.number(),
                "reason": plan.reason,
            }),
            Err(_) => Value::Null,
        },
        "upsert_delete_format_error": upsert.as_ref().err().map(ToString::to_string),
        "value_format": topic.value_format,
        "value_format_reason": topic.value_format_reason,
    })
}

#[test]
fn streams() {
    let topic = DiscoveredTopic {
        topic: "orders".into(),
        partitions: 3,
        sampled_messages: 10,
        invalid_messages: 1,
        invalid_example: Some("orders[0]@3: not a JSON object".into()),
        value_format: "json".into(),
        value_format_reason: "set in the job".into(),
        columns: vec![
            ("id".into(), "long".into()),
            ("at".into(), "timestamp".into()),
        ],
        renamed: vec![],
        table: "orders".into(),
        streams_block: String::new(),
    };
    let stream = StreamSettings::defaults_for("orders");
    let plan = ResolvedUpsert {
        delete_format: DeleteFormat::Dv,
        format_version: FormatVersion::V3,
        reason: "why".into(),
    };
    for upsert in [Ok(plan), Err("no common format".to_string())] {
        let expected = topic_json(&topic, &stream, &upsert);
        let view = TopicView::new(&topic, stream.clone(), upsert);
        same(&view, expected.clone());
        let answer = Streams {
            job_id: 3,
            namespace: "orders_topics".into(),
            target_engines: vec!["spark".into()],
            topic_pattern: None,
            topics: vec![view],
        };
        same(
            &answer,
            json!({
                "job_id": 3,
                "namespace": "orders_topics",
                "target_engines": ["spark"],
                "topic_pattern": Value::Null,
                "topics": [expected],
            }),
        );
    }
}

#[test]
fn snapshot_ids_are_strings() {
    let mut report = json!({"tables": [{"snapshot_id": 9078093739648399528i64,
        "records": 3, "commit": {"snapshotId": 9078093739648399528i64, "addedRecords": 3}}]});
    ids_as_strings(&mut report);
    assert_eq!(
        report,
        json!({"tables": [{"snapshot_id": "9078093739648399528", "records": 3,
            "commit": {"snapshotId": "9078093739648399528", "addedRecords": 3}}]})
    );
}

#[test]
fn job_overview_shape() {
    let answer = JobOverview {
        lag: Some(vec![TopicLag {
            lag: 5,
            partitions: vec![
                PartitionLagView {
                    lag: 2,
                    partition: 0,
                },
                PartitionLagView {
                    lag: 3,
                    partition: 1,
                },
            ],
            topic: "orders".into(),
        }]),
        last_success: None,
    };
    same(
        &answer,
        json!({"lag": [{"lag": 5, "partitions": [{"lag": 2, "partition": 0},
            {"lag": 3, "partition": 1}], "topic": "orders"}], "last_success": Value::Null}),
    );
}
