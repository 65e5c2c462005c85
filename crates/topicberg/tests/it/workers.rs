//! Several workers of one job (`sync --follow` processes, each with its
//! own state directory, as on machines of their own) share the job's
//! partitions through its consumer group: each reads only the partitions
//! the group assigned it, and workers killed, started and added while
//! producers run lose and duplicate nothing. Seeded rounds
//! (`TOPICBERG_WORKERS_SEED` replays a run, `TOPICBERG_WORKERS_ROUNDS` sets
//! the rounds, 2 by default); DuckDB checks both tables after every step,
//! PyIceberg and Spark at the end.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::json;

use crate::support::{
    create_topic_on, figures_in_log, plaintext, produce_to_partitions, wait_until, Catalog, Job,
    Rng, Running,
};
use crate::sync_follow::{stop, Model};
use crate::testbed::unique_name;

const PARTITIONS: i32 = 12;
const UPSERT_IDS: u64 = 120;
const SETTINGS: &str = "[sync]\ncommit_interval = \"1s\"\nstop_timeout = \"30s\"\n";
/// A round, a reader's start, and after a SIGKILL the group's session
/// timeout (10 s in the test bed) on a loaded 2-core machine.
const WITHIN: Duration = Duration::from_secs(180);

/// One worker: its own copy of the job file (so its own state directory),
/// and the process while it runs.
struct Worker {
    job: Job,
    running: Option<(Running, PathBuf, PathBuf)>,
}

/// The job's topics, its workers and the model of what its tables hold.
struct Workers {
    job: Job,
    appended: String,
    upserted: String,
    appended_ids: Vec<u64>,
    latest: BTreeMap<u64, u64>,
    next_id: u64,
    workers: Vec<Worker>,
    /// Every worker process's log, of the dead ones too.
    logs: Vec<PathBuf>,
}

impl Workers {
    fn new(count: usize) -> Workers {
        let broker = plaintext();
        let appended = unique_name("workers_a");
        let upserted = unique_name("workers_u");
        create_topic_on(&broker, &appended, PARTITIONS);
        create_topic_on(&broker, &upserted, PARTITIONS);
        let extra = format!(
            "[[streams]]\ntopic = \"{upserted}\"\nmode = \"upsert\"\ndedup_keys = [\"id\"]\n{SETTINGS}"
        );
        let job = Job::new(Catalog::Seaweed, &[&appended, &upserted], "", &extra);
        let workers = (0..count)
            .map(|n| {
                let dir = job.path.with_file_name(format!("worker{n}"));
                std::fs::create_dir_all(&dir).unwrap();
                let path = dir.join("job.toml");
                std::fs::copy(&job.path, &path).unwrap();
                Worker {
                    job: Job {
                        name: job.name.clone(),
                        path,
                    },
                    running: None,
                }
            })
            .collect();
        Workers {
            job,
            appended,
            upserted,
            appended_ids: Vec::new(),
            latest: BTreeMap::new(),
            next_id: 0,
            workers,
            logs: Vec::new(),
        }
    }

    fn start(&mut self, n: usize) {
        let worker = &mut self.workers[n];
        assert!(worker.running.is_none(), "worker {n} runs already");
        let (report, log) = (
            worker.job.scratch_file("worker.json"),
            worker.job.scratch_file("worker.log"),
        );
        let child = worker.job.spawn_follow(&report, &log, &[]);
        self.logs.push(log.clone());
        worker.running = Some((child, report, log));
    }

    fn kill(&mut self, n: usize) {
        let (mut child, _, _) = self.workers[n].running.take().expect("running");
        child.kill().expect("SIGKILL");
        child.wait().expect("wait");
    }

    /// SIGTERM, and the worker's report says no round failed.
    fn stop(&mut self, n: usize) {
        let (child, report, log) = self.workers[n].running.take().expect("running");
        let totals = stop(child, &report, &log);
        assert_eq!(totals["failed_rounds"], 0, "{totals}");
    }

    fn stop_all(&mut self) {
        for n in 0..self.workers.len() {
            if self.workers[n].running.is_some() {
                self.stop(n);
            }
        }
    }

    /// Produces `count` messages to each topic, over every partition; an
    /// upsert key always goes to one partition, so its latest message is
    /// the last produced.
    fn produce(&mut self, rng: &mut Rng, count: usize) {
        let broker = plaintext();
        let (mut appends, mut upserts) = (Vec::new(), Vec::new());
        for _ in 0..count {
            let id = self.next_id;
            self.next_id += 1;
            let partition = rng.below(PARTITIONS as u64) as i32;
            appends.push((partition, id.to_string(), json!({"id": id}).to_string()));
            self.appended_ids.push(id);
            let key = rng.below(UPSERT_IDS);
            let partition = (key % PARTITIONS as u64) as i32;
            let value = json!({"id": key, "seq": id}).to_string();
            upserts.push((partition, key.to_string(), value));
            self.latest.insert(key, id);
        }
        produce_to_partitions(&broker, &self.appended, &appends);
        produce_to_partitions(&broker, &self.upserted, &upserts);
    }

