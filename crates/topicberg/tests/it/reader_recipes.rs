//! The reader recipes README gives, run as written (the `<...>` parts
//! filled with the test bed's values) against tables topicberg synced.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::storage_credentials::{job_with_destination, vending_destination};
use crate::support::{create_topic, produce, sample_messages};
use crate::testbed::{command, get, repo_root, unique_name};

/// The code block after `<!-- recipe:<name> -->` in README.md.
fn readme_recipe(name: &str) -> String {
    let readme = std::fs::read_to_string(repo_root().join("README.md")).unwrap();
    let marker = format!("<!-- recipe:{name} -->");
    let after = readme
        .split_once(&marker)
        .unwrap_or_else(|| panic!("README.md has no {marker}"))
        .1;
    let body = after.split_once("```").unwrap().1;
    let body = body.split_once('\n').unwrap().1;
    body.split_once("```").unwrap().0.to_string()
}

/// Runs DuckDB statements (`;`-separated) and prints the last one's rows
/// as JSON lines; `INSTALL x; LOAD x;` load the extension from its PyPI
/// package, with iceberg's `avro` dependency (no extension repository on
/// this machine).
const RUN_DUCKDB: &str = r#"
import json, re, sys
sys.path.insert(0, "scripts/readers")
import duckdb
from duckdb_reader import extension_path
sql = sys.stdin.read()
sql = re.sub(r"INSTALL\s+\w+\s*;", "", sql)
sql = re.sub(r"LOAD\s+(\w+)\s*;", lambda m: "LOAD '%s';" % extension_path(m.group(1)), sql)
con = duckdb.connect(":memory:", config={"autoinstall_known_extensions": "false",
                                         "autoload_known_extensions": "false"})
# What INSTALL iceberg would fetch along: its avro dependency.
con.execute("LOAD '%s'" % extension_path("avro"))
statements = [s.strip() for s in sql.split(";") if s.strip()]
for s in statements[:-1]:
    con.execute(s)
cur = con.execute(statements[-1])
names = [d[0] for d in cur.description]
for row in cur.fetchall():
    print(json.dumps(dict(zip(names, row)), default=str))
"#;

#[test]
fn duckdb_recipe_in_readme_reads_a_synced_upsert_table_through_a_polaris_shaped_catalog() {
    let topic = unique_name("customers");
    create_topic(&topic, 1);
    let mut latest: BTreeMap<i64, Value> = BTreeMap::new();
    for batch in ["first", "second"] {
        let messages = sample_messages("customers", batch);
        for (_, v) in &messages {
            let v: Value = serde_json::from_str(v).unwrap();
            latest.insert(v["id"].as_i64().unwrap(), v);
        }
        produce(&topic, &messages);
    }
    let uri = get("TESTBED_VENDING_URI");
    let streams =
        format!("[[streams]]\ntopic = \"{topic}\"\nmode = \"upsert\"\ndedup_keys = [\"id\"]\n");
    let job = job_with_destination(&[&topic], &vending_destination(&uri), &streams);
    job.sync();

    let credential = get("TESTBED_VENDING_CREDENTIAL");
    let (client_id, client_secret) = credential.split_once(':').unwrap();
    let sql = readme_recipe("duckdb-polaris")
        .replace("http://<polaris-host>:8181/api/catalog", &uri)
        .replace("<client_id>", client_id)
        .replace("<client_secret>", client_secret)
        .replace("<catalog name>", &get("TESTBED_VENDING_WAREHOUSE"))
        .replace("<job name>_topics.customers", &job.table(&topic));
    assert!(!sql.contains('<'), "every placeholder filled: {sql}");
    let mut child = command(&get("TESTBED_PYTHON"))
        .args(["-c", RUN_DUCKDB])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(sql.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let want: Vec<(i64, String, String)> = latest
        .values()
        .map(|v| {
            (
                v["id"].as_i64().unwrap(),
                v["name"].as_str().unwrap().to_string(),
                v["city"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let got: Vec<(i64, String, String)> = rows
        .iter()
        .map(|r| {
            (
                r["id"].as_i64().unwrap(),
                r["name"].as_str().unwrap().to_string(),
                r["city"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(got, want, "one row per customer, the latest");
}
