//! `[source]`'s security settings: mutual TLS (certificate and key, as
//! text or files), the host name check, OAUTHBEARER, each refused with how
//! to fix it, no secret shown.

use super::*;

const BASE: &str = r#"
name = "job"
[source]
bootstrap_servers = "127.0.0.1:9093"
topic_pattern = "^orders$"
"#;

const KEY: &str = "-----BEGIN PRIVATE KEY-----\nkey-material-8861\n-----END PRIVATE KEY-----\n";
const CERT: &str = "-----BEGIN CERTIFICATE-----\nMIIC\n-----END CERTIFICATE-----\n";

fn env(name: &str) -> Option<String> {
    match name {
        "OAUTH_SECRET" => Some("oauth-secret-5523".into()),
        "CLIENT_KEY" => Some(KEY.into()),
        _ => None,
    }
}

fn load(source: &str) -> Result<JobConfig, ConfigError> {
    JobConfig::from_toml_str(&format!("{BASE}{source}\n"), env)
}

fn problems(source: &str) -> Vec<String> {
    match load(source) {
        Err(ConfigError::Invalid { problems, .. }) => {
            problems.iter().map(ToString::to_string).collect()
        }
        Err(other) => panic!("expected validation problems, got: {other}"),
        Ok(_) => panic!("expected validation problems, the file loaded"),
    }
}

#[track_caller]
fn one_problem(source: &str, field: &str, needle: &str) {
    let found = problems(source);
    assert_eq!(found.len(), 1, "{found:#?}");
    assert!(
        found[0].starts_with(&format!("{field}: ")) && found[0].contains(needle),
        "{found:#?} should be on {field} and mention {needle:?}"
    );
    for secret in ["oauth-secret-5523", "key-material-8861"] {
        assert!(!found[0].contains(secret), "{found:#?}");
    }
}

#[test]
fn oauthbearer_loads_with_its_secret_from_the_environment() {
    let c = load(
        "security_protocol = \"SASL_SSL\"\nsasl_mechanism = \"OAUTHBEARER\"\n\
         oauth_token_endpoint = \"https://idp.example.com/oauth2/token\"\n\
         oauth_client_id = \"topicberg\"\noauth_client_secret = \"${OAUTH_SECRET}\"\n\
         oauth_scope = \"kafka\"\n",
    )
    .unwrap();
    let s = &c.source;
    assert_eq!(s.sasl_mechanism, Some(SaslMechanism::OAuthBearer));
    assert_eq!(s.oauth_client_id.as_deref(), Some("topicberg"));
    assert_eq!(
        s.oauth_client_secret.as_ref().map(|x| x.expose()),
        Some("oauth-secret-5523")
    );
    assert!(!format!("{c:?}").contains("oauth-secret-5523"));
    assert!(
        s.ssl_verify_hostname,
        "the host name check is on by default"
    );
}

#[test]
fn oauthbearer_needs_its_endpoint_and_client_and_no_password() {
    let sasl = "security_protocol = \"SASL_SSL\"\nsasl_mechanism = \"OAUTHBEARER\"\n";
    let found = problems(sasl);
    assert_eq!(found.len(), 3, "{found:#?}");
    assert!(found[0].starts_with("source.oauth_token_endpoint: is required"));
    assert!(found[1].starts_with("source.oauth_client_id: is required"));
    assert!(found[2].starts_with("source.oauth_client_secret: is required"));
    let complete = "oauth_token_endpoint = \"https://idp/token\"\noauth_client_id = \"c\"\n\
                    oauth_client_secret = \"${OAUTH_SECRET}\"\n";
    one_problem(
        &format!("{sasl}{complete}sasl_username = \"u\"\n"),
        "source.sasl_mechanism",
        "not with sasl_username",
    );
    one_problem(
        &format!(
            "{sasl}{}",
            complete.replace("https://idp/token", "idp/token")
        ),
        "source.oauth_token_endpoint",
        "is not an http:// or https:// URL",
    );
    one_problem(
        &format!("security_protocol = \"SASL_SSL\"\nsasl_mechanism = \"PLAIN\"\nsasl_username = \"u\"\nsasl_password = \"p\"\n{complete}"),
        "source.sasl_mechanism",
        "set sasl_mechanism = \"OAUTHBEARER\"",
    );
}

#[test]
fn mutual_tls_needs_certificate_and_key_together_over_tls() {
    let tls = "security_protocol = \"SSL\"\n";
    one_problem(
        &format!("{tls}ssl_certificate_pem = '''{CERT}'''\n"),
        "source.ssl_key_pem",
        "is required with ssl_certificate_pem",
    );
    one_problem(
        &format!("{tls}ssl_key_pem = \"${{CLIENT_KEY}}\"\n"),
        "source.ssl_certificate_pem",
        "is required with ssl_key_pem",
    );
    one_problem(
        "ssl_verify_hostname = false\n",
        "source.ssl_verify_hostname",
        "does not use TLS",
    );
    let c = load(&format!(
        "{tls}ssl_certificate_pem = '''{CERT}'''\nssl_key_pem = \"${{CLIENT_KEY}}\"\nssl_verify_hostname = false\n"
    ))
    .unwrap();
    assert_eq!(c.source.ssl_certificate_pem.as_deref(), Some(CERT));
    assert!(!c.source.ssl_verify_hostname);
    assert!(!format!("{c:?}").contains("key-material-8861"));
}

#[test]
fn mutual_tls_files_load_relative_to_the_job_file_and_a_bad_key_is_not_quoted() {
    let dir = std::env::temp_dir().join(format!("tb-mtls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("client.crt"), CERT).unwrap();
    std::fs::write(dir.join("client.key"), KEY).unwrap();
    let job = dir.join("job.toml");
    let text = format!(
        "{BASE}security_protocol = \"SSL\"\nssl_certificate_pem = \"client.crt\"\nssl_key_pem = \"client.key\"\n"
    );
    std::fs::write(&job, &text).unwrap();
    let c = JobConfig::load(&job).unwrap();
    assert_eq!(c.source.ssl_certificate_pem.as_deref(), Some(CERT));
    assert_eq!(c.source.ssl_key_pem.as_ref().map(|k| k.expose()), Some(KEY));

    std::fs::write(&job, text.replace("client.key", "key-material-8861.pem")).unwrap();
    let err = JobConfig::load(&job).unwrap_err().to_string();
    assert!(
        err.contains("source.ssl_key_pem: is neither PEM text"),
        "{err}"
    );
    assert!(!err.contains("key-material-8861"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}
