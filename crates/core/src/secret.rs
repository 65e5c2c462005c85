use std::fmt;

use serde::de::{self, Deserializer, Visitor};

/// The job file's fields that hold secrets (the last key of their path).
pub const SECRET_FIELDS: [&str; 8] = [
    "sasl_password",
    "ssl_key_pem",
    "oauth_client_secret",
    "schema_registry_password",
    "credential",
    "token",
    "s3_secret_key",
    "azure_access_key",
];

/// What a secret field says when its value is not a string: never the
/// value itself (a password written as a number is still a password).
pub(crate) const NOT_A_STRING: &str = "this secret must be a quoted string \
     (its value is not shown); write it as \"...\" or \"${VAR}\"";

/// A value that must never be printed: passwords, client secrets, tokens.
///
/// `Debug` and `Display` print `***`; the only way to the text is
/// [`Secret::expose`], which call sites use when handing the value to a
/// client library, never when formatting. Deserialising anything but a
/// string fails with a message that does not quote the value (serde's
/// usual `invalid type: integer `12345678``, would).
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl<'de> serde::Deserialize<'de> for Secret {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(SecretVisitor).map(Secret)
    }
}

/// Accepts a string; every other kind of value is refused with
/// [`NOT_A_STRING`], which leaves the value out.
struct SecretVisitor;

impl SecretVisitor {
    fn refuse<E: de::Error>(self) -> Result<String, E> {
        Err(E::custom(NOT_A_STRING))
    }
}

impl<'de> Visitor<'de> for SecretVisitor {
    type Value = String;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a quoted string")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<String, E> {
        Ok(v.to_string())
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<String, E> {
        Ok(v)
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<String, E> {
        self.refuse()
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<String, E> {
        self.refuse()
    }
    fn visit_i128<E: de::Error>(self, _: i128) -> Result<String, E> {
        self.refuse()
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<String, E> {
        self.refuse()
    }
    fn visit_u128<E: de::Error>(self, _: u128) -> Result<String, E> {
        self.refuse()
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<String, E> {
        self.refuse()
    }
    fn visit_bytes<E: de::Error>(self, _: &[u8]) -> Result<String, E> {
        self.refuse()
    }
    fn visit_unit<E: de::Error>(self) -> Result<String, E> {
        self.refuse()
    }
    fn visit_seq<A: de::SeqAccess<'de>>(self, _: A) -> Result<String, A::Error> {
        self.refuse()
    }
    fn visit_map<A: de::MapAccess<'de>>(self, _: A) -> Result<String, A::Error> {
        self.refuse()
    }
    fn visit_enum<A: de::EnumAccess<'de>>(self, _: A) -> Result<String, A::Error> {
        self.refuse()
    }
}

/// In the job file's schema a secret is a string marked `writeOnly`: the
/// service's forms take it as a password that is never shown again.
impl schemars::JsonSchema for Secret {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Secret".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "writeOnly": true,
        })
    }
}

impl Secret {
    /// Wraps a secret value.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The secret text, for handing to a client library.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// The secret text, consumed (for wrapping it in another secret type).
    pub fn into_exposed(self) -> String {
        self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

impl From<&str> for Secret {
    fn from(value: &str) -> Self {
        Self::new(value)
    }
}

impl From<String> for Secret {
    fn from(value: String) -> Self {
        Self(value)
    }
}

#[cfg(test)]
mod tests {
    use super::Secret;

    #[test]
    fn secret_never_formats_its_value() {
        let s = Secret::new("hunter2");
        assert_eq!(format!("{s}"), "***");
        assert_eq!(format!("{s:?}"), "Secret(***)");
        assert!(!format!("{:?}", Some(&s)).contains("hunter2"));
        assert_eq!(s.expose(), "hunter2");
    }

    #[test]
    fn a_secret_that_is_not_a_string_is_refused_without_its_value() {
        #[derive(Debug, serde::Deserialize)]
        struct Holder {
            #[allow(dead_code)]
            pw: Secret,
        }
        for value in [
            "987654321",
            "true",
            "[\"a987654321\"]",
            "{\"x\": \"a987654321\"}",
            "9876543.21",
        ] {
            let json = format!("{{\"pw\": {value}}}");
            let err = serde_json::from_str::<Holder>(&json)
                .unwrap_err()
                .to_string();
            assert!(!err.contains("987654"), "{err}");
            assert!(err.contains("quoted string"), "{err}");
            let toml_text = format!("pw = {}", value.replace("\": ", "\" = "));
            let err = toml::from_str::<Holder>(&toml_text).unwrap_err();
            assert!(!err.message().contains("987654"), "{}", err.message());
        }
        let ok: Holder = serde_json::from_str(r#"{"pw": "s"}"#).unwrap();
        assert_eq!(ok.pw.expose(), "s");
    }
}
