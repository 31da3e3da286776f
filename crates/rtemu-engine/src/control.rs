//! The control socket of a lab's engine process: one request line in, one reply out.
//!
//! A client connects to the Unix socket, writes one line (`stats`, `stop`, …) and reads the
//! reply until the engine closes the connection. The socket file is made readable and writable
//! by its owner only (mode 0600): whoever may talk to it may stop the engine or change a link.
//! Requests are served on the engine process's main thread, never on the release thread.
//!
//! [`Request`] is the one parser of request lines, for the engine and for tests and fuzzing:
//! its printed form parses back to the same request, and it never panics, whatever the bytes.

use std::fmt;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::time::Duration;

use crate::engine::Way;

/// The longest request line accepted, bytes.
pub const MAX_REQUEST: u64 = 4096;

/// What the server does after answering a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum After {
    /// Wait for the next request.
    Continue,
    /// Stop serving.
    Stop,
}

/// The listening end of a control socket.
#[derive(Debug)]
pub struct Server {
    listener: UnixListener,
}

impl Server {
    /// Creates the socket at `path` (replacing a stale one) with mode 0600.
    pub fn bind(path: &Path) -> io::Result<Server> {
        match std::fs::remove_file(path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        let listener = UnixListener::bind(path)?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
        listener.set_nonblocking(true)?;
        Ok(Server { listener })
    }

    /// Serves requests until `handle` says [`After::Stop`] or `stopped()` becomes true (checked
    /// every `poll`). `handle` gets the request line without its line end and returns the reply.
    pub fn serve(
        &self,
        poll: Duration,
        mut stopped: impl FnMut() -> bool,
        mut handle: impl FnMut(&str) -> (String, After),
    ) -> io::Result<()> {
        loop {
            if stopped() {
                return Ok(());
            }
            let stream = match self.listener.accept() {
                Ok((stream, _)) => stream,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    std::thread::sleep(poll);
                    continue;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            // A client that stalls or goes away must not stop the engine's control.
            let Ok(line) = read_request(&stream) else {
                continue;
            };
            let (reply, after) = handle(line.trim_end());
            let _ = (&stream).write_all(reply.as_bytes());
            if after == After::Stop {
                return Ok(());
            }
        }
    }
}

fn read_request(stream: &UnixStream) -> io::Result<String> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(Duration::from_secs(2)))?;
    stream.set_write_timeout(Some(Duration::from_secs(2)))?;
    read_line(stream)
}

/// The request line a client sent: its first line, with the line end, of at most
/// [`MAX_REQUEST`] bytes (the rest is never read); an error when it is not UTF-8.
pub fn read_line(src: impl Read) -> io::Result<String> {
    let mut line = String::new();
    BufReader::new(src.take(MAX_REQUEST)).read_line(&mut line)?;
    Ok(line)
}

/// Which directions of a link a `set` request changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ways {
    /// From node A to node B only.
    AToB,
    /// From node B to node A only.
    BToA,
    /// Both.
    Both,
}

impl Ways {
    /// The directions, in the order they are changed.
    pub fn ways(self) -> &'static [Way] {
        match self {
            Ways::AToB => &[Way::AToB],
            Ways::BToA => &[Way::BToA],
            Ways::Both => &[Way::AToB, Way::BToA],
        }
    }

    /// `a-b`, `b-a` or `both`, as requests and the command line write it.
    pub fn as_str(self) -> &'static str {
        match self {
            Ways::AToB => "a-b",
            Ways::BToA => "b-a",
            Ways::Both => "both",
        }
    }
}

/// One request to a lab's engine. Words are separated by white space; link names and netem
/// text are taken as words, so `set` keeps the netem text with single spaces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// `ping`: is the engine there?
    Ping,
    /// `stats`: counters and fidelity of every direction.
    Stats,
    /// `stop`: write the final report and end.
    Stop,
    /// `down LINK` / `up LINK`: cut a link, or join it again.
    Cut {
        /// The link.
        link: String,
        /// `true` for `down`.
        down: bool,
    },
    /// `set LINK a-b|b-a|both NETEM…`: a new model for the link's directions.
    Set {
        /// The link.
        link: String,
        /// The directions changed.
        ways: Ways,
        /// The model, in netem's syntax (checked by whoever builds it).
        netem: String,
    },
    /// `schedule LINK a-b|b-a|both AFTER NETEM…`: as `set`, applied AFTER (`500ms`, `2s`)
    /// from now, behind the frames then in flight.
    Schedule {
        /// The link.
        link: String,
        /// The directions changed.
        ways: Ways,
        /// How long from the request the change waits, ns.
        after_ns: u64,
        /// The model, in netem's syntax (checked by whoever builds it).
        netem: String,
    },
}

