//! Tests of the pieces: secrets, assembling and splitting job files.

mod round_trip;

use super::job_toml::unescape_literal;
use super::*;
use serde_json::json;
use std::path::Path;
use topicberg_core::JobConfig;

fn piece(v: Value) -> Piece {
    serde_json::from_value(v).unwrap()
}

#[test]
fn redact_and_merge_keep_secrets_write_only() {
    let stored = piece(json!({"bootstrap_servers": "b:1", "sasl_password": "s3cr3t"}));
    let shown = redact(PieceKind::Source, &stored);
    assert_eq!(shown["sasl_password"], json!({"set": true}));
    assert!(!serde_json::to_string(&shown).unwrap().contains("s3cr3t"));
    let kept = merge_secrets(PieceKind::Source, Some(&stored), shown.clone()).unwrap();
    assert_eq!(kept["sasl_password"], "s3cr3t");
    let left_out = piece(json!({"bootstrap_servers": "b:1", "sasl_username": "u"}));
    let kept = merge_secrets(PieceKind::Source, Some(&stored), left_out).unwrap();
    assert_eq!(kept["sasl_password"], "s3cr3t");
    let cleared = piece(json!({"bootstrap_servers": "b:2", "sasl_password": null}));
    let cleared = merge_secrets(PieceKind::Source, Some(&stored), cleared).unwrap();
    assert!(!cleared.contains_key("sasl_password"));
}

#[test]
fn a_password_in_a_url_is_shown_redacted_and_kept_on_update() {
    let stored = piece(json!({"catalog": "rest", "uri": "http://u:pw9@h/c", "warehouse": "w"}));
    let shown = redact(PieceKind::Destination, &stored);
    assert_eq!(shown["uri"], "http://u:***@h/c");
    let kept = merge_secrets(PieceKind::Destination, Some(&stored), shown.clone()).unwrap();
    assert_eq!(kept["uri"], "http://u:pw9@h/c");
    let changed = piece(json!({"catalog": "rest", "uri": "http://h2/c", "warehouse": "w"}));
    let changed = merge_secrets(PieceKind::Destination, Some(&stored), changed).unwrap();
    assert_eq!(changed["uri"], "http://h2/c");
}

#[test]
fn assemble_split_round_trip_with_placeholders() {
    let source = piece(json!({
        "bootstrap_servers": "b:1", "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "PLAIN", "sasl_username": "u", "sasl_password": "p${x}",
        "topic_pattern": "^(a|b)$"
    }));
    let destination = piece(json!({"catalog": "sql", "path": "wh"}));
    let streams = vec![piece(
        json!({"topic": "a", "mode": "upsert", "dedup_keys": ["id"]}),
    )];
    let engines = vec!["spark".to_string()];
    let job = JobPieces {
        name: "j1",
        target_engines: &engines,
        namespace: Some("ns1"),
        source: &source,
        destination: &destination,
        sync: &Piece::new(),
        streams: &streams,
        maintain: &Piece::new(),
    };
    let exported = assemble_job_toml(&job, Secrets::Placeholders).unwrap();
    assert!(
        exported.contains("${TOPICBERG_SOURCE_SASL_PASSWORD}"),
        "{exported}"
    );
    assert!(!exported.contains("p${x}"));
    let split = split_job_toml(&exported).unwrap();
    assert!(!split.source.contains_key("sasl_password"));
    assert_eq!(split.namespace.as_deref(), Some("ns1"));
    assert_eq!(split.streams, streams);

    let dir = Path::new("/data");
    let real = assemble_job_toml(&job, Secrets::Real { data_dir: dir }).unwrap();
    let config = JobConfig::from_toml_str(&real, |_| None).unwrap();
    assert_eq!(
        config.source.sasl_password.as_ref().unwrap().expose(),
        "p${x}"
    );
    assert_eq!(config.namespace(), "ns1");
    assert_eq!(
        config.destination.path.as_deref(),
        Some(Path::new("/data/wh"))
    );
    assert_eq!(config.sync.state_dir, Path::new("/data/state/j1"));
}

#[test]
fn a_stored_secret_is_not_kept_when_its_address_changes() {
    let stored = piece(
        json!({"catalog": "rest", "uri": "http://a/c", "warehouse": "w",
        "credential": "id:s3cr3t", "s3_endpoint": "http://s3", "s3_secret_key": "k"}),
    );
    let mut moved = redact(PieceKind::Destination, &stored);
    moved.insert("uri".into(), json!("http://evil/c"));
    let e = merge_secrets(PieceKind::Destination, Some(&stored), moved.clone()).unwrap_err();
    assert_eq!(e.problems.len(), 1, "{e:?}");
    assert!(
        e.message.contains("destination.credential: uri changed"),
        "{}",
        e.message
    );
    moved.insert("credential".into(), json!("id:new"));
    let merged = merge_secrets(PieceKind::Destination, Some(&stored), moved).unwrap();
    assert_eq!(merged["credential"], "id:new");
    assert_eq!(
        merged["s3_secret_key"], "k",
        "its own address did not change"
    );
    let mut left_out = stored.clone();
    left_out.remove("s3_secret_key");
    left_out.insert("s3_endpoint".into(), json!("http://other"));
    let e = merge_secrets(PieceKind::Destination, Some(&stored), left_out).unwrap_err();
    assert!(
        e.message
            .contains("destination.s3_secret_key: s3_endpoint changed"),
        "{}",
        e.message
    );
    assert!(!format!("{e:?}").contains("s3cr3t"));
}

