//! A minimal blocking client of the API, over its Unix socket or TCP: one HTTP/1.1 request a
//! connection, the whole reply read (or its body as it arrives); over TLS to an agent whose
//! certificate is pinned (see [`crate::tls`]). For tests and tools; scripts use the Python
//! package.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::tls::Fingerprint;

/// Where the server listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// Its Unix socket.
    Unix(PathBuf),
    /// Its TCP address.
    Tcp(SocketAddr),
    /// Its TCP address, over TLS to the certificate of this fingerprint (an agent): nothing
    /// is sent until the handshake has shown that certificate.
    Tls(SocketAddr, Fingerprint),
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
    let mut conn = send(target, method, path, headers, body, timeout)?;
    let mut raw = Vec::new();
    conn.read_to_end(&mut raw)?;
    parse(&raw)
}

/// Sends what [`request`] does and reads the reply's status and headers only: its body is
/// read as it arrives, for a reply that streams (a capture) and may be left before its end.
pub fn request_streaming(
    target: &Target,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&[u8]>,
    timeout: Duration,
) -> io::Result<Streaming> {
    let conn = send(target, method, path, headers, body, timeout)?;
    let closer = conn.closer()?;
    let mut r = BufReader::new(conn);
    let (status, headers) = read_head(&mut r)?;
    let body = Decoded::new(r, &headers);
    Ok(Streaming {
        status,
        headers,
        body,
        closer,
    })
}

/// A reply whose body is read as it arrives (see [`request_streaming`]); reading it gives the
/// body, chunked transfer decoded.
pub struct Streaming {
    /// The status code.
    pub status: u16,
    /// The headers, names in lower case.
    pub headers: Vec<(String, String)>,
    body: Decoded<BufReader<Conn>>,
    closer: Closer,
}

impl Streaming {
    /// What closes the connection from another thread, ending a read that waits on it.
    pub fn closer(&self) -> io::Result<Closer> {
        Ok(Closer(match &self.closer.0 {
            Socket::Unix(s) => Socket::Unix(s.try_clone()?),
            Socket::Tcp(s) => Socket::Tcp(s.try_clone()?),
        }))
    }
}

impl Read for Streaming {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.body.read(buf)
    }
}

/// Closes a [`Streaming`] reply's connection: the server sees its client leave.
pub struct Closer(Socket);

impl Closer {
    /// Shuts the connection down both ways (again: no harm).
    pub fn close(&self) {
        // A connection already gone is closed as asked.
        let _ = match &self.0 {
            Socket::Unix(s) => s.shutdown(std::net::Shutdown::Both),
            Socket::Tcp(s) => s.shutdown(std::net::Shutdown::Both),
        };
    }
}

/// A connection's socket, as a [`Closer`] shuts it.
enum Socket {
    Unix(std::os::unix::net::UnixStream),
    Tcp(std::net::TcpStream),
}

/// A TLS connection over TCP.
type TlsStream = rustls::StreamOwned<rustls::ClientConnection, std::net::TcpStream>;

/// A connection to the server.
enum Conn {
    Unix(std::os::unix::net::UnixStream),
    Tcp(std::net::TcpStream),
    Tls(Box<TlsStream>),
}

impl Conn {
    /// What shuts its socket from another thread.
    fn closer(&self) -> io::Result<Closer> {
        Ok(Closer(match self {
            Conn::Unix(s) => Socket::Unix(s.try_clone()?),
            Conn::Tcp(s) => Socket::Tcp(s.try_clone()?),
            Conn::Tls(s) => Socket::Tcp(s.sock.try_clone()?),
        }))
    }
}

impl Read for Conn {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Conn::Unix(s) => s.read(buf),
            Conn::Tcp(s) => s.read(buf),
            Conn::Tls(s) => s.read(buf),
        }
    }
}

/// A TCP connection to `addr` within `timeout`, its reads and writes giving up after
/// `timeout` without progress.
fn connect(addr: &SocketAddr, timeout: Duration) -> io::Result<std::net::TcpStream> {
    // A host that is down must not hold the caller for the kernel's SYN retries.
    let s = std::net::TcpStream::connect_timeout(addr, timeout)?;
    s.set_read_timeout(Some(timeout))?;
    s.set_write_timeout(Some(timeout))?;
    Ok(s)
}