/// The verbs, as an error lists them.
const VERBS: &str = "ping, stats, stop, down, up, set or schedule";

/// A request line that is not a request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct RequestError(String);

impl std::str::FromStr for Request {
    type Err = RequestError;

    fn from_str(line: &str) -> Result<Request, RequestError> {
        let err = |m: String| Err(RequestError(m));
        let mut words = line.split_whitespace();
        let verb = words.next().unwrap_or("");
        let mut link = || words.next().map(str::to_owned);
        let request = match verb {
            "ping" => Request::Ping,
            "stats" => Request::Stats,
            "stop" => Request::Stop,
            "down" | "up" => match link() {
                Some(link) => Request::Cut {
                    link,
                    down: verb == "down",
                },
                None => return err(format!("`{verb}`: which link?")),
            },
            "set" | "schedule" => {
                let Some(link) = link() else {
                    return err(format!("`{verb}`: which link?"));
                };
                let ways = match words.next() {
                    Some("a-b") => Ways::AToB,
                    Some("b-a") => Ways::BToA,
                    Some("both") => Ways::Both,
                    Some(other) => {
                        return err(format!("direction `{other}`: give a-b, b-a or both"))
                    }
                    None => return err(format!("`{verb}`: which direction? (a-b, b-a or both)")),
                };
                let after_ns = if verb == "schedule" {
                    let Some(after) = words.next() else {
                        return err("`schedule`: after how long? (e.g. 500ms, 2s)".into());
                    };
                    match rtemu_clock::time::parse_duration_ns(after) {
                        Ok(ns) => Some(ns),
                        Err(e) => return err(format!("`schedule`: {e}")),
                    }
                } else {
                    None
                };
                let netem = words.collect::<Vec<_>>().join(" ");
                return Ok(match after_ns {
                    Some(after_ns) => Request::Schedule {
                        link,
                        ways,
                        after_ns,
                        netem,
                    },
                    None => Request::Set { link, ways, netem },
                });
            }
            "" => return err(format!("empty request ({VERBS})")),
            other => return err(format!("unknown request `{other}` ({VERBS})")),
        };
        match words.next() {
            Some(extra) => err(format!("`{verb}`: unexpected `{extra}`")),
            None => Ok(request),
        }
    }
}

impl fmt::Display for Request {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Request::Ping => f.write_str("ping"),
            Request::Stats => f.write_str("stats"),
            Request::Stop => f.write_str("stop"),
            Request::Cut { link, down } => {
                write!(f, "{} {link}", if *down { "down" } else { "up" })
            }
            Request::Set { link, ways, netem } => {
                write!(f, "set {link} {}", ways.as_str())?;
                if !netem.is_empty() {
                    write!(f, " {netem}")?;
                }
                Ok(())
            }
            Request::Schedule {
                link,
                ways,
                after_ns,
                netem,
            } => {
                write!(
                    f,
                    "schedule {link} {} {}",
                    ways.as_str(),
                    rtemu_clock::time::format_duration_ns(*after_ns)
                )?;
                if !netem.is_empty() {
                    write!(f, " {netem}")?;
                }
                Ok(())
            }
        }
    }
}

