//! Property tests of [`BatchDecoder`] over generated input: arbitrary bytes,
//! JSON objects built from the table's columns with values of every JSON
//! kind, and mutations (truncated, flipped, inserted bytes) of valid
//! messages, on every table shape of [`model::tables`] in append and upsert
//! mode, rejecting or collecting unknown fields. No input may panic, and the
//! decoder must agree with the reference model after every record (see
//! `fuzz/model.rs`). `PROPTEST_CASES=n` runs more cases; the cargo-fuzz
//! target in `fuzz/` drives the same checker (see `fuzz/README.md`).

use proptest::prelude::*;

use super::*;

mod model;

/// What the model file calls the crate (the fuzz target maps it to
/// `topicberg_core`).
mod tb {
    pub use crate::*;
}

use model::{Checker, SEEDS};

/// Literal values the type rules have edges at.
const EDGE_VALUES: &[&str] = &[
    "null",
    "true",
    "false",
    "0",
    "-0",
    "-0.0",
    "1",
    "-1",
    "2147483647",
    "2147483648",
    "-2147483648",
    "-2147483649",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775808",
    "-9223372036854775809",
    "18446744073709551615",
    "18446744073709551616",
    "1e309",
    "-1e309",
    "1e-400",
    "4.9e-324",
    "1.7976931348623157e308",
    "1E2",
    "1.0",
    "1.5e3",
    "0.1",
    "123456789012345678901234567890",
    "01",
    "1.",
    ".5",
    "+1",
    "NaN",
    "Infinity",
    "\"\"",
    "\"a\"",
    "\"\\u0000\"",
    "\"\\ud83d\\ude00\"",
    "\"\\ud800\"",
    "\"\\udc00\"",
    "\"\\ud800\\u0041\"",
    "\"\\\\\\\"\\/\\b\\f\\n\\r\\t\"",
    "\"é😀\u{2028}\"",
    "\"2026-10-29T15:22:04+00:00\"",
    "\"2026-10-29T15:22:04Z\"",
    "\"2026-10-29 15:22:04\"",
    "\"2026-10-29T15:22:04.123456789-05:30\"",
    "\"2024-02-29T00:00:00z\"",
    "\"2023-02-29T00:00:00Z\"",
    "\"2026-10-29T15:22:60Z\"",
    "\"0000-01-01T00:00:00+23:59\"",
    "\"9999-12-31T23:59:59.999999-23:59\"",
    "\"2026-10-29T15:22:04\\u002B0000\"",
    "\"2026-10-29\"",
    "\"true\"",
    "\"1\"",
    "[]",
    "{}",
    "[1,\"a\",null,[{}]]",
    "{\"a\":{\"b\":[1e309]},\"a\":2}",
    "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]",
];

/// Field names no table has, or nearly has.
const OTHER_NAMES: &[&str] = &[
    "unknown",
    "ID",
    "id ",
    " id",
    "Amount",
    "_kafka",
    "_KAFKA_OFFSET",
    "x",
];

/// A JSON string literal for `s`, sometimes with every character escaped.
fn quoted(s: String, escape_all: bool) -> String {
    if !escape_all {
        return serde_json::to_string(&s).expect("strings serialise");
    }
    let mut out = String::from("\"");
    for unit in s.encode_utf16() {
        out.push_str(&format!("\\u{unit:04x}"));
    }
    out.push('"');
    out
}

fn scalar() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::sample::select(EDGE_VALUES).prop_map(str::to_owned),
        1 => any::<i64>().prop_map(|v| v.to_string()),
        1 => any::<u64>().prop_map(|v| v.to_string()),
        1 => any::<i32>().prop_map(|v| v.to_string()),
        1 => any::<f64>().prop_map(|v| format!("{v:?}")),
        1 => any::<f64>().prop_map(|v| format!("{v:e}")),
        2 => (any::<String>(), any::<bool>()).prop_map(|(s, e)| quoted(s, e)),
        1 => timestamp(),
    ]
}

/// A timestamp string anywhere in years 1970-9999, in one of the shapes
/// the parser accepts.
fn timestamp() -> impl Strategy<Value = String> {
    let shape = prop::sample::select(vec!["T", "t", " "]);
    let offset = prop::sample::select(vec!["", "Z", "z", "+05:30", "-0800", "+14"]);
    (0i64..253_402_300_800, 0u32..1_000_000, shape, offset).prop_map(|(s, us, t, off)| {
        let (y, m, d) = civil(s / 86_400);
        let (hh, mm, ss) = (s / 3600 % 24, s / 60 % 60, s % 60);
        format!("\"{y:04}-{m:02}-{d:02}{t}{hh:02}:{mm:02}:{ss:02}.{us:06}{off}\"")
    })
}