/// A TLS connection to `addr` whose handshake has ended, with the certificate of fingerprint
/// `pin`: before it has, nothing of the caller's is sent.
fn connect_tls(addr: &SocketAddr, pin: Fingerprint, timeout: Duration) -> io::Result<TlsStream> {
    let mut sock = connect(addr, timeout)?;
    // The pin, not a name, says whom to trust; an address is not sent as SNI.
    let name = rustls::pki_types::ServerName::IpAddress(addr.ip().into());
    let mut tls =
        rustls::ClientConnection::new(crate::tls::pinned(pin)?, name).map_err(io::Error::other)?;
    while tls.is_handshaking() {
        tls.complete_io(&mut sock).map_err(crate::tls::explain)?;
    }
    Ok(rustls::StreamOwned::new(tls, sock))
}

/// Connects to `target` and sends the request; reads on the connection give up after
/// `timeout` without progress.
fn send(
    target: &Target,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&[u8]>,
    timeout: Duration,
) -> io::Result<Conn> {
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
    Ok(match target {
        Target::Unix(path) => {
            let mut s = std::os::unix::net::UnixStream::connect(path)?;
            s.set_read_timeout(Some(timeout))?;
            s.write_all(&message)?;
            Conn::Unix(s)
        }
        Target::Tcp(addr) => {
            let mut s = connect(addr, timeout)?;
            s.write_all(&message)?;
            Conn::Tcp(s)
        }
        Target::Tls(addr, pin) => {
            let mut s = connect_tls(addr, *pin, timeout)?;
            s.write_all(&message)?;
            s.flush()?;
            Conn::Tls(Box::new(s))
        }
    })
}

fn bad(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.to_owned())
}

/// Splits a whole HTTP/1.1 reply into status, headers and (decoded) body.
fn parse(raw: &[u8]) -> io::Result<Reply> {
    let mut r = BufReader::new(raw);
    let (status, headers) = read_head(&mut r)?;
    let mut body = Vec::new();
    Decoded::new(r, &headers).read_to_end(&mut body)?;
    Ok(Reply {
        status,
        headers,
        body,
    })
}

/// Reads a reply's status line and headers (names in lower case).
fn read_head(r: &mut impl BufRead) -> io::Result<(u16, Vec<(String, String)>)> {
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
    Ok((status, headers))
}

/// A reply's body as read after its head: chunked transfer decoded as the chunks come.
struct Decoded<R> {
    r: R,
    chunked: bool,
    /// Bytes left in the chunk being read.
    left: usize,
    /// The last (empty) chunk was read.
    done: bool,
}

impl<R: BufRead> Decoded<R> {
    fn new(r: R, headers: &[(String, String)]) -> Self {
        let chunked = headers
            .iter()
            .any(|(n, v)| n == "transfer-encoding" && v.eq_ignore_ascii_case("chunked"));
        Decoded {
            r,
            chunked,
            left: 0,
            done: false,
        }
    }
}

impl<R: BufRead> Read for Decoded<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if !self.chunked {
            return self.r.read(buf);
        }
        if self.done || buf.is_empty() {
            return Ok(0);
        }
        let mut line = String::new();
        if self.left == 0 {
            self.r.read_line(&mut line)?;
            self.left = usize::from_str_radix(line.trim().split(';').next().unwrap_or(""), 16)
                .map_err(|_| bad("a bad chunk size"))?;
            if self.left == 0 {
                self.done = true;
                return Ok(0);
            }
        }
        let want = buf.len().min(self.left);
        let n = self.r.read(&mut buf[..want])?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        self.left -= n;
        if self.left == 0 {
            line.clear();
            self.r.read_line(&mut line)?;
        }
        Ok(n)
    }
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
        assert!(parse(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab").is_err());
    }

    #[test]
    fn a_streaming_reply_hands_its_body_as_it_arrives_and_closes_from_another_thread() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut head = [0u8; 1024];
            let _ = s.read(&mut head).unwrap();
            s.write_all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n")
                .unwrap();
            // The client leaves without the last chunk: the server's read sees it.
            let mut rest = Vec::new();
            s.read_to_end(&mut rest).unwrap()
        });
        let target = Target::Tcp(addr);
        let mut reply =
            request_streaming(&target, "GET", "/", &[], None, Duration::from_secs(10)).unwrap();
        assert_eq!(reply.status, 200);
        let mut first = [0u8; 8];
        assert_eq!(reply.read(&mut first).unwrap(), 3);
        assert_eq!(&first[..3], b"abc");
        let closer = reply.closer().unwrap();
        let reading = std::thread::spawn(move || reply.read(&mut first));
        std::thread::sleep(Duration::from_millis(100));
        closer.close();
        assert!(
            !matches!(reading.join().unwrap(), Ok(n) if n > 0),
            "the read ends without data"
        );
        assert_eq!(
            server.join().unwrap(),
            0,
            "the server sees its client leave"
        );
    }
}
