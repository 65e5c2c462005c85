//! HTTP/1.1 on the wire for the fault proxy: read a request (with a
//! `Content-Length` or chunked body), forward it, write an answer.

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

use super::State;

/// One parsed request.
pub(super) struct Request {
    pub(super) method: String,
    pub(super) path: String,
    pub(super) headers: Vec<(String, String)>,
    pub(super) body: Option<Vec<u8>>,
    pub(super) close: bool,
}

/// Reads one request; `None` at a clean end of the connection.
pub(super) async fn read_request(
    reader: &mut BufReader<TcpStream>,
) -> std::io::Result<Option<Request>> {
    let mut line = String::new();
    if reader.read_line(&mut line).await? == 0 {
        return Ok(None);
    }
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or_default().to_string();
    let path = parts.next().unwrap_or_default().to_string();
    let version = parts.next().unwrap_or("HTTP/1.1").to_string();
    let mut headers = Vec::new();
    loop {
        line.clear();
        if reader.read_line(&mut line).await? == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        let header = line.trim_end();
        if header.is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            headers.push((name.trim().to_string(), value.trim().to_string()));
        }
    }
    let get = |name: &str| {
        headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.to_ascii_lowercase())
    };
    let close = match get("connection") {
        Some(c) => c.contains("close"),
        None => version == "HTTP/1.0",
    };
    if get("expect").is_some_and(|e| e == "100-continue") {
        reader
            .get_mut()
            .write_all(b"HTTP/1.1 100 Continue\r\n\r\n")
            .await?;
    }
    let body = if get("transfer-encoding").is_some_and(|t| t.contains("chunked")) {
        Some(read_chunked(reader).await?)
    } else if let Some(length) = get("content-length") {
        let length: usize = length.parse().unwrap_or(0);
        let mut body = vec![0; length];
        reader.read_exact(&mut body).await?;
        Some(body)
    } else {
        None
    };
    Ok(Some(Request {
        method,
        path,
        headers,
        body,
        close,
    }))
}

/// A `Transfer-Encoding: chunked` body, decoded (trailers dropped).
async fn read_chunked(reader: &mut BufReader<TcpStream>) -> std::io::Result<Vec<u8>> {
    let mut body = Vec::new();
    let mut line = String::new();
    loop {
        line.clear();
        reader.read_line(&mut line).await?;
        let size = line.trim().split(';').next().unwrap_or("");
        let size = usize::from_str_radix(size, 16)
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "chunk size"))?;
        if size == 0 {
            loop {
                line.clear();
                if reader.read_line(&mut line).await? == 0 || line.trim().is_empty() {
                    return Ok(body);
                }
            }
        }
        let start = body.len();
        body.resize(start + size, 0);
        reader.read_exact(&mut body[start..]).await?;
        line.clear();
        reader.read_line(&mut line).await?;
    }
}

/// The upstream's answer.
pub(super) struct Answer {
    pub(super) status: u16,
    pub(super) headers: Vec<(String, String)>,
    pub(super) body: Vec<u8>,
}

pub(super) fn injected(status: u16) -> Answer {
    let body = format!(
        r#"{{"error":{{"message":"injected by the test proxy","type":"InjectedFault","code":{status}}}}}"#
    );
    Answer {
        status,
        headers: vec![("Content-Type".into(), "application/json".into())],
        body: body.into_bytes(),
    }
}

/// Headers that belong to one hop, not to the request.
fn hop_by_hop(name: &str) -> bool {
    [
        "connection",
        "keep-alive",
        "proxy-connection",
        "transfer-encoding",
        "te",
        "trailer",
        "upgrade",
        "expect",
        "content-length",
    ]
    .iter()
    .any(|h| name.eq_ignore_ascii_case(h))
}

pub(super) async fn forward(state: &State, request: &Request) -> Answer {
    let method = reqwest::Method::from_bytes(request.method.as_bytes()).expect("method");
    let url = format!("{}{}", state.upstream, request.path);
    let mut builder = state.http.request(method, url);
    for (name, value) in &request.headers {
        if hop_by_hop(name) || (!state.preserve_host && name.eq_ignore_ascii_case("host")) {
            continue;
        }
        builder = builder.header(name.as_str(), value.as_str());
    }
    if let Some(body) = &request.body {
        builder = builder.body(body.clone());
    }
    let response = match builder.send().await {
        Ok(r) => r,
        Err(e) => {
            let mut answer = injected(502);
            answer.body = format!("proxy: upstream failed: {e}").into_bytes();
            return answer;
        }
    };
    let status = response.status().as_u16();
    let headers = response
        .headers()
        .iter()
        .filter(|(n, _)| {
            let n = n.as_str();
            !hop_by_hop(n) || (request.method == "HEAD" && n == "content-length")
        })
        .map(|(n, v)| {
            (
                n.to_string(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect();
    let body = response
        .bytes()
        .await
        .map(|b| b.to_vec())
        .unwrap_or_default();
    Answer {
        status,
        headers,
        body,
    }
}

pub(super) async fn write_answer(
    stream: &mut TcpStream,
    method: &str,
    answer: &Answer,
    close: bool,
) -> std::io::Result<()> {
    let reason = reqwest::StatusCode::from_u16(answer.status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .unwrap_or("Status");
    let mut head = format!("HTTP/1.1 {} {reason}\r\n", answer.status);
    for (name, value) in &answer.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    let bodiless = method == "HEAD" || matches!(answer.status, 100..=199 | 204 | 304);
    if !bodiless {
        head.push_str(&format!("Content-Length: {}\r\n", answer.body.len()));
    }
    if close {
        head.push_str("Connection: close\r\n");
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).await?;
    if !bodiless {
        stream.write_all(&answer.body).await?;
    }
    stream.flush().await
}
