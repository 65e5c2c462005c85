//! The delete format and format version `resolve_delete_format` chooses
//! for each set of target engines, and the combinations it refuses.

use super::*;
use DeleteFormat::{Dv, Equality, Position};
use TargetEngine::*;

fn engines(names: &[&str]) -> Vec<EngineTarget> {
    names
        .iter()
        .map(|n| EngineTarget::parse(n).unwrap())
        .collect()
}

fn auto(names: &[&str]) -> Result<ResolvedUpsert, DeleteFormatError> {
    resolve_delete_format(&engines(names), None, None)
}

#[test]
fn the_seeds_first_run_gets_position_deletes_on_v2() {
    let r = auto(&["spark", "duckdb", "trino"]).unwrap();
    assert_eq!(
        (r.delete_format, r.format_version),
        (Position, FormatVersion::V2)
    );
    assert!(r.reason.contains("spark, trino, duckdb"), "{}", r.reason);
}

#[test]
fn databricks_implies_deletion_vectors_on_v3() {
    let r = auto(&["databricks", "duckdb", "spark"]).unwrap();
    assert_eq!((r.delete_format, r.format_version), (Dv, FormatVersion::V3));
    assert!(
        r.reason.contains("databricks reads no other delete format"),
        "{}",
        r.reason
    );
    let alone = auto(&["databricks"]).unwrap();
    assert_eq!(
        (alone.delete_format, alone.format_version),
        (Dv, FormatVersion::V3)
    );
}

#[test]
fn no_engines_means_position_deletes_on_v2() {
    let r = auto(&[]).unwrap();
    assert_eq!(
        (r.delete_format, r.format_version),
        (Position, FormatVersion::V2)
    );
    assert!(r.reason.contains("no target_engines"), "{}", r.reason);
    let v3 = resolve_delete_format(&[], None, Some(3)).unwrap();
    assert_eq!(
        (v3.delete_format, v3.format_version),
        (Dv, FormatVersion::V3)
    );
}

#[test]
fn format_version_3_asks_for_deletion_vectors_when_all_read_them() {
    let r = resolve_delete_format(&engines(&["spark", "trino"]), None, Some(3)).unwrap();
    assert_eq!((r.delete_format, r.format_version), (Dv, FormatVersion::V3));
    let v2 = resolve_delete_format(&engines(&["spark", "trino"]), None, Some(2)).unwrap();
    assert_eq!(
        (v2.delete_format, v2.format_version),
        (Position, FormatVersion::V2)
    );
}

#[test]
fn databricks_and_athena_share_no_format() {
    let e = auto(&["databricks", "athena"]).unwrap_err().to_string();
    assert!(e.contains("no delete format"), "{e}");
    assert!(
        e.contains("databricks lacks position deletes (v2) and equality deletes"),
        "{e}"
    );
    assert!(e.contains("athena lacks deletion vectors (v3)"), "{e}");
    assert!(e.contains("remove databricks or athena"), "{e}");
    // An engine that reads everything is not blamed.
    let e = auto(&["spark", "databricks", "athena"])
        .unwrap_err()
        .to_string();
    assert!(!e.contains("spark lacks"), "{e}");
}

#[test]
fn databricks_cannot_live_on_format_v2() {
    let e = resolve_delete_format(&[Databricks.into(), Spark.into()], None, Some(2))
        .unwrap_err()
        .to_string();
    assert!(e.contains("on format v2"), "{e}");
    assert!(e.contains("databricks lacks"), "{e}");
    assert!(
        e.contains("remove destination.format_version to get deletion vectors on format v3"),
        "{e}"
    );
    // Athena reads no v3 table, so format_version = 3 leaves it nothing.
    let e = resolve_delete_format(&[Athena.into()], None, Some(3))
        .unwrap_err()
        .to_string();
    assert!(e.contains("athena lacks deletion vectors (v3) and equality deletes (v3)"));
}

#[test]
fn an_explicit_format_an_engine_cannot_read_is_an_error() {
    let e = resolve_delete_format(&[Databricks.into(), Spark.into()], Some(Equality), None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("delete_format \"equality\""), "{e}");
    assert!(e.contains("cannot be read by databricks"), "{e}");
    assert!(!e.contains("spark ("), "{e}");
    assert!(e.contains("set delete_format = \"dv\""), "{e}");

    let e = resolve_delete_format(&[Trino.into(), Athena.into()], Some(Dv), None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("cannot be read by athena"), "{e}");
    assert!(e.contains("set delete_format = \"position\""), "{e}");

    let e = resolve_delete_format(&[Snowflake.into(), Pyiceberg.into()], Some(Equality), None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("snowflake"), "{e}");
    assert!(e.contains("pyiceberg"), "{e}");
    assert!(e.contains("remove snowflake, pyiceberg"), "{e}");
}

#[test]
fn an_explicit_format_all_engines_read_is_kept() {
    let r = resolve_delete_format(
        &[Spark.into(), Flink.into(), Trino.into()],
        Some(Equality),
        None,
    )
    .unwrap();
    assert_eq!(
        (r.delete_format, r.format_version),
        (Equality, FormatVersion::V2)
    );
    assert!(r.reason.contains("as set"), "{}", r.reason);
    let r = resolve_delete_format(&[Spark.into(), Duckdb.into()], Some(Dv), None).unwrap();
    assert_eq!((r.delete_format, r.format_version), (Dv, FormatVersion::V3));
    let r = resolve_delete_format(&[Spark.into()], Some(Equality), Some(3)).unwrap();
    assert_eq!(
        (r.delete_format, r.format_version),
        (Equality, FormatVersion::V3)
    );
    let r = resolve_delete_format(&[], Some(Position), Some(2)).unwrap();
    assert_eq!(
        (r.delete_format, r.format_version),
        (Position, FormatVersion::V2)
    );
}

