//! The control socket of a lab's engine process: one request line in, one reply out.
//!
//! A client connects to the Unix socket, writes one line (`stats`, `stop`, …) and reads the
//! reply until the engine closes the connection. The socket file is made readable and writable
//! by its owner only (mode 0600): whoever may talk to it may stop the engine or change a link.
//! Requests are served on the engine process's main thread, never on the release thread.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::time::Duration;

/// The longest request line accepted, bytes.
const MAX_REQUEST: u64 = 4096;

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
    let mut line = String::new();
    BufReader::new(stream.take(MAX_REQUEST)).read_line(&mut line)?;
    Ok(line)
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
