//! The control socket of a lab's engine process: one request in, one reply out.
//!
//! A client connects to the Unix socket, writes one line (`stats`, `stop`, …), or a batch of
//! changes (`batch N` and N `schedule` lines), and reads the reply until the engine closes the
//! connection. The socket file is made readable and writable
//! by its owner only (mode 0600): whoever may talk to it may stop the engine or change a link.
//! Requests are served on the engine process's main thread, never on the release thread.
//!
//! [`Request`] is the one parser of request lines, for the engine and for tests and fuzzing:
//! its printed form parses back to the same request, and it never panics, whatever the bytes.

use std::fmt;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::fd::AsFd;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::time::Duration;

use rtemu_model::direction::Ways;

/// The longest request line accepted, bytes.
pub const MAX_REQUEST: u64 = 4096;

/// The most changes one batch holds (so at most about 40 MB in one request, on a socket only
/// root may use).
pub const MAX_BATCH: usize = 10_000;

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
    /// every `poll`, and after each request). `handle` gets the request line without its line
    /// end and returns the reply. Between requests the thread sleeps in `poll(2)` on the
    /// socket, so a request is taken the moment it comes, not at the next check.
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
                    let ms = i32::try_from(poll.as_millis()).unwrap_or(i32::MAX);
                    crate::sys::wait_readable(self.listener.as_fd(), ms)?;
                    continue;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            // A client that stalls or goes away must not stop the engine's control.
            let Ok(line) = read_from(&stream) else {
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

fn read_from(stream: &UnixStream) -> io::Result<String> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(Duration::from_secs(2)))?;
    stream.set_write_timeout(Some(Duration::from_secs(2)))?;
    read_request(stream)
}

/// The request a client sent: its first line, with the line end, of at most [`MAX_REQUEST`]
/// bytes (the rest is never read); when that line is `batch N` (N at most [`MAX_BATCH`]), the
/// N lines after it too, each within the same bound. An error when it is not UTF-8, or a line
/// of a batch is cut at the bound.
pub fn read_request(src: impl Read) -> io::Result<String> {
    let mut src = BufReader::new(src);
    let mut text = bounded_line(&mut src)?;
    let Some(n) = batch_len(&text) else {
        return Ok(text);
    };
    for _ in 0..n {
        let line = bounded_line(&mut src)?;
        if line.is_empty() {
            // Fewer lines than announced: the parser says so.
            break;
        }
        if line.len() as u64 == MAX_REQUEST && !line.ends_with('\n') {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("a line of the batch is over {MAX_REQUEST} bytes"),
            ));
        }
        text.push_str(&line);
    }
    Ok(text)
}

/// One line of `src`, with its line end, of at most [`MAX_REQUEST`] bytes.
fn bounded_line(src: &mut impl BufRead) -> io::Result<String> {
    let mut line = String::new();
    src.take(MAX_REQUEST).read_line(&mut line)?;
    Ok(line)
}

/// The number of lines that follow the line `first` when it is `batch N` with N in range.
fn batch_len(first: &str) -> Option<usize> {
    let mut words = first.split_whitespace();
    let (Some("batch"), Some(n), None) = (words.next(), words.next(), words.next()) else {
        return None;
    };
    n.parse().ok().filter(|n| (1..=MAX_BATCH).contains(n))
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
    /// `batch N` and N `schedule` lines: the changes are all checked and built, then all
    /// queued, or none (one request for a long schedule, where one request per change took
    /// minutes).
    Batch(Vec<Request>),
}

/// The verbs, as an error lists them.
const VERBS: &str = "ping, stats, stop, down, up, set, schedule or batch";

/// A request line that is not a request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct RequestError(String);

impl std::str::FromStr for Request {
    type Err = RequestError;

