//! An upsert commit that meets another writer's commit (HTTP 409): the
//! other writer (another job, syncing another topic into the same table)
//! replaced rows of keys this sync also replaces. A blind
//! rebase would retire the old rows only and leave the other writer's new
//! ones beside ours; topicberg recomputes from the table instead, so every
//! key keeps exactly one row.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::json;

use crate::fault_proxy::{Fault, FaultProxy, Rule};
use crate::support::{create_topic, produce, read_rows, table_report, Catalog, Job};
use crate::testbed::{get, unique_name};

fn messages(ids: std::ops::Range<i64>, version: i64) -> Vec<(String, String)> {
    ids.map(|id| (id.to_string(), json!({"id": id, "v": version}).to_string()))
        .collect()
}

#[test]
fn sync_upsert_conflict_with_another_writer_rechecks_keys_and_keeps_one_row_per_key() {
    let topic = unique_name("contended");
    create_topic(&topic, 1);
    let streams =
        format!("[[streams]]\ntopic = \"{topic}\"\nmode = \"upsert\"\ndedup_keys = [\"id\"]\n");
    let job = Job::new(Catalog::Seaweed, &[&topic], "", &streams);
    let text = std::fs::read_to_string(&job.path).unwrap();
    std::fs::write(
        &job.path,
        text.replacen(
            '\n',
            "\ntarget_engines = [\"spark\", \"duckdb\", \"trino\"]\n",
            1,
        ),
    )
    .unwrap();
    // The other writer: another job (its own consumer group and key index,
    // in another folder) syncing another topic into the same table, talking
    // to the catalog directly. (The same topic would be another sync of
    // the same messages: superseded, see sync_concurrent.)
    let other_topic = unique_name("contender");
    create_topic(&other_topic, 1);
    let other_dir = job.path.with_file_name("other");
    std::fs::create_dir_all(&other_dir).unwrap();
    let other_path = other_dir.join("job.toml");
    let other_text = std::fs::read_to_string(&job.path)
        .unwrap()
        .replace(&topic, &other_topic)
        .replacen(
            "[source]\n",
            &format!(
                "[source]\nconsumer_group = \"{}\"\n",
                unique_name("other_writer")
            ),
            1,
        )
        .replacen(
            "mode = \"upsert\"\n",
            &format!("mode = \"upsert\"\ntable = \"{}\"\n", topic.to_lowercase()),
            1,
        );
    std::fs::write(&other_path, other_text).unwrap();

    let proxy = FaultProxy::start(&get("TESTBED_SEAWEED_URI"));
    proxy.point_catalog(&job, Catalog::Seaweed);
    produce(&topic, &messages(0..20, 1));
    job.sync();

    // Ids 10..30 change; the other writer commits them first, right before
    // our commit reaches the catalog.
    produce(&topic, &messages(10..30, 2));
    produce(&other_topic, &messages(10..30, 3));
    let table_path = format!("/tables/{}", topic.to_lowercase());
    let hook_path = other_path.clone();
    proxy.add(
        Rule::new(Fault::RunFirst(Arc::new(move || {
            let out = crate::testbed::command(env!("CARGO_BIN_EXE_topicberg"))
                .args(["sync", "-c", hook_path.to_str().unwrap()])
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "the other writer's sync failed: {}",
                String::from_utf8_lossy(&out.stdout)
            );
        })))
        .method("POST")
        .path_contains(&table_path)
        .times(1),
    );
    let log = job.scratch_file("sync.log");
    let report = job.sync_logged(&log);
    let t = table_report(&report, &job.table(&topic));
    assert_eq!(t["status"], "committed", "{t}");
    let log = crate::support::strip_ansi(&std::fs::read_to_string(&log).unwrap());
    assert!(
        log.contains("another commit landed first"),
        "the conflict was met: {log}"
    );
    assert!(
        !log.contains("carried the upsert's deletes"),
        "another writer's commit is computed again, never carried over: {log}"
    );

    for engine in ["duckdb", "spark"] {
        let rows = read_rows(engine, Catalog::Seaweed, &job.table(&topic));
        let mut by_id: BTreeMap<i64, Vec<i64>> = BTreeMap::new();
        for r in &rows {
            by_id
                .entry(r["id"].as_i64().unwrap())
                .or_default()
                .push(r["v"].as_i64().unwrap());
        }
        let want: BTreeMap<i64, Vec<i64>> = (0..30)
            .map(|id| (id, vec![if id < 10 { 1 } else { 2 }]))
            .collect();
        assert_eq!(by_id, want, "{engine}: one row per key, the latest");
    }
}
