//! Topics whose names make the same table name (`a.b-c` and `a_b_c` both
//! become `a_b_c`): refused before anything is read or written, by `sync`,
//! `check` and `discover`, naming both topics and the fix.

use crate::support::{create_topic, produce, Catalog, Job};
use crate::testbed::unique_name;

#[test]
fn topics_that_sanitise_to_one_table_are_refused_before_anything_is_written() {
    let base = unique_name("collide");
    let dotted = format!("{base}.b-c");
    let underscored = format!("{base}_b_c");
    for topic in [&dotted, &underscored] {
        create_topic(topic, 1);
        produce(topic, &[("1".into(), r#"{"id":1}"#.into())]);
    }
    let job = Job::new(Catalog::Seaweed, &[&dotted, &underscored], "", "");
    for command in ["sync", "check", "discover"] {
        let out = job.run(command, &[], &[]);
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!out.status.success(), "{command} must refuse:\n{text}");
        assert!(
            text.contains(&format!(
                "topics \"{dotted}\" and \"{underscored}\" would both write table \"{underscored}\""
            )),
            "{command}:\n{text}"
        );
        assert!(text.contains("[[streams]] entry"), "{command}:\n{text}");
    }
    // Nothing was created: the sync refused before its first table.
    let read = crate::support::try_read("duckdb", Catalog::Seaweed, &job.table(&underscored));
    assert_eq!(read.status.code(), Some(4), "the table must not exist");

    // With a table of its own for one of them, both sync.
    job.append(&format!(
        "[[streams]]\ntopic = \"{dotted}\"\ntable = \"{base}_dotted\"\n"
    ));
    let report = job.sync();
    let tables: Vec<&str> = report["tables"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["table"].as_str().unwrap())
        .collect();
    assert_eq!(tables.len(), 2, "{report}");
}
