//! The log's writer: stderr, with every URL in a line passed through
//! [`redact_urls`] (errors are redacted when they are made; this covers the
//! lines of libraries that log URLs at debug level).

use std::io::{self, Write};

use topicberg_core::redact_urls;

/// Writes log lines to stderr with URL passwords and token-like query
/// values hidden. `tracing_subscriber`'s fmt layer writes one whole line
/// per call, so a URL is never split across two writes.
#[derive(Debug, Default, Clone, Copy)]
pub struct RedactedStderr;

impl Write for RedactedStderr {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        write_redacted(&mut io::stderr().lock(), buf)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        io::stderr().flush()
    }
}

fn write_redacted(out: &mut impl Write, buf: &[u8]) -> io::Result<()> {
    match std::str::from_utf8(buf) {
        Ok(text) if text.contains("://") => out.write_all(redact_urls(text).as_bytes()),
        _ => out.write_all(buf),
    }
}

#[cfg(test)]
mod tests {
    use super::write_redacted;

    #[test]
    fn urls_in_log_lines_lose_their_passwords() {
        let mut out = Vec::new();
        write_redacted(
            &mut out,
            b"DEBUG connecting to http://u:hunter2@h:1/x?token=t\n",
        )
        .unwrap();
        write_redacted(&mut out, b"INFO nothing to hide\n").unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "DEBUG connecting to http://u:***@h:1/x?token=***\nINFO nothing to hide\n"
        );
    }
}
