//! A minimal blocking client of the API, over its Unix socket or TCP: one HTTP/1.1 request a
//! connection, the whole reply read. For tests and tools; scripts use the Python package.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// Where the server listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// Its Unix socket.
    Unix(PathBuf),
    /// Its TCP address.
    Tcp(SocketAddr),
}

/// A reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// The status code.
    pub status: u16,
    /// The headers, names in lower case.
    pub headers: Vec<(String, String)>,
    /// The body (chunked transfer decoded).
    pub body: Vec<u8>,
}

impl Reply {
    /// The value of header `name` (lower case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The body as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The body as JSON.
    pub fn json<T: serde::de::DeserializeOwned>(&self) -> io::Result<T> {
        serde_json::from_slice(&self.body).map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{e} in {:?}", self.text()),
            )
        })
    }
}

/// Sends `method path` with `headers` and `body` (JSON when given) and reads the whole reply,
/// giving up after `timeout` without progress (or, over TCP, without a connection).
pub fn request(
    target: &Target,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&[u8]>,
    timeout: Duration,
) -> io::Result<Reply> {
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: rtemu\r\nConnection: close\r\n");
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    if let Some(b) = body {
        head.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            b.len()
        ));
    }
    head.push_str("\r\n");
    let mut message = head.into_bytes();
    message.extend_from_slice(body.unwrap_or_default());
    let raw = match target {
        Target::Unix(path) => {
            let mut s = std::os::unix::net::UnixStream::connect(path)?;
            s.set_read_timeout(Some(timeout))?;
            exchange(&mut s, &message)?
        }
        Target::Tcp(addr) => {
            // A host that is down must not hold the caller for the kernel's SYN retries.
            let mut s = std::net::TcpStream::connect_timeout(addr, timeout)?;
            s.set_read_timeout(Some(timeout))?;
            exchange(&mut s, &message)?
        }
    };
    parse(&raw)
}

fn exchange(s: &mut (impl Read + Write), message: &[u8]) -> io::Result<Vec<u8>> {
    s.write_all(message)?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)?;
    Ok(raw)
}

fn bad(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.to_owned())
}

/// Splits a whole HTTP/1.1 reply into status, headers and (decoded) body.
fn parse(raw: &[u8]) -> io::Result<Reply> {
    let mut r = BufReader::new(raw);
    let mut line = String::new();
    r.read_line(&mut line)?;
    let status = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| bad("no status line"))?;
    let mut headers = Vec::new();
    loop {
        line.clear();
        if r.read_line(&mut line)? == 0 {
            return Err(bad("the headers do not end"));
        }
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        let (n, v) = l
            .split_once(':')
            .ok_or_else(|| bad("a header without ':'"))?;
        headers.push((n.trim().to_ascii_lowercase(), v.trim().to_owned()));
    }
    let chunked = headers
        .iter()
        .any(|(n, v)| n == "transfer-encoding" && v.eq_ignore_ascii_case("chunked"));
    let mut body = Vec::new();
    if chunked {
        loop {
            line.clear();
            r.read_line(&mut line)?;
            let size = usize::from_str_radix(line.trim().split(';').next().unwrap_or(""), 16)
                .map_err(|_| bad("a bad chunk size"))?;
            if size == 0 {
                break;
            }
            let start = body.len();
            body.resize(start + size, 0);
            r.read_exact(&mut body[start..])?;
            line.clear();
            r.read_line(&mut line)?;
        }
    } else {
        r.read_to_end(&mut body)?;
    }
    Ok(Reply {
        status,
        headers,
        body,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_parse_plain_and_chunked() {
        let plain = parse(b"HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\ncontent-length: 13\r\n\r\n{\"error\":\"x\"}").unwrap();
        assert_eq!(plain.status, 404);
        assert_eq!(plain.header("content-type"), Some("application/json"));
        assert_eq!(plain.text(), "{\"error\":\"x\"}");
        let chunked =
            parse(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n")
                .unwrap();
        assert_eq!(chunked.body, b"abcde");
        assert!(parse(b"garbage").is_err());
    }
}
