//! A topic the job names that the cluster does not have: by default the
//! sync fails before reading anything, naming the topic and the closest
//! existing name (a typo must not sync nothing, green, forever); with
//! `missing_topics = "wait"` the other topics are synced and the report
//! warns; a `topic_pattern` that matches no topic warns on every run.
//! `check` and `discover` say the same before any sync.

use crate::support::{create_topic, produce, read_rows, try_read, wait_until, Catalog, Job};
use crate::testbed::unique_name;

/// `name` with its second and third characters swapped (one edit).
fn typo_of(name: &str) -> String {
    let mut chars: Vec<char> = name.chars().collect();
    chars.swap(1, 2);
    chars.into_iter().collect()
}

fn two_messages(topic: &str) {
    let messages: Vec<(String, String)> = (1..=2)
        .map(|i| (i.to_string(), format!("{{\"id\": {i}}}")))
        .collect();
    produce(topic, &messages);
}

#[test]
fn a_mistyped_topic_fails_the_sync_naming_the_closest_topic_unless_told_to_wait() {
    let good = unique_name("orders");
    create_topic(&good, 1);
    two_messages(&good);
    let typo = typo_of(&good);

    let job = Job::new(Catalog::Seaweed, &[&good, &typo], "", "");
    let stderr = job.sync_failing();
    assert!(
        stderr.contains(&format!(
            "topic \"{typo}\" does not exist in the cluster (closest: \"{good}\")"
        )) && stderr.contains("missing_topics = \"wait\""),
        "{stderr}"
    );
    assert!(
        !try_read("duckdb", Catalog::Seaweed, &job.table(&good))
            .status
            .success(),
        "nothing is written when a named topic is missing"
    );
    // `check` and `discover` say it too, before any sync.
    let named = format!("topic \"{typo}\" does not exist in the cluster (closest: \"{good}\")");
    for subcommand in ["check", "discover"] {
        let out = job.run(subcommand, &[], &[]);
        let said = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{subcommand} passed: {said}");
        assert!(said.contains(&named), "{subcommand}: {said}");
    }

    let waiting = Job::new(
        Catalog::Seaweed,
        &[&good, &typo],
        "missing_topics = \"wait\"\n",
        "",
    );
    let report = waiting.sync();
    let warnings = report["warnings"].to_string();
    assert!(
        warnings.contains(&format!("topic \\\"{typo}\\\" does not exist")),
        "{report:#}"
    );
    assert_eq!(
        read_rows("duckdb", Catalog::Seaweed, &waiting.table(&good)).len(),
        2
    );
    // With `wait`, `check` passes and its topics step warns.
    let out = waiting.run("check", &[], &[]);
    let said =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}");
    assert!(
        said.contains(&format!("warning: topic \"{typo}\" does not exist")),
        "{said}"
    );
}

#[test]
fn a_pattern_that_matches_no_topic_warns_in_the_report() {
    let nothing = unique_name("nothing");
    let job = Job::new(Catalog::Seaweed, &[&nothing], "", "");
    // A pattern, not a spelled-out name: `^nothing_<hex>.+$`.
    let text = std::fs::read_to_string(&job.path).unwrap();
    let text = text.replace(&format!("^({nothing})$"), &format!("^{nothing}.+$"));
    assert!(text.contains(&format!("'^{nothing}.+$'")), "{text}");
    std::fs::write(&job.path, text).unwrap();
    let report = job.sync();
    let warnings = report["warnings"].to_string();
    assert!(
        warnings.contains("matches none of the cluster's"),
        "{report:#}"
    );
}

#[test]
fn a_follower_waiting_for_a_missing_topic_says_so_in_its_report() {
    let good = unique_name("orders");
    create_topic(&good, 1);
    two_messages(&good);
    let typo = typo_of(&good);
    let job = Job::new(
        Catalog::Seaweed,
        &[&good, &typo],
        "missing_topics = \"wait\"\n",
        "[sync]\ncommit_interval = \"1s\"\n",
    );
    let (report, log) = (
        job.scratch_file("follow.json"),
        job.scratch_file("follow.log"),
    );
    let child = job.spawn_follow(&report, &log, &[]);
    wait_until(
        "the follower to commit the existing topic's messages",
        std::time::Duration::from_secs(120),
        || {
            let read = try_read("duckdb", Catalog::Seaweed, &job.table(&good));
            read.status.success() && String::from_utf8_lossy(&read.stdout).lines().count() >= 2
        },
    );
    let report = crate::sync_follow::stop(child, &report, &log);
    let warnings = report["warnings"].to_string();
    assert!(
        warnings.contains(&format!("topic \\\"{typo}\\\" does not exist")),
        "{report:#}"
    );
}