    /// Waits until DuckDB reads both tables as the model says, then checks
    /// them (no loss, no duplicate).
    fn wait_visible(&self, what: &str) {
        self.model().wait_visible(what, WITHIN);
    }

    fn check(&self, engine: &str, what: &str) {
        self.model().check(engine, what);
    }

    fn model(&self) -> Model<'_> {
        Model {
            append_table: self.job.table(&self.appended),
            upsert_table: self.job.table(&self.upserted),
            appended_ids: &self.appended_ids,
            latest: &self.latest,
        }
    }

    /// Each running worker's partitions, from the last assignment its log
    /// reports.
    fn owned(&self) -> Vec<u64> {
        self.workers
            .iter()
            .filter_map(|w| w.running.as_ref())
            .map(|(_, _, log)| {
                let seen =
                    figures_in_log(log, 0, "consumer group assignment changed", "partitions");
                seen.last().copied().unwrap_or(0)
            })
            .collect()
    }

    /// Waits until the running workers share the job's partitions evenly:
    /// each owns floor(P/N) to ceil(P/N) of them, all of them owned.
    fn wait_balanced(&self, what: &str) -> Vec<u64> {
        let total = 2 * PARTITIONS as u64;
        let mut owned = Vec::new();
        wait_until(
            &format!("{what}: the partitions shared evenly"),
            WITHIN,
            || {
                owned = self.owned();
                let n = owned.len() as u64;
                owned.iter().sum::<u64>() == total
                    && owned
                        .iter()
                        .all(|&o| o >= total / n && o <= total.div_ceil(n))
            },
        );
        eprintln!("{what}: partitions per worker {owned:?}");
        owned
    }
}

/// 1 -> 3 -> 2 -> 1 workers while producers run, in seeded rounds (a
/// worker added, one killed, one stopped): a worker reads only its
/// partitions (the shares add up to the job's, each within one of the
/// others), a killed worker's partitions go to the others once its session
/// expired, a stopped one's at once, and every message is in the tables
/// exactly once.
#[test]
fn workers_share_a_jobs_partitions_and_write_every_message_once_as_they_come_and_go() {
    let rounds: usize = std::env::var("TOPICBERG_WORKERS_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2);
    let mut rng = Rng::seeded("TOPICBERG_WORKERS_SEED", "workers");
    let mut workers = Workers::new(3);
    workers.produce(&mut rng, 300);
    workers.start(0);
    workers.wait_balanced("one worker");
    workers.wait_visible("one worker");
    for round in 0..rounds {
        let count = 100 + rng.below(300) as usize;
        workers.produce(&mut rng, count);
        for n in 0..3 {
            if workers.workers[n].running.is_none() {
                workers.start(n);
            }
        }
        workers.wait_balanced(&format!("round {round}: three workers"));
        workers.wait_visible(&format!("round {round}: three workers"));
        // One of them killed while the producer runs: the others take its
        // partitions once the group fenced it.
        let victim = rng.below(3) as usize;
        workers.produce(&mut rng, count);
        // The random moment is the point, not a wait for something.
        std::thread::sleep(Duration::from_millis(rng.below(3000)));
        workers.kill(victim);
        workers.produce(&mut rng, count);
        workers.wait_balanced(&format!("round {round}: two workers"));
        workers.wait_visible(&format!("round {round}: worker {victim} killed"));
        // One of the two stopped with SIGTERM: it commits, leaves the
        // group, and the last one takes every partition.
        let leaving = (0..3)
            .find(|&n| workers.workers[n].running.is_some())
            .expect("two run");
        workers.produce(&mut rng, count);
        workers.stop(leaving);
        workers.produce(&mut rng, count);
        workers.wait_balanced(&format!("round {round}: one worker"));
        workers.wait_visible(&format!("round {round}: worker {leaving} stopped"));
    }
    workers.stop_all();
    // Each read only its own partitions, and gave one back only after
    // committing what it read of it: no round of one worker ever met
    // another's commit of the same offsets (reading every partition, or
    // giving them back early, makes them meet).
    for log in &workers.logs {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        assert!(
            !text.contains("another sync of the job committed these messages first"),
            "a worker's round was superseded by another's ({}):\n{text}",
            log.display()
        );
    }
    for engine in ["pyiceberg", "spark"] {
        workers.check(engine, "after the rounds");
    }
}
