//! The independent readers (DuckDB, PyIceberg, Spark) read a table that
//! PyIceberg wrote, and all print exactly the rows that were written.

use crate::testbed::{command, get, unique_name};

fn run(program: &str, args: &[&str]) -> String {
    let out = command(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running {program}: {e}"));
    assert!(
        out.status.success(),
        "{program} {args:?} failed ({}):\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8 output")
}

/// Writes a sample table with PyIceberg, then reads it with each engine.
fn readers_agree(catalog: &str, format_version: &str) {
    let python = get("TESTBED_PYTHON");
    let readers = get("TESTBED_READERS");
    let table = format!("{}.sample", unique_name("it_readers"));
    let make = format!("{readers}/make_sample_table.py");
    run(
        &python,
        &[
            &make,
            "--catalog",
            catalog,
            "--format-version",
            format_version,
            &table,
        ],
    );
    let written = run(&python, &[&make, "--print-expected"]);
    let rows = written.lines().count();
    assert!(
        rows >= 3,
        "the sample table should hold several rows, got:\n{written}"
    );

    let read = format!("{readers}/read");
    for engine in ["duckdb", "pyiceberg", "spark"] {
        let output = run(&read, &[engine, "--catalog", catalog, &table]);
        assert_eq!(
            output, written,
            "{engine} read {table} from the {catalog} catalog differently from what PyIceberg wrote"
        );
    }
}

#[test]
fn readers_agree_on_seaweed_catalog_v2_table() {
    readers_agree("seaweed", "2");
}

#[test]
fn readers_agree_on_fixture_catalog_v2_table() {
    readers_agree("fixture", "2");
}
