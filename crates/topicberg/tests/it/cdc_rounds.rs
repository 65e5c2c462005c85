//! Seeded random rounds of changes to two PostgreSQL tables captured by one
//! Debezium connector, synced into two tables by one job: inserts (each
//! with a `doc` over 8 KB that no later change touches: Debezium's
//! placeholder for it must never reach the table), updates
//! (nulls among them), deletes, primary-key changes, a truncate and a new column, and in
//! some rounds the sync killed (SIGKILL) at a random point first (while
//! reading, before the Iceberg commits, between the two tables' commits,
//! before the group commit). After each round each Iceberg table equals its
//! source table, value for value (DuckDB).
//!
//! `TOPICBERG_CDC_ROUNDS` rounds (default 4), `TOPICBERG_CDC_SEED` replays a run.

use std::collections::BTreeSet;
use std::os::unix::process::ExitStatusExt;
use std::time::Duration;

use serde_json::Value;

use crate::support::cdc::{change_stream, copy_rows, psql, query_json, read_changes, Connector};
use crate::support::{Catalog, Job, Rng};
use crate::testbed::unique_name;

const PARTITIONS: i32 = 3;

/// A value of `doc` over 8 KB that does not compress: PostgreSQL stores it
/// out of line (TOAST), and the table's default `REPLICA IDENTITY` makes
/// Debezium send a placeholder for it in every update and primary-key
/// change, none of which changes it.
const DOC: &str = "(select string_agg(md5(random()::text), '') from generate_series(1, 300))";

/// One source table and what the test knows of it.
struct Source {
    name: String,
    ids: BTreeSet<i64>,
    next_id: i64,
    /// Whether `note` was added.
    note: bool,
    /// The next change is an insert (after `note` was added: an event with
    /// the new schema).
    insert_next: bool,
}

impl Source {
    fn new(name: String) -> Source {
        psql(&format!(
            "create table {name} (id int primary key, name text, amount numeric(12,3),
               at timestamptz, tags text[], doc text)"
        ));
        Source {
            name,
            ids: BTreeSet::new(),
            next_id: 1,
            note: false,
            insert_next: false,
        }
    }

    fn pick(&self, rng: &mut Rng) -> Option<i64> {
        let n = self.ids.len() as u64;
        (n > 0).then(|| *self.ids.iter().nth(rng.below(n) as usize).unwrap())
    }

    /// One random change; how many messages it adds to the topic.
    fn change(&mut self, rng: &mut Rng) -> usize {
        let t = &self.name;
        let value = |rng: &mut Rng| -> String {
            match rng.below(4) {
                0 => "null".into(),
                v => format!("{}.{:03}", rng.below(1_000_000), v * 7),
            }
        };
        let kind = if std::mem::take(&mut self.insert_next) {
            0
        } else {
            rng.below(10)
        };
        match (kind, self.pick(rng)) {
            (0..=3, _) | (_, None) => {
                let id = self.next_id;
                self.next_id += 1;
                let amount = value(rng);
                psql(&format!(
                    "insert into {t} values ({id}, 'n{id}', {amount},
                       now() - interval '{} seconds', array['a{id}', null], {DOC})",
                    rng.below(100_000)
                ));
                self.ids.insert(id);
                1
            }
            (4..=6, Some(id)) => {
                let amount = value(rng);
                let name = if rng.below(3) == 0 {
                    "null".to_owned()
                } else {
                    format!("'u{}'", rng.next() % 1000)
                };
                let note = if self.note {
                    format!(", note = 'x{}'", rng.below(99))
                } else {
                    String::new()
                };
                psql(&format!(
                    "update {t} set name = {name}, amount = {amount}, tags = null{note} where id = {id}"
                ));
                1
            }
            (7..=8, Some(id)) => {
                psql(&format!("delete from {t} where id = {id}"));
                self.ids.remove(&id);
                2
            }
            (_, Some(id)) => {
                let new = self.next_id;
                self.next_id += 1;
                psql(&format!("update {t} set id = {new} where id = {id}"));
                self.ids.remove(&id);
                self.ids.insert(new);
                3
            }
        }
    }

    /// The source rows in the readers' canonical form, ordered by id.
    fn rows(&self) -> Vec<Value> {
        let note = if self.note { ", note" } else { "" };
        query_json(&format!(
            "select id, name, amount::text as amount,
                    to_char(at at time zone 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"+00:00\"') as at,
                    tags, doc {note}
             from {} order by id",
            self.name
        ))
    }
}