/// Year, month, day of a day count since 1970-01-01.
fn civil(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// Any JSON value as text (nested arrays and objects, duplicate keys).
fn value() -> impl Strategy<Value = String> {
    scalar().prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(|v| format!("[{}]", v.join(","))),
            prop::collection::vec(
                (prop::sample::select(vec!["a", "b", "id", ""]), inner),
                0..4
            )
            .prop_map(|v| {
                let fields: Vec<_> = v.into_iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
                format!("{{{}}}", fields.join(","))
            }),
        ]
    })
}

/// A value of column type `ty` (or null, or anything at all, sometimes).
fn typed(ty: ColumnType) -> BoxedStrategy<String> {
    let right = match ty {
        ColumnType::Long => any::<i64>().prop_map(|v| v.to_string()).boxed(),
        ColumnType::Int => any::<i32>().prop_map(|v| v.to_string()).boxed(),
        ColumnType::Double => prop_oneof![
            any::<f64>()
                .prop_filter("finite", |v| v.is_finite())
                .prop_map(|v| format!("{v:?}")),
            any::<i64>().prop_map(|v| v.to_string()),
        ]
        .boxed(),
        ColumnType::Float => prop_oneof![
            any::<f32>()
                .prop_filter("finite", |v| v.is_finite())
                .prop_map(|v| format!("{v:?}")),
            any::<f64>()
                .prop_filter("finite", |v| v.is_finite())
                .prop_map(|v| format!("{v:?}")),
            any::<i64>().prop_map(|v| v.to_string()),
        ]
        .boxed(),
        ColumnType::Boolean => any::<bool>().prop_map(|v| v.to_string()).boxed(),
        ColumnType::String => (any::<String>(), any::<bool>())
            .prop_map(|(s, e)| quoted(s, e))
            .boxed(),
        ColumnType::TimestampTz => timestamp().boxed(),
        ColumnType::Json => value().boxed(),
        other => unreachable!("JSON tables have no {other} columns"),
    };
    prop_oneof![6 => right, 1 => Just("null".to_owned()), 1 => value()].boxed()
}

/// A JSON object whose fields mostly name the table's columns, with
/// values mostly of the column's type.
fn object(columns: Vec<(String, ColumnType)>) -> impl Strategy<Value = String> {
    let metadata: Vec<String> = model::metadata_names().map(str::to_owned).collect();
    let other: Vec<String> = OTHER_NAMES
        .iter()
        .chain(&model::ALLOWED_EXTRA)
        .map(|s| s.to_string())
        .collect();
    let any_field = prop_oneof![
        prop::sample::select(metadata),
        prop::sample::select(other),
        any::<String>()
    ]
    .prop_flat_map(|n| (Just(n), value()));
    let field = if columns.is_empty() {
        any_field.boxed()
    } else {
        let column = prop::sample::select(columns).prop_flat_map(|(n, ty)| (Just(n), typed(ty)));
        prop_oneof![12 => column, 1 => any_field].boxed()
    };
    let field = (
        field,
        any::<bool>(),
        prop::sample::select(vec!["", " ", "\n\t"]),
    );
    prop::collection::vec(field, 0..10).prop_map(|fields| {
        let fields: Vec<_> = fields
            .into_iter()
            .map(|((n, v), escape, ws)| {
                let escape = escape && n.len() < 4;
                format!("{ws}{}{ws}:{ws}{v}", quoted(n, escape))
            })
            .collect();
        format!("{{{}}}", fields.join(","))
    })
}

/// A byte-level edit of a message.
#[derive(Debug, Clone)]
enum Mutation {
    Truncate(usize),
    Flip(usize, u8),
    Insert(usize, Vec<u8>),
    Remove(usize, usize),
}