/// Sends `request` to the control socket at `path` and returns the reply, waiting at most
/// `timeout` for each step.
pub fn request(path: &Path, request: &str, timeout: Duration) -> io::Result<String> {
    let mut stream = UnixStream::connect(path)?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    stream.write_all(request.as_bytes())?;
    stream.write_all(b"\n")?;
    let mut reply = String::new();
    stream.read_to_string(&mut reply)?;
    Ok(reply)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn requests_get_their_replies_until_stop_and_the_socket_is_private() {
        let dir = std::env::temp_dir().join(format!("rtemu-control-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("control.sock");
        let server = Server::bind(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let client = {
            let path = path.clone();
            std::thread::spawn(move || {
                let t = Duration::from_secs(5);
                let a = request(&path, "echo one", t).unwrap();
                let b = request(&path, "stop", t).unwrap();
                (a, b)
            })
        };
        let mut seen = Vec::new();
        server
            .serve(
                Duration::from_millis(1),
                || false,
                |req| {
                    seen.push(req.to_owned());
                    match req {
                        "stop" => ("bye".to_owned(), After::Stop),
                        other => (format!("got {other}"), After::Continue),
                    }
                },
            )
            .unwrap();
        let (a, b) = client.join().unwrap();
        assert_eq!((a.as_str(), b.as_str()), ("got echo one", "bye"));
        assert_eq!(seen, ["echo one", "stop"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn requests_parse_and_print_back_the_same() {
        let cases = [
            ("ping", Request::Ping),
            ("  stats \t", Request::Stats),
            ("stop", Request::Stop),
            (
                "down ab",
                Request::Cut {
                    link: "ab".into(),
                    down: true,
                },
            ),
            (
                "set ab both  rate 10mbit   limit 5",
                Request::Set {
                    link: "ab".into(),
                    ways: Ways::Both,
                    netem: "rate 10mbit limit 5".into(),
                },
            ),
            (
                "schedule ab a-b 1500ms delay 5ms",
                Request::Schedule {
                    link: "ab".into(),
                    ways: Ways::AToB,
                    after_ns: 1_500_000_000,
                    netem: "delay 5ms".into(),
                },
            ),
        ];
        for (line, want) in cases {
            let got: Request = line.parse().unwrap();
            assert_eq!(got, want, "{line:?}");
            assert_eq!(got.to_string().parse::<Request>().unwrap(), want);
        }
        assert_eq!(
            "set ab b-a delay 1ms"
                .parse::<Request>()
                .unwrap()
                .to_string(),
            "set ab b-a delay 1ms"
        );
    }

    #[test]
    fn bad_requests_say_what_is_wrong() {
        for (line, want) in [
            (
                "",
                "empty request (ping, stats, stop, down, up, set or schedule)",
            ),
            (
                "halt",
                "unknown request `halt` (ping, stats, stop, down, up, set or schedule)",
            ),
            (
                "schedule ab both",
                "`schedule`: after how long? (e.g. 500ms, 2s)",
            ),
            (
                "schedule ab both soon delay 1ms",
                "`schedule`: `soon` is not a duration: give a number and a unit, e.g. `50us`, \
                 `1.5ms`, `1s`",
            ),
            ("up", "`up`: which link?"),
            ("stats now", "`stats`: unexpected `now`"),
            ("set ab", "`set`: which direction? (a-b, b-a or both)"),
            (
                "set ab sideways delay 1ms",
                "direction `sideways`: give a-b, b-a or both",
            ),
        ] {
            let e = line.parse::<Request>().unwrap_err();
            assert_eq!(e.to_string(), want, "{line:?}");
        }
    }

    #[test]
    fn a_request_line_is_cut_at_its_line_end_and_its_bound() {
        let line = read_line(&b"stats\nstop\n"[..]).unwrap();
        assert_eq!(line, "stats\n");
        let long = vec![b'x'; 10_000];
        assert_eq!(read_line(&long[..]).unwrap().len() as u64, MAX_REQUEST);
        assert!(read_line(&b"\xff\xfe\n"[..]).is_err());
    }

    #[test]
    fn serving_ends_when_told_to_stop_from_outside() {
        let path = std::env::temp_dir().join(format!("rtemu-control-b-{}", std::process::id()));
        let server = Server::bind(&path).unwrap();
        let mut polls = 0;
        server
            .serve(
                Duration::from_millis(1),
                || {
                    polls += 1;
                    polls > 3
                },
                |_| unreachable!("no client"),
            )
            .unwrap();
        assert_eq!(polls, 4);
        std::fs::remove_file(&path).unwrap();
    }
}
