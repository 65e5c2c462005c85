//! Several workers of one job (`sync --follow` processes, each with its
//! own `--state-dir`, as on machines of their own) share the job's
//! partitions through its consumer group: each reads only the partitions
//! the group assigned it, and workers killed, started and added while
//! producers run lose and duplicate nothing. Seeded rounds
//! (`TOPICBERG_WORKERS_SEED` replays a run, `TOPICBERG_WORKERS_ROUNDS` sets
//! the rounds, 2 by default); DuckDB checks both tables after every step,
//! PyIceberg and Spark at the end. A worker paused past its session
//! timeout and resumed commits nothing another worker committed.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::json;

use crate::serve_support::{free_port, Client};
use crate::support::{
    create_topic_on, figures_in_log, plaintext, produce_to_partitions, wait_until, Catalog, Job,
    Rng, Running,
};
use crate::sync_follow::{stop, Model};
use crate::testbed::unique_name;

pub(crate) const PARTITIONS: i32 = 12;
const UPSERT_IDS: u64 = 120;
const SETTINGS: &str = "[sync]\ncommit_interval = \"1s\"\nstop_timeout = \"30s\"\n";
/// A round, a reader's start, and after a SIGKILL the group's session
/// timeout (10 s in the test bed) on a loaded 2-core machine.
pub(crate) const WITHIN: Duration = Duration::from_secs(180);

/// One worker: its own state directory (`sync --state-dir`, as on a
/// machine of its own), and the process while it runs.
struct Worker {
    state_dir: PathBuf,
    running: Option<(Running, PathBuf, PathBuf)>,
}

/// The job's topics, its workers and the model of what its tables hold.
pub(crate) struct Workers {
    pub(crate) job: Job,
    pub(crate) appended: String,
    pub(crate) upserted: String,
    pub(crate) appended_ids: Vec<u64>,
    pub(crate) latest: BTreeMap<u64, u64>,
    pub(crate) next_id: u64,
    workers: Vec<Worker>,
    /// Every worker process's log, of the dead ones too.
    pub(crate) logs: Vec<PathBuf>,
}

impl Workers {
    fn new(count: usize) -> Workers {
        Workers::with(count, "")
    }

