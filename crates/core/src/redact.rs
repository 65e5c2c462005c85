//! URLs made safe to print: the one function every error and log line that
//! shows a URL goes through.

use std::sync::LazyLock;

use regex::{Captures, Regex};

/// A URL inside any text: a scheme, `://`, then everything up to white
/// space, a quote, `<`, `>` or `)` (reqwest and object_store print URLs in
/// parentheses).
static URL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"[A-Za-z][A-Za-z0-9+.\-]*://[^\s"'<>)`]+"#).expect("URL pattern")
});

/// A query (or fragment) parameter whose name says it carries a secret.
static SECRET_PARAM: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)([?&;#](?:[a-z0-9_.\-]*(?:token|credential|secret|password|passwd|pwd|signature|apikey|api_key|auth|session)[a-z0-9_.\-]*|key|sig|code)=)[^&;#]*",
    )
    .expect("secret parameter pattern")
});

/// `text` with every URL in it made safe to print: the password of the
/// userinfo (`https://user:pass@host` -> `https://user:***@host`; a userinfo
/// without `:`, often a token, becomes `***`) and the values of query
/// parameters named like a secret (`token=`, `access_token=`, `credential=`,
/// `X-Amz-Signature=`, `key=`, ...) become `***`. Text without a URL comes
/// back unchanged; a bare URL is text with one URL.
pub fn redact_urls(text: &str) -> String {
    if !text.contains("://") {
        return text.to_string();
    }
    URL.replace_all(text, |c: &Captures<'_>| redact_one(&c[0]))
        .into_owned()
}

fn redact_one(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    let authority = match authority.rsplit_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, _)) => format!("{user}:***@{host}"),
            None => format!("***@{host}"),
        },
        None => authority.to_string(),
    };
    let tail = SECRET_PARAM.replace_all(tail, "${1}***");
    format!("{scheme}://{authority}{tail}")
}

#[cfg(test)]
mod tests {
    use super::redact_urls;

    #[test]
    fn userinfo_passwords_are_hidden_and_the_rest_is_kept() {
        assert_eq!(
            redact_urls("https://user:secretpass@host:8181/api/catalog/v1/oauth/tokens"),
            "https://user:***@host:8181/api/catalog/v1/oauth/tokens"
        );
        assert_eq!(redact_urls("http://ghp_abc123@host/x"), "http://***@host/x");
        // An '@' in the path is not userinfo.
        assert_eq!(redact_urls("http://host/a@b"), "http://host/a@b");
        // A password holding '@' and ':'.
        assert_eq!(redact_urls("http://u:p@ss:w@host/"), "http://u:***@host/");
    }

    #[test]
    fn secret_query_values_are_hidden() {
        assert_eq!(
            redact_urls("http://h/v1/config?warehouse=w&token=abc&access_token=xyz#frag"),
            "http://h/v1/config?warehouse=w&token=***&access_token=***#frag"
        );
        assert_eq!(
            redact_urls("https://b.s3/k?X-Amz-Credential=AKIA%2F&X-Amz-Signature=f00&x=1"),
            "https://b.s3/k?X-Amz-Credential=***&X-Amz-Signature=***&x=1"
        );
        assert_eq!(
            redact_urls("http://h/?client_secret=s1&key=k1&monkey=ok"),
            "http://h/?client_secret=***&key=***&monkey=ok"
        );
    }

    #[test]
    fn urls_inside_text_are_found_and_other_text_is_untouched() {
        let text = "error sending request for url (http://u:pw1@127.0.0.1:9/v1/oauth/tokens): \
                    connection refused; see 'https://a:pw2@h/'";
        let shown = redact_urls(text);
        assert!(!shown.contains("pw1") && !shown.contains("pw2"), "{shown}");
        assert!(shown.contains("(http://u:***@127.0.0.1:9/v1/oauth/tokens): connection refused"));
        assert!(shown.ends_with("'https://a:***@h/'"), "{shown}");
        let plain = "user:pass@host is not a URL with a scheme; token=abc";
        assert_eq!(redact_urls(plain), plain);
    }
}