    fn from_str(text: &str) -> Result<Request, RequestError> {
        let err = |m: String| Err(RequestError(m));
        let (line, rest) = match text.split_once('\n') {
            Some((line, rest)) => (line, Some(rest)),
            None => (text, None),
        };
        if line.split_whitespace().next() == Some("batch") {
            return parse_batch(line, rest.unwrap_or(""));
        }
        if rest.is_some() {
            return err("a request is one line (only a `batch` has more)".into());
        }
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
                let ways = match words.next().map(|w| Ways::parse(w).ok_or(w)) {
                    Some(Ok(ways)) => ways,
                    Some(Err(other)) => {
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

/// A batch: its first line `batch N` and the N `schedule` lines of `rest`.
fn parse_batch(first: &str, rest: &str) -> Result<Request, RequestError> {
    let err = |m: String| Err(RequestError(m));
    let mut words = first.split_whitespace().skip(1);
    let n = match (words.next(), words.next()) {
        (Some(n), None) => match n.parse::<usize>() {
            Ok(n) if (1..=MAX_BATCH).contains(&n) => n,
            _ => return err(format!("`batch`: `{n}` changes: give 1 to {MAX_BATCH}")),
        },
        (None, _) => return err("`batch`: how many changes?".into()),
        (Some(_), Some(extra)) => return err(format!("`batch`: unexpected `{extra}`")),
    };
    let lines: Vec<&str> = rest.lines().collect();
    if lines.len() != n {
        return err(format!(
            "`batch {n}`: {} lines follow, not {n}",
            lines.len()
        ));
    }
    let mut changes = Vec::with_capacity(n);
    for (i, line) in lines.into_iter().enumerate() {
        match line.parse::<Request>() {
            Ok(r @ Request::Schedule { .. }) => changes.push(r),
            Ok(_) => {
                return err(format!(
                    "`batch`: line {}: only `schedule` is batched",
                    i + 2
                ))
            }
            Err(e) => return err(format!("`batch`: line {}: {e}", i + 2)),
        }
    }
    Ok(Request::Batch(changes))
}

impl fmt::Display for Request {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Request::Batch(changes) => {
                write!(f, "batch {}", changes.len())?;
                for c in changes {
                    write!(f, "\n{c}")?;
                }
                Ok(())
            }
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
    fn a_request_is_taken_when_it_comes_not_at_the_next_check() {
        let dir = std::env::temp_dir().join(format!("rtemu-ctl-wake-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("control.sock");
        let server = Server::bind(&path).unwrap();
        let client = std::thread::spawn(move || {
            // Well after the server went to sleep on its socket.
            std::thread::sleep(Duration::from_millis(200));
            let t = Duration::from_secs(30);
            let start = std::time::Instant::now();
            let reply = request(&path, "ping", t).unwrap();
            let took = start.elapsed();
            request(&path, "stop", t).unwrap();
            (reply, took)
        });
        let checks = std::cell::Cell::new(0u32);
        // A check interval far longer than a request may wait.
        let poll = Duration::from_secs(10);
        server
            .serve(
                poll,
                || {
                    checks.set(checks.get() + 1);
                    false
                },
                |req| match req {
                    "stop" => (String::new(), After::Stop),
                    _ => ("pong".to_owned(), After::Continue),
                },
            )
            .unwrap();
        let (reply, took) = client.join().unwrap();
        assert_eq!(reply, "pong");
        // Generous for a loaded machine; the old loop took the full interval.
        assert!(took < Duration::from_secs(2), "a request waited {took:?}");
        assert!(checks.get() >= 2, "stopped() is asked between requests");
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
                "empty request (ping, stats, stop, down, up, set, schedule or batch)",
            ),
            (
                "halt",
                "unknown request `halt` (ping, stats, stop, down, up, set, schedule or batch)",
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
        let line = read_request(&b"stats\nstop\n"[..]).unwrap();
        assert_eq!(line, "stats\n");
        let long = vec![b'x'; 10_000];
        assert_eq!(read_request(&long[..]).unwrap().len() as u64, MAX_REQUEST);
        assert!(read_request(&b"\xff\xfe\n"[..]).is_err());
    }

    #[test]
    fn a_batch_is_read_whole_and_parses_to_its_schedules_or_says_which_line_is_wrong() {
        let text = "batch 2\nschedule ab both 1s delay 1ms\nschedule ab a-b 2s rate 1mbit\nstats\n";
        let read = read_request(text.as_bytes()).unwrap();
        assert_eq!(
            read,
            "batch 2\nschedule ab both 1s delay 1ms\nschedule ab a-b 2s rate 1mbit\n"
        );
        let req: Request = read.trim_end().parse().unwrap();
        let Request::Batch(changes) = &req else {
            panic!("{req:?}");
        };
        assert_eq!(changes.len(), 2);
        assert_eq!(
            changes[1],
            Request::Schedule {
                link: "ab".into(),
                ways: Ways::AToB,
                after_ns: 2_000_000_000,
                netem: "rate 1mbit".into(),
            }
        );
        assert_eq!(req.to_string().parse::<Request>().unwrap(), req);
        for (text, want) in [
            ("batch", "`batch`: how many changes?"),
            ("batch 0", "`batch`: `0` changes: give 1 to 10000"),
            ("batch 10001", "`batch`: `10001` changes: give 1 to 10000"),
            (
                "batch 2\nschedule ab both 1s",
                "`batch 2`: 1 lines follow, not 2",
            ),
            (
                "batch 1\nset ab both delay 1ms",
                "`batch`: line 2: only `schedule` is batched",
            ),
            (
                "batch 1\nschedule ab both soon",
                "`batch`: line 2: `schedule`: `soon` is not a duration: give a number and a \
                 unit, e.g. `50us`, `1.5ms`, `1s`",
            ),
            (
                "stats\nstop",
                "a request is one line (only a `batch` has more)",
            ),
        ] {
            let e = text.parse::<Request>().unwrap_err();
            assert_eq!(e.to_string(), want, "{text:?}");
        }
        // A batch line over the bound is refused, not read as two.
        let mut long = b"batch 1\nschedule ab both 1s ".to_vec();
        long.extend(vec![b'x'; 5000]);
        assert!(read_request(&long[..]).is_err());
        // A batch over the bound is one line, which does not parse.
        assert_eq!(
            read_request(&b"batch 10001\nping\n"[..]).unwrap(),
            "batch 10001\n"
        );
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