    /// `count` workers of a job with `tail` appended to its file.
    pub(crate) fn with(count: usize, tail: &str) -> Workers {
        let broker = plaintext();
        let appended = unique_name("workers_a");
        let upserted = unique_name("workers_u");
        create_topic_on(&broker, &appended, PARTITIONS);
        create_topic_on(&broker, &upserted, PARTITIONS);
        let extra = format!(
            "[[streams]]\ntopic = \"{upserted}\"\nmode = \"upsert\"\ndedup_keys = [\"id\"]\n{SETTINGS}"
        );
        let job = Job::new(Catalog::Seaweed, &[&appended, &upserted], "", &extra);
        let mut text = std::fs::read_to_string(&job.path).unwrap();
        text.push_str(tail);
        std::fs::write(&job.path, text).unwrap();
        let workers = (0..count)
            .map(|n| {
                let state_dir = job.path.with_file_name(format!("worker{n}"));
                std::fs::create_dir_all(&state_dir).unwrap();
                Worker {
                    state_dir,
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

    pub(crate) fn start(&mut self, n: usize) {
        self.start_with(n, &[], &[]);
    }

    /// Starts worker `n` with `args` after `--follow` and `env` set.
    fn start_with(&mut self, n: usize, args: &[&str], env: &[(&str, &str)]) {
        let job = &self.job;
        let worker = &mut self.workers[n];
        assert!(worker.running.is_none(), "worker {n} runs already");
        let (report, log) = (
            job.scratch_file("worker.json"),
            job.scratch_file("worker.log"),
        );
        let state_dir = worker.state_dir.to_str().unwrap();
        let mut all = vec!["--follow", "--state-dir", state_dir];
        all.extend_from_slice(args);
        let child = job.spawn_syncing(&all, &report, &log, env);
        self.logs.push(log.clone());
        worker.running = Some((child, report, log));
    }

    /// Sends `signal` to worker `n`.
    fn signal(&self, n: usize, signal: i32) {
        let (child, _, _) = self.workers[n].running.as_ref().expect("running");
        // SAFETY: kill(2) on our own child's pid.
        assert_eq!(unsafe { libc::kill(child.id() as i32, signal) }, 0);
    }

    /// Worker `n`'s log.
    fn log(&self, n: usize) -> String {
        let (_, _, log) = self.workers[n].running.as_ref().expect("running");
        std::fs::read_to_string(log).unwrap_or_default()
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

    pub(crate) fn stop_all(&mut self) {
        for n in 0..self.workers.len() {
            if self.workers[n].running.is_some() {
                self.stop(n);
            }
        }
    }

    /// Produces `count` messages to each topic, over every partition; an
    /// upsert key always goes to one partition, so its latest message is
    /// the last produced.
    pub(crate) fn produce(&mut self, rng: &mut Rng, count: usize) {
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
    pub(crate) fn wait_visible(&self, what: &str) {
        self.model().wait_visible(what, WITHIN);
    }

    pub(crate) fn check(&self, engine: &str, what: &str) {
        self.model().check(engine, what);
    }

    fn model(&self) -> Model<'_> {
        let topics = (self.appended.as_str(), self.upserted.as_str());
        Model::of(&self.job, topics, &self.appended_ids, &self.latest)
    }

    /// Each worker's log length now (0 for one not running).
    fn log_lengths(&self) -> Vec<usize> {
        (0..self.workers.len())
            .map(|n| {
                self.workers[n]
                    .running
                    .as_ref()
                    .map_or(0, |_| self.log(n).len())
            })
            .collect()
    }

    /// For each worker, the "snapshot expiry" events of its maintenance
    /// passes on `table` since `from` (its log lengths then).
    fn expiries(&self, table: &str, from: &[usize]) -> Vec<usize> {
        self.events("snapshot expiry", table, from)
    }

    /// For each worker, its `what` events on `table` since `from`.
    fn events(&self, what: &str, table: &str, from: &[usize]) -> Vec<usize> {
        let field = format!("table={table}");
        (0..self.workers.len())
            .map(|n| match self.workers[n].running {
                Some(_) => {
                    let log = self.log(n);
                    let text = crate::support::strip_ansi(log.get(from[n]..).unwrap_or_default());
                    text.lines()
                        .filter(|l| l.contains(what) && l.contains(&field))
                        .count()
                }
                None => 0,
            })
            .collect()
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

    /// Which worker owns each partition of `topic`, from the last
    /// assignment each running worker's log reports (`owned=`).
    pub(crate) fn owners(&self, topic: &str) -> BTreeMap<i32, usize> {
        let mut owners = BTreeMap::new();
        for (n, worker) in self.workers.iter().enumerate() {
            let Some((_, _, log)) = worker.running.as_ref() else {
                continue;
            };
            let text =
                crate::support::strip_ansi(&std::fs::read_to_string(log).unwrap_or_default());
            let owned = text
                .lines()
                .filter(|l| l.contains("consumer group assignment changed"))
                .filter_map(|l| l.split_whitespace().find_map(|w| w.strip_prefix("owned=")))
                .next_back()
                .unwrap_or_default()
                .to_string();
            for list in owned.split(';') {
                let Some(partitions) = list.strip_prefix(&format!("{topic}:")) else {
                    continue;
                };
                for p in partitions.split(',') {
                    owners.insert(p.parse().expect("a partition number"), n);
                }
            }
        }
        owners
    }

    /// Waits until the running workers share the job's partitions evenly:
    /// each owns floor(P/N) to ceil(P/N) of them, all of them owned.
    pub(crate) fn wait_balanced(&self, what: &str) -> Vec<u64> {
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

/// A worker's `--listen` endpoints: alive, ready (its rounds succeed),
/// and its rounds' metrics labelled with the job and its tables.
fn check_endpoints(workers: &Workers, listen: &str) {
    let client = Client::new(&format!("http://{listen}"));
    let health = client.get("/healthz");
    assert_eq!(health.status, 200, "{}", health.body);
    let ready = client.get("/readyz");
    assert_eq!(ready.status, 200, "{}", ready.body);
    assert!(ready.body.contains("\"ready\""), "{}", ready.body);
    let metrics = client.get("/metrics");
    assert_eq!(metrics.status, 200, "{}", metrics.body);
    let table = workers.job.table(&workers.appended);
    let line = metrics
        .body
        .lines()
        .find(|l| l.starts_with("topicberg_records_total{") && l.contains(&table))
        .unwrap_or_else(|| panic!("no records of {table} in the metrics:\n{}", metrics.body));
    assert!(line.contains(&workers.job.name), "{line}");
}

/// With the shares settled, each table (append and upsert) is committed
/// by one worker only (the owner of its topic's partition 0), the others
/// hand their files (or, for the upsert table, their staged winners) over.
fn check_one_committer(workers: &mut Workers, rng: &mut Rng, round: usize) {
    let from = workers.log_lengths();
    workers.produce(rng, 200);
    workers.wait_visible(&format!("round {round}: three workers, settled"));
    let tables = [
        (&workers.appended, "committed snapshot"),
        (&workers.upserted, "committed upsert snapshot"),
    ];
    for (topic, committed) in tables {
        let table = workers.job.table(topic);
        let commits = workers.events(committed, &table, &from);
        let handed = workers.events("handed files to the table's committer", &table, &from);
        let owners: std::collections::BTreeSet<usize> =
            workers.owners(topic).into_values().collect();
        eprintln!(
            "round {round}: {table} snapshots per worker {commits:?}, sets handed {handed:?}, \
             its partitions owned by workers {owners:?}"
        );
        assert_eq!(
            commits.iter().filter(|&&n| n > 0).count(),
            1,
            "{table} committed by one worker only: snapshots per worker {commits:?}"
        );
        if owners.len() > 1 {
            assert!(
                handed.iter().filter(|&&n| n > 0).count() >= 1,
                "the other workers hand their files over: sets per worker {handed:?}"
            );
        }
        let committer = commits.iter().position(|&n| n > 0).expect("one committer");
        assert_eq!(
            handed[committer], 0,
            "the committer hands nothing over: {handed:?}"
        );
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
    // The first worker also serves its endpoints, as in a pod.
    let listen = format!("127.0.0.1:{}", free_port());
    workers.start_with(0, &["--listen", &listen], &[]);
    workers.wait_balanced("one worker");
    workers.wait_visible("one worker");
    check_endpoints(&workers, &listen);
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
        check_one_committer(&mut workers, &mut rng, round);
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

/// A worker paused (SIGSTOP) past its session timeout while it holds the
/// messages of every partition read and not committed, then resumed (a
/// zombie): the group fenced it and gave its partitions to the other
/// worker, which committed them; the zombie's commit must not land (the
/// table's offsets check), and every message is in the tables once.
#[test]
fn a_worker_paused_past_its_session_and_resumed_commits_nothing_another_worker_committed() {
    let mut rng = Rng::seeded("TOPICBERG_WORKERS_SEED", "zombie");
    let mut workers = Workers::new(2);
    workers.produce(&mut rng, 300);
    let release = workers.job.scratch_file("release");
    let pause = format!("before_iceberg_commit:{}", release.display());
    workers.start_with(0, &[], &[("TOPICBERG_PAUSE", &pause)]);
    wait_until(
        "worker 0 to hold its round's messages before the commit",
        WITHIN,
        || release.with_extension("ready").exists(),
    );
    workers.signal(0, libc::SIGSTOP);
    workers.start(1);
    // Worker 0 stops heartbeating: the group fences it after its session
    // timeout (10 s in the test bed) and gives worker 1 every partition.
    workers.wait_visible("worker 1 committed the paused worker's partitions");
    std::fs::write(&release, b"").unwrap();
    workers.signal(0, libc::SIGCONT);
    wait_until("the zombie's round to be refused", WITHIN, || {
        workers
            .log(0)
            .contains("another sync of the job committed these messages first")
    });
    workers.produce(&mut rng, 200);
    workers.wait_balanced("after the zombie rejoined");
    workers.wait_visible("after the zombie rejoined");
    workers.stop_all();
    for engine in ["pyiceberg", "spark"] {
        workers.check(engine, "after the zombie");
    }
}

/// Two workers with maintenance every 3 s: each table is maintained by one
/// of them only (the one the group assigned its topic's partition 0), never
/// by both.
#[test]
fn workers_maintain_each_table_in_one_place() {
    let mut rng = Rng::seeded("TOPICBERG_WORKERS_SEED", "maintain");
    let mut workers = Workers::with(
        2,
        "\n[maintain]\nfollow_every = \"3s\"\nfollow_max_snapshot_age = \"1s\"\n\
         keep_snapshots = 2\nmin_input_files = 2\n",
    );
    workers.produce(&mut rng, 300);
    workers.start(0);
    workers.start(1);
    workers.wait_balanced("two workers");
    let tables = [
        workers.job.table(&workers.appended),
        workers.job.table(&workers.upserted),
    ];
    // A pass begun before the shares settled may still end: passes are
    // counted from the first one after it.
    let mut from = workers.log_lengths();
    for round in 0..2 {
        wait_until(&format!("maintenance passes ({round})"), WITHIN, || {
            tables
                .iter()
                .all(|t| workers.expiries(t, &from).iter().sum::<usize>() >= 2)
        });
        if round == 0 {
            from = workers.log_lengths();
            workers.produce(&mut rng, 200);
            workers.wait_visible("while the workers maintain their tables");
        }
    }
    for table in &tables {
        let by = workers.expiries(table, &from);
        assert_eq!(
            by.iter().filter(|&&n| n > 0).count(),
            1,
            "{table} maintained by one worker only: passes per worker {by:?}"
        );
    }
    workers.stop_all();
    workers.check("duckdb", "after the maintenance");
}