fn mutate(mut bytes: Vec<u8>, edits: &[Mutation]) -> Vec<u8> {
    for edit in edits {
        let at = |i: usize| {
            if bytes.is_empty() {
                0
            } else {
                i % (bytes.len() + 1)
            }
        };
        match edit {
            Mutation::Truncate(i) => bytes.truncate(at(*i)),
            Mutation::Flip(i, mask) => {
                if !bytes.is_empty() {
                    let i = i % bytes.len();
                    bytes[i] ^= mask.max(&1);
                }
            }
            Mutation::Insert(i, b) => {
                let i = at(*i);
                bytes.splice(i..i, b.iter().copied());
            }
            Mutation::Remove(i, n) => {
                let i = at(*i);
                let end = (i + n).min(bytes.len());
                bytes.drain(i..end);
            }
        }
    }
    bytes
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let insert = prop_oneof![
        prop::collection::vec(any::<u8>(), 1..4),
        prop::sample::select(vec![
            &b"\""[..],
            b"\\",
            b"{",
            b"}",
            b",",
            b":",
            b"null",
            b"\xff",
            b"\xc3"
        ])
        .prop_map(<[u8]>::to_vec),
    ];
    prop_oneof![
        any::<usize>().prop_map(Mutation::Truncate),
        (any::<usize>(), any::<u8>()).prop_map(|(i, m)| Mutation::Flip(i, m)),
        (any::<usize>(), insert).prop_map(|(i, b)| Mutation::Insert(i, b)),
        (any::<usize>(), 1usize..8).prop_map(|(i, n)| Mutation::Remove(i, n)),
    ]
}

/// A message value: tombstone, arbitrary bytes, an object, or a mutated one.
fn message(columns: Vec<(String, ColumnType)>) -> impl Strategy<Value = Option<Vec<u8>>> {
    let valid = prop_oneof![
        2 => object(columns.clone()).prop_map(String::into_bytes),
        1 => prop::sample::select(SEEDS.to_vec()).prop_map(|s| s.as_bytes().to_vec()),
    ];
    prop_oneof![
        1 => Just(None),
        2 => prop::collection::vec(any::<u8>(), 0..48).prop_map(Some),
        1 => value().prop_map(|v| Some(v.into_bytes())),
        6 => object(columns).prop_map(|o| Some(o.into_bytes())),
        3 => (valid, prop::collection::vec(mutation(), 1..4)).prop_map(|(v, m)| Some(mutate(v, &m))),
    ]
}

/// One record and what to do after it.
#[derive(Debug, Clone)]
struct Step {
    partition: i32,
    offset: i64,
    timestamp_ms: Option<i64>,
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    /// 0: nothing, 1: finish the batch, 2: take the unknown fields.
    then: u8,
}

fn steps(columns: Vec<(String, ColumnType)>) -> impl Strategy<Value = Vec<Step>> {
    let step = (
        prop_oneof![3 => 0i32..4, 1 => any::<i32>()],
        prop_oneof![3 => 0i64..1000, 1 => any::<i64>()],
        prop_oneof![
            3 => (1_700_000_000_000i64..1_900_000_000_000).prop_map(Some),
            1 => Just(None),
            1 => any::<i64>().prop_map(Some),
        ],
        prop::option::weighted(0.8, prop::collection::vec(any::<u8>(), 0..12)),
        message(columns),
        prop_oneof![8 => Just(0u8), 1 => Just(1u8), 1 => Just(2u8)],
    )
        .prop_map(|(partition, offset, timestamp_ms, key, value, then)| Step {
            partition,
            offset,
            timestamp_ms,
            key,
            value,
            then,
        });
    prop::collection::vec(step, 1..10)
}

/// A decoder configuration and the records to feed it.
fn case() -> impl Strategy<Value = (Config, Vec<Step>)> {
    let tables = model::tables().len();
    let config = (
        0..tables,
        any::<bool>(),
        prop::collection::vec(any::<u8>(), 0..3),
        any::<bool>(),
        any::<bool>(),
        prop::sample::select(vec![Flat::Paused, Flat::Always, Flat::Never]),
    )
        .prop_map(|(table, upsert, keys, collect, allow, flat)| Config {
            table,
            upsert,
            keys,
            collect,
            allow,
            flat,
        });
    config.prop_flat_map(|config| {
        let columns = model::tables()[config.table]
            .columns()
            .iter()
            .map(|c| (c.name.clone(), c.ty.clone()))
            .collect();
        (Just(config), steps(columns))
    })
}

/// The arguments of [`model::setup`].
#[derive(Debug, Clone)]
struct Config {
    table: usize,
    upsert: bool,
    keys: Vec<u8>,
    collect: bool,
    allow: bool,
    flat: Flat,
}

/// When the decoder tries its flat JSON reader before serde.
#[derive(Debug, Clone, Copy)]
enum Flat {
    /// As in a sync: not for a while after it gave a message back.
    Paused,
    /// On every message.
    Always,
    /// Never: serde reads every message.
    Never,
}