#[test]
fn strings_are_written_literally_and_references_refused_on_import() {
    let source = piece(json!({"bootstrap_servers": "${HOME}:9092", "topic_pattern": "^a$"}));
    let job = JobPieces {
        name: "j${X}",
        target_engines: &[],
        namespace: Some("n1"),
        source: &source,
        destination: &Piece::new(),
        sync: &Piece::new(),
        streams: &[],
        maintain: &Piece::new(),
    };
    let text = assemble_job_toml(&job, Secrets::Placeholders).unwrap();
    let config = JobConfig::from_toml_str(&text, |_| Some("FILLED".into())).unwrap();
    assert_eq!(config.source.bootstrap_servers, "${HOME}:9092");
    assert_eq!(config.name, "j${X}");
    let split = split_job_toml(&text).unwrap();
    assert_eq!(split.source["bootstrap_servers"], "${HOME}:9092");
    assert_eq!(split.name, "j${X}");
    assert_eq!(split.namespace.as_deref(), Some("n1"));
    let e = split_job_toml(
        "name = \"j\"\n[source]\nbootstrap_servers = \"${KAFKA}:9092\"\ntopic_pattern = \"a\"\n",
    )
    .unwrap_err();
    assert!(
        e.message.contains("source.bootstrap_servers: ${KAFKA}"),
        "{}",
        e.message
    );
    assert_eq!(unescape_literal("a$${b$$${c").unwrap(), "a${b$${c");
}

#[test]
fn validate_piece_reports_only_its_own_fields() {
    let ok = piece(json!({"bootstrap_servers": "b:1"}));
    validate_piece(PieceKind::Source, &ok).unwrap();
    let bad = piece(json!({"bootstrap_servers": "b:1", "sasl_pasword": "x"}));
    let e = validate_piece(PieceKind::Source, &bad).unwrap_err();
    assert!(e.message.contains("sasl_pasword"), "{}", e.message);
    assert!(!e.message.contains("x\""), "{}", e.message);
    let sasl = piece(json!({"bootstrap_servers": "b:1", "security_protocol": "SASL_PLAINTEXT"}));
    let e = validate_piece(PieceKind::Source, &sasl).unwrap_err();
    assert!(e.message.contains("source.sasl_mechanism"), "{}", e.message);
    let dest = piece(json!({"catalog": "rest"}));
    let e = validate_piece(PieceKind::Destination, &dest).unwrap_err();
    assert!(e.message.contains("destination.uri"), "{}", e.message);
}

#[test]
fn a_secret_of_the_wrong_type_is_refused_without_its_value() {
    for value in [
        json!(739152864),
        json!(["a739152864"]),
        json!({"x": "739152864"}),
    ] {
        let source = piece(json!({"bootstrap_servers": "b:1", "sasl_password": value}));
        let e = validate_piece(PieceKind::Source, &source).unwrap_err();
        assert!(!format!("{e:?}").contains("739152864"), "{e:?}");
        assert!(
            e.message.contains("must be a quoted string"),
            "{}",
            e.message
        );
        let dest = piece(
            json!({"catalog": "rest", "uri": "http://h", "warehouse": "w",
            "s3_secret_key": value}),
        );
        let e = validate_piece(PieceKind::Destination, &dest).unwrap_err();
        assert!(!format!("{e:?}").contains("739152864"), "{e:?}");
    }
}