#[test]
fn an_explicit_version_that_contradicts_the_format_is_an_error() {
    let e = resolve_delete_format(&[], Some(Dv), Some(2))
        .unwrap_err()
        .to_string();
    assert!(e.contains("needs format_version = 3"), "{e}");
    let e = resolve_delete_format(&[], Some(Position), Some(3))
        .unwrap_err()
        .to_string();
    assert!(e.contains("cannot be added to format v3 tables"), "{e}");
    let e = resolve_delete_format(&[], None, Some(4))
        .unwrap_err()
        .to_string();
    assert!(e.contains("format_version is 4"), "{e}");
}

#[test]
fn equality_deletes_only_when_nothing_else_is_shared() {
    // No real engine set needs it today; the order still puts it last.
    for set in TargetEngine::ALL
        .iter()
        .map(|e| vec![EngineTarget::from(*e)])
    {
        let r = resolve_delete_format(&set, None, None).unwrap();
        assert_ne!(r.delete_format, Equality, "{set:?}");
    }
}

#[test]
fn duplicates_and_order_do_not_matter() {
    let a = auto(&["trino", "spark", "trino", "duckdb"]).unwrap();
    let b = auto(&["duckdb", "spark", "trino"]).unwrap();
    assert_eq!(a, b);
}

#[test]
fn a_job_aimed_at_trino_476_or_listing_daft_or_chdb_gets_position_deletes() {
    for set in [
        &["trino<480"][..],
        &["trino=476", "spark"],
        &["daft"],
        &["clickhouse"],
        &["polars", "datafusion", "daft"],
    ] {
        let r = auto(set).unwrap();
        assert_eq!(
            (r.delete_format, r.format_version),
            (Position, FormatVersion::V2),
            "{set:?}"
        );
    }
    // Deletion vectors asked for, an engine that cannot read them named.
    let e = resolve_delete_format(&engines(&["trino<480"]), Some(Dv), None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("cannot be read by trino<480"), "{e}");
    let e = resolve_delete_format(&engines(&["daft", "spark"]), None, Some(3))
        .unwrap_err()
        .to_string();
    assert!(e.contains("daft lacks"), "{e}");
    assert!(e.contains("remove daft"), "{e}");
    // Newer releases that read them may have them.
    let r = resolve_delete_format(&engines(&["trino>=480", "polars"]), None, Some(3)).unwrap();
    assert_eq!(r.delete_format, Dv);
    let r = auto(&["databricks", "clickhouse>=26.10"]).unwrap();
    assert_eq!(r.delete_format, Dv);
    let e = auto(&["databricks", "clickhouse"]).unwrap_err().to_string();
    assert!(e.contains("clickhouse lacks deletion vectors (v3)"), "{e}");
}

#[test]
fn equality_deletes_are_refused_for_engines_that_plan_with_pyiceberg() {
    // PyIceberg, and Polars and Daft through it, refuse equality deletes
    // (sync_upsert_seeds_with_equality_deletes asserts their refusal).
    for name in ["daft", "polars", "pyiceberg"] {
        let e = resolve_delete_format(&engines(&[name, "spark"]), Some(Equality), None)
            .unwrap_err()
            .to_string();
        assert!(e.contains(&format!("cannot be read by {name} (")), "{e}");
        assert!(!e.contains("spark ("), "{e}");
        assert!(e.contains("set delete_format = \"position\""), "{e}");
    }
    // Daft reads neither equality deletes nor deletion vectors: on v3 it
    // has nothing; the error names both and how to get position deletes.
    let e = resolve_delete_format(&engines(&["daft"]), Some(Equality), Some(3))
        .unwrap_err()
        .to_string();
    assert!(e.contains("equality deletes on format v3"), "{e}");
    assert!(e.contains("cannot be read by daft"), "{e}");
    let e = resolve_delete_format(&engines(&["daft"]), None, Some(3))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("daft lacks deletion vectors (v3) and equality deletes (v3)"),
        "{e}"
    );
    // Engines that do read them keep them.
    let r = resolve_delete_format(
        &engines(&["datafusion", "clickhouse", "trino<480", "duckdb"]),
        Some(Equality),
        None,
    )
    .unwrap();
    assert_eq!(r.delete_format, Equality);
}

#[test]
fn the_matrix() {
    for e in TargetEngine::ALL.map(EngineTarget::from) {
        let s = e.support();
        // Deletion vectors only exist in v3 tables, position delete
        // files only in v2 ones.
        assert_eq!(e.reads_deletes(Dv, 3), s.deletion_vectors && s.v3);
        assert!(!e.reads_deletes(Dv, 2) && !e.reads_deletes(Position, 3));
        assert!(e.reads_format_version(2));
        assert!(!e.reads_summary().is_empty());
    }
    assert!(!EngineTarget::from(Athena).reads_format_version(3));
    assert!(!EngineTarget::from(Databricks).reads_deletes(Position, 2));
    assert!(!EngineTarget::from(Databricks).reads_deletes(Equality, 3));
    assert!(!EngineTarget::from(Snowflake).reads_deletes(Equality, 2));
    assert!(!EngineTarget::from(Pyiceberg).reads_deletes(Equality, 2));
    assert!(EngineTarget::from(Pyiceberg).reads_deletes(Dv, 3));
    assert!(EngineTarget::from(Clickhouse).reads_deletes(Equality, 2));
    assert_eq!(
        EngineTarget::from(Athena).reads_summary(),
        "reads position deletes (v2) and equality deletes, and no format v3 table"
    );
    assert_eq!(
        EngineTarget::from(Databricks).reads_summary(),
        "reads only deletion vectors (v3)"
    );
}