fn run(c: &Config, steps: &[Step]) -> Checker {
    let (columns, options) = model::setup(c.table, c.upsert, &c.keys, c.collect, c.allow);
    let mut checker = match c.flat {
        // As the cargo-fuzz target makes it.
        Flat::Paused => Checker::new(columns, options),
        Flat::Always | Flat::Never => {
            let mut decoder =
                BatchDecoder::new(&columns, options.clone()).expect("valid key columns");
            match c.flat {
                Flat::Always => decoder.set_flat_pause(0, false),
                _ => decoder.set_flat_pause(u32::MAX, true),
            }
            Checker::around(decoder, columns, options)
        }
    };
    for s in steps {
        checker.append(&SourceRecord {
            topic: model::TOPIC,
            partition: s.partition,
            offset: s.offset,
            timestamp_ms: s.timestamp_ms,
            key: s.key.as_deref(),
            value: s.value.as_deref(),
            headers: Default::default(),
        });
        match s.then {
            1 => drop(checker.finish()),
            2 => checker.take_unknown_fields(),
            _ => {}
        }
    }
    checker.finish();
    checker
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(2000)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn decoder_agrees_with_the_model_on_any_input((config, steps) in case()) {
        run(&config, &steps);
    }
}

#[test]
fn the_model_accepts_the_seed_messages_in_their_tables() {
    for (table, seeds) in [(0, &SEEDS[..2]), (1, &SEEDS[2..])] {
        for (upsert, collect, allow) in [
            (false, false, false),
            (true, false, true),
            (true, true, false),
        ] {
            let steps: Vec<_> = seeds
                .iter()
                .enumerate()
                .map(|(i, s)| Step {
                    partition: 0,
                    offset: i as i64,
                    timestamp_ms: Some(T0 / 1000),
                    key: Some(b"1".to_vec()),
                    value: Some(s.as_bytes().to_vec()),
                    then: 0,
                })
                .collect();
            for flat in [Flat::Paused, Flat::Always, Flat::Never] {
                let config = Config {
                    table,
                    upsert,
                    keys: vec![0],
                    collect,
                    allow,
                    flat,
                };
                let checker = run(&config, &steps);
                assert_eq!((checker.appended, checker.failed), (seeds.len(), 0));
            }
        }
    }
}

/// Found by the fuzzer: a record that failed after widening the type of a
/// field collected from an earlier record left the wider type behind.
#[test]
fn a_failed_record_does_not_change_collected_unknown_field_types() {
    let options = DecoderOptions {
        unknown_fields: UnknownFieldPolicy::Collect,
        ..DecoderOptions::append(WRITTEN)
    };
    let mut d = BatchDecoder::new(&orders(), options).unwrap();
    d.append(&record(0, r#"{"id":1,"coupon":5}"#)).unwrap();
    for bad in [
        r#"{"coupon":"SAVE","amount":"abc"}"#,
        r#"{"coupon":1.5,"id":1,"x":[01]}"#,
        r#"{"coupon":{},"id":"#,
    ] {
        assert!(d.append(&record(1, bad)).is_err(), "{bad}");
        let fields = d.unknown_fields();
        assert_eq!(fields.len(), 1, "{bad}");
        assert_eq!(
            (fields[0].name.as_str(), fields[0].ty.clone()),
            ("coupon", Some(ColumnType::Long)),
            "{bad}"
        );
    }
    d.append(&record(2, r#"{"coupon":2.5}"#)).unwrap();
    assert_eq!(d.unknown_fields()[0].ty, Some(ColumnType::Double));
    assert_eq!(d.unknown_fields()[0].offset, 0);
}

/// Found by the fuzzer: upsert mode with `_olake_id` among the key columns
/// panicked on the first record (the id column was read for the key before
/// it had a value for the row); the decoder now refuses the options.
#[test]
fn olake_id_cannot_be_a_dedup_key_column() {
    for key_columns in [vec!["_olake_id"], vec!["id", "_olake_id"]] {
        let options = DecoderOptions {
            id_mode: IdMode::Upsert {
                key_columns: key_columns.iter().map(|k| k.to_string()).collect(),
            },
            ..DecoderOptions::append(WRITTEN)
        };
        let e = BatchDecoder::new(&orders(), options).unwrap_err();
        assert_eq!(e, DecoderConfigError::IdInKey);
        assert_eq!(
            e.to_string(),
            "_olake_id is computed from the dedup key and cannot be part of it"
        );
    }
}
