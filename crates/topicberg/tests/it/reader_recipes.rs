//! The reader recipes the book gives ([`RECIPES_PAGE`]), run as written
//! (the `<...>` parts filled with the test bed's values) against tables
//! topicberg synced.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::storage_credentials::{job_with_destination, vending_destination};
use crate::support::{create_topic, produce, sample_messages};
use crate::testbed::{command, get, repo_root, unique_name};

/// The book's page holding the reader recipes (relative to the repository).
const RECIPES_PAGE: &str = "docs/src/how-to/read-tables.md";

/// The code block after `<!-- recipe:<name> -->` in [`RECIPES_PAGE`].
fn book_recipe(name: &str) -> String {
    let page = std::fs::read_to_string(repo_root().join(RECIPES_PAGE)).unwrap();
    let marker = format!("<!-- recipe:{name} -->");
    let after = page
        .split_once(&marker)
        .unwrap_or_else(|| panic!("{RECIPES_PAGE} has no {marker}"))
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

/// Produces the seeds' two batches of customers; (id, name, city) of the
/// latest message per id, by id.
fn produce_customers(topic: &str) -> Vec<(i64, String, String)> {
    let mut latest: BTreeMap<i64, Value> = BTreeMap::new();
    for batch in ["first", "second"] {
        let messages = sample_messages("customers", batch);
        for (_, v) in &messages {
            let v: Value = serde_json::from_str(v).unwrap();
            latest.insert(v["id"].as_i64().unwrap(), v);
        }
        produce(topic, &messages);
    }
    customers_of(&latest.into_values().collect::<Vec<_>>())
}

/// (id, name, city) of each row, in order.
fn customers_of(rows: &[Value]) -> Vec<(i64, String, String)> {
    rows.iter()
        .map(|r| {
            (
                r["id"].as_i64().unwrap(),
                r["name"].as_str().unwrap().to_string(),
                r["city"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// Runs `script` with the test bed's Python, `input` on stdin; its JSON
/// lines.
fn run_python(script: &str, args: &[&str], input: &str) -> Vec<Value> {
    use std::io::Write;
    let mut child = command(&get("TESTBED_PYTHON"))
        .arg("-c")
        .arg(script)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn duckdb_recipe_reads_a_synced_upsert_table_through_a_polaris_shaped_catalog() {
    let topic = unique_name("customers");
    create_topic(&topic, 1);
    let latest = produce_customers(&topic);
    let uri = get("TESTBED_VENDING_URI");
    let streams =
        format!("[[streams]]\ntopic = \"{topic}\"\nmode = \"upsert\"\ndedup_keys = [\"id\"]\n");
    let job = job_with_destination(&[&topic], &vending_destination(&uri), &streams);
    job.sync();

    let credential = get("TESTBED_VENDING_CREDENTIAL");
    let (client_id, client_secret) = credential.split_once(':').unwrap();
    let sql = book_recipe("duckdb-polaris")
        .replace("http://<polaris-host>:8181/api/catalog", &uri)
        .replace("<client_id>", client_id)
        .replace("<client_secret>", client_secret)
        .replace("<catalog name>", &get("TESTBED_VENDING_WAREHOUSE"))
        .replace("<job name>_topics.customers", &job.table(&topic));
    assert!(!sql.contains('<'), "every placeholder filled: {sql}");
    let rows = run_python(RUN_DUCKDB, &[], &sql);
    assert_eq!(
        customers_of(&rows),
        latest,
        "one row per customer, the latest"
    );
}

/// Creates a Trino catalog from `properties` lines (`connector.name` names
/// the connector), runs `query` against it, drops it; the rows as JSON.
const RUN_TRINO: &str = r##"
import json, os, secrets, sys
sys.path.insert(0, "scripts/readers")
import trino_client
props = {}
for line in sys.stdin.read().splitlines():
    line = line.strip()
    if line and not line.startswith("#"):
        k, v = line.split("=", 1)
        props[k.strip()] = v.strip()
connector = props.pop("connector.name")
name = "recipe_" + secrets.token_hex(4)
server = os.environ["TESTBED_TRINO_URL"]
def lit(v): return "'" + v.replace("'", "''") + "'"
with_ = ", ".join('"%s" = %s' % (k, lit(v)) for k, v in props.items())
trino_client.execute('CREATE CATALOG "%s" USING %s WITH (%s)' % (name, connector, with_), server)
try:
    cols, rows = trino_client.execute(sys.argv[1].replace("<catalog>", name), server)
    names = [c["name"] for c in cols]
    for row in rows:
        print(json.dumps(dict(zip(names, row))))
finally:
    trino_client.execute('DROP CATALOG IF EXISTS "%s"' % name, server)
"##;

#[test]
fn trino_catalog_recipe_reads_a_synced_upsert_table() {
    let topic = unique_name("customers");
    create_topic(&topic, 1);
    let latest = produce_customers(&topic);
    let streams =
        format!("[[streams]]\ntopic = \"{topic}\"\nmode = \"upsert\"\ndedup_keys = [\"id\"]\n");
    let job = crate::support::Job::new(crate::support::Catalog::Seaweed, &[&topic], "", &streams);
    job.sync();
    let credential = get("TESTBED_SEAWEED_CREDENTIAL");
    let (client_id, client_secret) = credential.split_once(':').unwrap();
    let uri = get("TESTBED_SEAWEED_URI");
    let properties = book_recipe("trino-rest")
        .replace("http://127.0.0.1:8181", &uri)
        .replace("lakehouse", &get("TESTBED_SEAWEED_WAREHOUSE"))
        .replace("<client id>", client_id)
        .replace("<client secret>", client_secret)
        .replace("http://127.0.0.1:8333", &get("TESTBED_S3_ENDPOINT"))
        .replace("<key>", &get("TESTBED_S3_ACCESS_KEY"))
        .replace("<secret>", &get("TESTBED_S3_SECRET_KEY"));
    assert!(
        !properties.contains('<'),
        "every placeholder filled: {properties}"
    );
    let query = format!(
        "SELECT id, name, city FROM \"<catalog>\".{} ORDER BY id",
        job.table(&topic)
    );
    let rows = run_python(RUN_TRINO, &[&query], &properties);
    assert_eq!(
        customers_of(&rows),
        latest,
        "one row per customer, the latest"
    );
}
