//! `target_engines` and upsert streams: the delete format and format
//! version each stream resolves to, and the combinations validation refuses
//! (an engine that cannot read a delete format, engines with none in common).

use super::*;

/// The delete format and format version an upsert topic resolves to.
fn upsert_plan(c: &JobConfig, topic: &str) -> (DeleteFormat, FormatVersion) {
    let table = job(c).table_for(topic);
    (table.upsert().unwrap().delete_format, table.format_version)
}

/// MINIMAL with `target_engines` and an upsert stream for "customers".
fn upsert_job(engines: &str, stream_extra: &str, rest: &str) -> String {
    format!(
        "target_engines = {engines}\n{MINIMAL}[[streams]]\ntopic = \"customers\"\nmode = \"upsert\"\n\
         dedup_keys = [\"id\"]\n{stream_extra}{rest}"
    )
}

#[test]
fn target_engines_resolve_the_delete_format_of_upsert_streams() {
    let c = load(&upsert_job(r#"["spark", "duckdb", "trino"]"#, "", "")).unwrap();
    assert_eq!(
        upsert_plan(&c, "customers"),
        (DeleteFormat::Position, FormatVersion::V2)
    );
    assert_eq!(
        job(&c).table_for("customers").format_version,
        FormatVersion::V2
    );
    // Append streams (and topics without an entry) have no plan.
    assert!(job(&c).table_for("orders").upsert().is_none());

    let c = load(&upsert_job(r#"["databricks", "duckdb", "spark"]"#, "", "")).unwrap();
    assert_eq!(
        upsert_plan(&c, "customers"),
        (DeleteFormat::Dv, FormatVersion::V3)
    );
    assert_eq!(
        job(&c).table_for("customers").format_version,
        FormatVersion::V3
    );
    // Append tables keep destination.format_version.
    assert_eq!(
        job(&c).table_for("orders").format_version,
        FormatVersion::V2
    );

    let c = load(&upsert_job("[]", "", "")).unwrap();
    assert_eq!(
        upsert_plan(&c, "customers"),
        (DeleteFormat::Position, FormatVersion::V2)
    );
}

#[test]
fn engines_without_a_common_delete_format_fail_validation() {
    one_problem(
        &upsert_job(r#"["databricks", "athena"]"#, "", ""),
        "target_engines",
        "databricks lacks position deletes (v2) and equality deletes",
    );
    let found = problems(&upsert_job(r#"["databricks", "athena"]"#, "", ""));
    assert!(
        found[0].contains("athena lacks deletion vectors"),
        "{found:#?}"
    );
    assert!(
        found[0].contains("remove databricks or athena"),
        "{found:#?}"
    );
    // Reported once however many upsert streams there are.
    one_problem(
        &upsert_job(
            r#"["databricks", "athena"]"#,
            "",
            "[[streams]]\ntopic = \"orders\"\nmode = \"upsert\"\ndedup_keys = [\"id\"]\n",
        ),
        "target_engines",
        "no delete format",
    );
    // Append streams do not care.
    load(&format!(
        "target_engines = [\"databricks\", \"athena\"]\n{MINIMAL}"
    ))
    .unwrap();
    // Databricks with format v2 has nothing to read.
    one_problem(
        &upsert_job(
            r#"["databricks", "spark"]"#,
            "",
            "[destination]\nformat_version = 2\n",
        ),
        "target_engines",
        "destination.format_version",
    );
}

#[test]
fn an_explicit_delete_format_a_target_engine_cannot_read_fails_validation() {
    one_problem(
        &upsert_job(
            r#"["databricks", "spark"]"#,
            "delete_format = \"equality\"\n",
            "",
        ),
        "streams[0].delete_format",
        "cannot be read by databricks",
    );
    one_problem(
        &upsert_job(r#"["trino", "athena"]"#, "delete_format = \"dv\"\n", ""),
        "streams[0].delete_format",
        "set delete_format = \"position\"",
    );
    // Releases and engines run here that cannot read deletion vectors.
    for engines in [r#"["trino<480"]"#, r#"["daft"]"#, r#"["clickhouse"]"#] {
        let name = engines.trim_matches(|c| "[]\"".contains(c));
        one_problem(
            &upsert_job(engines, "delete_format = \"dv\"\n", ""),
            "streams[0].delete_format",
            &format!("cannot be read by {name}"),
        );
    }
    // Equality deletes: refused by PyIceberg's planning, which Daft and
    // Polars use (sync_upsert_seeds_with_equality_deletes).
    for name in ["daft", "polars", "pyiceberg"] {
        one_problem(
            &upsert_job(
                &format!(r#"["spark", "{name}"]"#),
                "delete_format = \"equality\"\n",
                "",
            ),
            "streams[0].delete_format",
            &format!("cannot be read by {name}"),
        );
    }
    let c = load(&upsert_job(
        r#"["spark", "flink"]"#,
        "delete_format = \"equality\"\n",
        "",
    ))
    .unwrap();
    assert_eq!(
        upsert_plan(&c, "customers"),
        (DeleteFormat::Equality, FormatVersion::V2)
    );
}