#[test]
fn the_registry_password_is_write_only_and_exported_as_a_placeholder() {
    let stored = piece(json!({
        "bootstrap_servers": "b:1", "topic_pattern": "^orders$",
        "schema_registry_url": "https://sr:8081",
        "schema_registry_username": "APIKEY",
        "schema_registry_password": "sr-s3cr3t",
        "schema_registry_ca_pem": "-----BEGIN CERTIFICATE-----\nMIIB\n",
    }));
    validate_piece(PieceKind::Source, &stored).unwrap();
    let shown = redact(PieceKind::Source, &stored);
    assert_eq!(shown["schema_registry_password"], json!({"set": true}));
    assert_eq!(shown["schema_registry_username"], "APIKEY");
    assert!(!serde_json::to_string(&shown).unwrap().contains("sr-s3cr3t"));
    let kept = merge_secrets(PieceKind::Source, Some(&stored), shown).unwrap();
    assert_eq!(
        kept, stored,
        "a form sending back what it was shown keeps it all"
    );

    let streams = vec![piece(
        json!({"topic": "orders", "value_format": "avro", "key_format": "json"}),
    )];
    let job = JobPieces {
        name: "j",
        target_engines: &[],
        namespace: None,
        source: &stored,
        destination: &Piece::new(),
        sync: &Piece::new(),
        streams: &streams,
        maintain: &Piece::new(),
    };
    let exported = assemble_job_toml(&job, Secrets::Placeholders).unwrap();
    assert!(!exported.contains("sr-s3cr3t"), "{exported}");
    assert!(
        exported.contains("${TOPICBERG_SOURCE_SCHEMA_REGISTRY_PASSWORD}"),
        "{exported}"
    );
    let split = split_job_toml(&exported).unwrap();
    assert!(!split.source.contains_key("schema_registry_password"));
    assert_eq!(split.source["schema_registry_url"], "https://sr:8081");
    assert_eq!(
        split.source["schema_registry_ca_pem"],
        stored["schema_registry_ca_pem"]
    );
    assert_eq!(split.streams, streams, "the formats survive export/import");

    let mut by_path = stored.clone();
    by_path.insert("schema_registry_ca_pem".into(), json!("certs/sr.pem"));
    let job = JobPieces {
        source: &by_path,
        ..job
    };
    let real = assemble_job_toml(
        &job,
        Secrets::Real {
            data_dir: Path::new("/data"),
        },
    );
    let real = real.unwrap();
    assert!(
        real.contains("schema_registry_ca_pem = \"/data/certs/sr.pem\""),
        "{real}"
    );
    assert!(
        real.contains("schema_registry_password = \"sr-s3cr3t\""),
        "{real}"
    );
}

#[test]
fn a_registry_url_with_a_password_is_refused_and_shown_redacted() {
    let source = piece(json!({
        "bootstrap_servers": "b:1",
        "schema_registry_url": "https://key:pw77@sr:8081",
    }));
    let e = validate_piece(PieceKind::Source, &source).unwrap_err();
    assert!(
        e.message.contains("source.schema_registry_url"),
        "{}",
        e.message
    );
    assert!(!e.message.contains("pw77"), "{}", e.message);
    let shown = redact(PieceKind::Source, &source);
    assert_eq!(shown["schema_registry_url"], "https://key:***@sr:8081");
}

#[test]
fn the_client_key_and_oauth_secret_are_write_only_and_exported_as_placeholders() {
    let key = "-----BEGIN PRIVATE KEY-----\nkey-s3cr3t\n-----END PRIVATE KEY-----\n";
    let stored = piece(json!({
        "bootstrap_servers": "b:9094", "topic_pattern": "^orders$",
        "security_protocol": "SASL_SSL", "sasl_mechanism": "OAUTHBEARER",
        "oauth_token_endpoint": "https://idp/token", "oauth_client_id": "topicberg",
        "oauth_client_secret": "oauth-s3cr3t", "oauth_scope": "kafka",
        "ssl_certificate_pem": "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
        "ssl_key_pem": key, "ssl_verify_hostname": false,
    }));
    validate_piece(PieceKind::Source, &stored).unwrap();
    let shown = redact(PieceKind::Source, &stored);
    assert_eq!(shown["ssl_key_pem"], json!({"set": true}));
    assert_eq!(shown["oauth_client_secret"], json!({"set": true}));
    let text = serde_json::to_string(&shown).unwrap();
    assert!(
        !text.contains("key-s3cr3t") && !text.contains("oauth-s3cr3t"),
        "{text}"
    );
    let kept = merge_secrets(PieceKind::Source, Some(&stored), shown.clone()).unwrap();
    assert_eq!(
        kept, stored,
        "a form sending back what it was shown keeps it all"
    );
    // A secret does not follow its endpoint to another address.
    let mut moved = shown;
    moved.insert(
        "oauth_token_endpoint".into(),
        json!("https://elsewhere/token"),
    );
    assert!(merge_secrets(PieceKind::Source, Some(&stored), moved).is_err());

    let job = JobPieces {
        name: "j",
        target_engines: &[],
        namespace: None,
        source: &stored,
        destination: &Piece::new(),
        sync: &Piece::new(),
        streams: &[],
        maintain: &Piece::new(),
    };
    let exported = assemble_job_toml(&job, Secrets::Placeholders).unwrap();
    assert!(!exported.contains("key-s3cr3t"), "{exported}");
    assert!(!exported.contains("oauth-s3cr3t"), "{exported}");
    assert!(
        exported.contains("${TOPICBERG_SOURCE_SSL_KEY_PEM}"),
        "{exported}"
    );
    assert!(
        exported.contains("${TOPICBERG_SOURCE_OAUTH_CLIENT_SECRET}"),
        "{exported}"
    );
    let split = split_job_toml(&exported).unwrap();
    assert!(!split.source.contains_key("ssl_key_pem"));
    assert_eq!(
        split.source["ssl_certificate_pem"],
        stored["ssl_certificate_pem"]
    );
    assert_eq!(split.source["ssl_verify_hostname"], false);
    assert_eq!(split.source["oauth_token_endpoint"], "https://idp/token");
    assert_eq!(split.source["oauth_scope"], "kafka");
}