fn table_rows(job: &Job, table: &str) -> Vec<Value> {
    copy_rows("duckdb", job, table).expect("DuckDB reads the table")
}

/// A sync killed at a random point, then one that must succeed.
fn sync_killed_then_whole(job: &Job, rng: &mut Rng, round: usize) {
    let faults = [
        format!("after_records:{}", 1 + rng.below(20)),
        "before_iceberg_commit".to_owned(),
        "after_first_table_commit".to_owned(),
        "before_group_commit".to_owned(),
    ];
    if rng.below(2) == 0 {
        let fault = &faults[rng.below(faults.len() as u64) as usize];
        let out = job.run("sync", &[], &[("TOPICBERG_FAULT", fault)]);
        // `after_records:N` kills only a sync that reads N records.
        assert!(
            out.status.signal() == Some(libc::SIGKILL)
                || (fault.starts_with("after_records") && out.status.success()),
            "round {round}: the sync should have been killed at {fault}: {}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        eprintln!("round {round}: killed at {fault}");
    }
    job.sync();
}

#[test]
fn seeded_rounds_of_changes_to_two_tables_with_kills_keep_each_copy_equal_to_its_source() {
    rounds_of_changes(false);
}

/// The same with both tables' changes in one topic (Debezium's
/// `ByLogicalTableRouter`), routed back to a table each by
/// `table = "{source.table}"`: a kill between the two tables' commits is
/// one between the commits of one topic's routed tables.
#[test]
fn seeded_rounds_of_changes_routed_from_one_topic_to_two_tables_with_kills_keep_each_copy_equal_to_its_source(
) {
    rounds_of_changes(true);
}

fn rounds_of_changes(routed: bool) {
    let mut rng = Rng::seeded("TOPICBERG_CDC_SEED", "cdc rounds");
    let rounds: usize = std::env::var("TOPICBERG_CDC_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(4);
    let mut sources = [
        Source::new(unique_name("cdc_a")),
        Source::new(unique_name("cdc_b")),
    ];
    // Changes before the connector starts reach the topic as its
    // snapshot: one message per row then.
    let mut messages = [0usize; 2];
    for (s, m) in sources.iter_mut().zip(&mut messages) {
        for _ in 0..5 {
            s.change(&mut rng);
        }
        *m = s.ids.len();
    }
    let names = [sources[0].name.as_str(), sources[1].name.as_str()];
    let extra: &[(&str, &str)] = if routed { &Connector::ONE_TOPIC } else { &[] };
    let connector = Connector::start_with(&names, PARTITIONS, true, extra);
    let topics: Vec<String> = match routed {
        true => vec![connector.one_topic()],
        false => sources.iter().map(|s| connector.topic(&s.name)).collect(),
    };
    let mut streams = String::new();
    for (topic, s) in topics.iter().zip(&sources) {
        let table = if routed { "{source.table}" } else { &s.name };
        streams.push_str(&change_stream(topic, table));
    }
    let subscribed: Vec<&str> = topics.iter().map(String::as_str).collect();
    let job = Job::new(
        Catalog::Seaweed,
        &subscribed,
        "",
        &format!("{streams}[sync]\nbatch_rows = 10\n"),
    );
    let alter_at = rng.below(rounds as u64) as usize;
    let truncate_at = rng.below(rounds as u64) as usize;
    for round in 0..rounds {
        for (i, s) in sources.iter_mut().enumerate() {
            if round == alter_at && i == round % 2 {
                psql(&format!(
                    "alter table {} add column note varchar(10)",
                    s.name
                ));
                s.note = true;
                s.insert_next = true;
            }
            let changes = 3 + rng.below(12);
            for n in 0..changes {
                // One truncate among one round's changes of one table.
                if round == truncate_at && i != round % 2 && n == changes / 2 {
                    psql(&format!("truncate {}", s.name));
                    s.ids.clear();
                    messages[i] += 1;
                }
                messages[i] += s.change(&mut rng);
            }
        }
        let waited: Vec<usize> = match routed {
            true => vec![messages.iter().sum()],
            false => messages.to_vec(),
        };
        for (topic, m) in topics.iter().zip(waited) {
            read_changes(topic, Duration::from_secs(60), |c| c.len() >= m);
        }
        sync_killed_then_whole(&job, &mut rng, round);
        for s in &sources {
            assert_eq!(
                table_rows(&job, &s.name),
                s.rows(),
                "round {round}: {} differs from its source",
                s.name
            );
        }
    }
    drop(connector);
}
