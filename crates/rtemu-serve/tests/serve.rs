//! The server as a client sees it: its listeners and their access control, its errors, its
//! OpenAPI document, and a lab driven through it.
//!
//! Each test runs its own server, in this process, on a socket and token file in a private
//! temporary directory. Tests that touch labs need root; without it they print why and pass,
//! unless `RTEMU_REQUIRE_ROOT=1` (CI) makes them fail. Every lab has a name unique to the test
//! and process, and a guard takes it down even when an assertion fails. The full round trip
//! over an impaired link (whose engine is the `rtemu` binary) is in crates/rtemu/tests/serve.rs.

use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::Path;
use std::time::Duration;

use rtemu_api::client::{request, request_streaming, Reply, Target};
use rtemu_serve::{Options, Server};
use rtemu_testutil::{lab_namespaces, TempDir};

/// Whether the test may run; panics when root is required but missing.
fn root_or_skip(test: &str) -> bool {
    rtemu_testutil::root_or_skip(test, "creates network namespaces")
}

/// A lab name unique to this test and process (lab names are at most 12 characters).
fn unique_lab(tag: &str) -> String {
    format!("s{tag}{}", std::process::id() % 100_000)
}

/// A server on a socket in `dir`, and on an ephemeral TCP port of the loopback address.
fn server(dir: &Path) -> Server {
    Server::start(&Options {
        socket: dir.join("api.sock"),
        group: None,
        listen: Some("127.0.0.1:0".parse().unwrap()),
        token_file: dir.join("api.token"),
        token_from: None,
        tls: None,
        insecure_listen: false,
        credentials: None,
    })
    .unwrap()
}

const WAIT: Duration = Duration::from_secs(30);

fn get(t: &Target, path: &str, headers: &[(&str, &str)]) -> Reply {
    request(t, "GET", path, headers, None, WAIT).unwrap()
}

fn post(t: &Target, path: &str, body: &serde_json::Value) -> Reply {
    let body = body.to_string();
    request(t, "POST", path, &[], Some(body.as_bytes()), WAIT).unwrap()
}

/// The `error` text of an error reply, checking its status.
fn error(reply: &Reply, status: u16) -> String {
    assert_eq!(reply.status, status, "{}", reply.text());
    assert_eq!(reply.header("content-type"), Some("application/json"));
    let body: serde_json::Value = reply.json().unwrap();
    body["error"].as_str().expect("an error text").to_owned()
}

#[test]
fn clear_text_on_an_open_address_is_refused_before_anything_is_made() {
    let dir = TempDir::new("serve-clear");
    let opts = Options {
        socket: dir.0.join("api.sock"),
        listen: Some("0.0.0.0:0".parse().unwrap()),
        token_file: dir.0.join("api.token"),
        ..Options::default()
    };
    let e = Server::start(&opts).err().expect("refused").to_string();
    assert!(
        e.contains("--tls-dir") && e.contains("--insecure-listen"),
        "{e}"
    );
    assert!(!dir.0.join("api.sock").exists() && !dir.0.join("api.token").exists());
    // Said explicitly, it serves (the token then crosses the network in clear text).
    let s = Server::start(&Options {
        insecure_listen: true,
        ..opts
    })
    .unwrap();
    assert!(s
        .describe(&Options::default())
        .contains("without --tls-dir"));
    s.stop().unwrap();
}

#[test]
fn an_agent_serves_tls_to_its_pin_only() {
    let dir = TempDir::new("serve-tls");
    let s = Server::start(&Options {
        socket: dir.0.join("api.sock"),
        listen: Some("127.0.0.1:0".parse().unwrap()),
        token_file: dir.0.join("api.token"),
        tls: Some(rtemu_serve::tls::Source::Dir(dir.0.join("tls"))),
        ..Options::default()
    })
    .unwrap();
    let addr = s.tcp_addr().unwrap();
    let pin = s.fingerprint().expect("served over TLS");
    assert!(s.view_url(None).unwrap().starts_with("https://"));
    let bearer = format!("Bearer {}", s.token().unwrap());
    let auth = [("Authorization", bearer.as_str())];
    let labs = get(&Target::Tls(addr, pin), "/v1/labs", &auth);
    assert_eq!(labs.status, 200, "{}", labs.text());
    // The token without TLS gets no answer; a wrong pin not even a request.
    let plain = request(&Target::Tcp(addr), "GET", "/v1/labs", &auth, None, WAIT);
    assert!(plain.is_err() || plain.unwrap().status != 200);
    let other = rtemu_api::tls::Fingerprint::of(b"another certificate");
    let e = request(&Target::Tls(addr, other), "GET", "/", &auth, None, WAIT).unwrap_err();
    assert!(
        e.to_string()
            .contains(&format!("the credentials pin {other}")),
        "{e}"
    );
    s.stop().unwrap();
}

#[test]
fn tcp_needs_the_token_and_the_unix_socket_does_not() {
    let dir = TempDir::new("serve-auth");
    let s = server(&dir.0);
    let tcp = Target::Tcp(s.tcp_addr().unwrap());
    let unix = Target::Unix(dir.0.join("api.sock"));
    let token = s.token().unwrap().to_owned();

    let none = get(&tcp, "/openapi.json", &[]);
    assert!(error(&none, 401).contains("Authorization: Bearer"));
    let wrong = "0".repeat(64);
    let r = get(
        &tcp,
        "/openapi.json",
        &[("Authorization", &format!("Bearer {wrong}"))],
    );
    assert!(error(&r, 401).contains("token is wrong"));
    // A token with one character less, or another scheme, is no better.
    let short = get(
        &tcp,
        "/openapi.json",
        &[("Authorization", &format!("Bearer {}", &token[1..]))],
    );
    assert_eq!(short.status, 401);
    let basic = get(
        &tcp,
        "/openapi.json",
        &[("Authorization", &format!("Basic {token}"))],
    );
    assert_eq!(basic.status, 401);
    // Even a path that does not exist is refused before it is looked at.
    assert_eq!(get(&tcp, "/nowhere", &[]).status, 401);

    let bearer = format!("Bearer {token}");
    let ok = get(&tcp, "/openapi.json", &[("Authorization", &bearer)]);
    assert_eq!(ok.status, 200, "{}", ok.text());
    // The scheme is case-insensitive (RFC 9110).
    let lower = get(
        &tcp,
        "/openapi.json",
        &[("Authorization", &format!("bearer {token}"))],
    );
    assert_eq!(lower.status, 200, "{}", lower.text());
    let over_unix = get(&unix, "/openapi.json", &[]);
    assert_eq!(over_unix.status, 200);
    assert_eq!(ok.body, over_unix.body);
    s.stop().unwrap();
}

#[test]
fn the_page_is_served_without_the_token_and_the_api_still_needs_it() {
    let dir = TempDir::new("web");
    let s = server(&dir.0);
    let tcp = Target::Tcp(s.tcp_addr().unwrap());
    for (path, content_type, contains) in [
        (
            "/",
            "text/html; charset=utf-8",
            "<script type=\"module\" src=\"/ui/main.js\">",
        ),
        (
            "/ui/main.js",
            "text/javascript; charset=utf-8",
            "from './api.js'",
        ),
        (
            "/ui/api.js",
            "text/javascript; charset=utf-8",
            "Authorization",
        ),
        ("/ui/style.css", "text/css; charset=utf-8", "--orange"),
        ("/ui/icon.svg", "image/svg+xml", "<svg"),
    ] {
        let r = get(&tcp, path, &[]);
        assert_eq!(r.status, 200, "{path}: {}", r.text());
        assert_eq!(r.header("content-type"), Some(content_type), "{path}");
        let csp = r.header("content-security-policy").unwrap_or_default();
        assert!(csp.starts_with("default-src 'self';"), "{path}: {csp}");
        assert!(!csp.contains("unsafe"), "{path}: {csp}");
        assert_eq!(r.header("x-content-type-options"), Some("nosniff"));
        assert!(r.text().contains(contains), "{path}");
    }
    // The API, and any other path, still needs the token.
    assert!(error(&get(&tcp, "/v1/labs", &[]), 401).contains("Authorization: Bearer"));
    assert_eq!(get(&tcp, "/ui/nothing.js", &[]).status, 401);
    let bearer = format!("Bearer {}", s.token().unwrap());
    assert_eq!(
        get(&tcp, "/v1/labs", &[("Authorization", &bearer)]).status,
        200
    );
    // The page's address carries the token in its fragment, which no request sends.
    let url = s.view_url(Some("lab1")).unwrap();
    let addr = s.tcp_addr().unwrap();
    assert_eq!(
        url,
        format!("http://{addr}/#token={}&lab=lab1", s.token().unwrap())
    );
    s.stop().unwrap();
}

#[test]
fn a_tcp_only_server_writes_no_file_and_dies_with_its_token() {
    let s = Server::start_tcp("127.0.0.1:0".parse().unwrap()).unwrap();
    let tcp = Target::Tcp(s.tcp_addr().unwrap());
    let token = s.token().unwrap().to_owned();
    assert_eq!(token.len(), 64);
    assert_eq!(get(&tcp, "/", &[]).status, 200);
    assert_eq!(get(&tcp, "/v1/labs", &[]).status, 401);
    let bearer = format!("Bearer {token}");
    assert_eq!(
        get(&tcp, "/openapi.json", &[("Authorization", &bearer)]).status,
        200
    );
    assert!(s
        .view_url(None)
        .unwrap()
        .ends_with(&format!("/#token={token}")));
    let addr = s.tcp_addr().unwrap();
    s.stop().unwrap();
    assert!(
        std::net::TcpStream::connect(addr).is_err(),
        "still listening"
    );
}

#[test]
fn socket_and_token_are_root_only_and_removed_at_stop() {
    let dir = TempDir::new("serve-files");
    let s = server(&dir.0);
    let sock = dir.0.join("api.sock");
    let token_file = dir.0.join("api.token");
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&sock), 0o600);
    assert_eq!(mode(&token_file), 0o600);
    let written = std::fs::read_to_string(&token_file).unwrap();
    assert_eq!(written.trim(), s.token().unwrap());
    assert_eq!(written.trim().len(), 64);
    // Nothing else is left in the directory (no staging files).
    let mut names: Vec<String> = std::fs::read_dir(&dir.0)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["api.sock", "api.token"]);
    s.stop().unwrap();
    assert!(!sock.exists(), "the socket is left");
    assert!(!token_file.exists(), "the token file is left");
}

#[test]
fn a_token_read_from_a_secret_is_the_one_asked_for_and_nothing_is_written() {
    let dir = TempDir::new("serve-from");
    // As a Kubernetes Secret volume holds it: a symbolic link to the data, mode 0400.
    let data = dir.0.join("..data");
    std::fs::create_dir(&data).unwrap();
    let secret = "k8s-shared-token-0123456789abcdef0123456789";
    std::fs::write(data.join("token"), format!("{secret}\n")).unwrap();
    std::fs::set_permissions(data.join("token"), std::fs::Permissions::from_mode(0o400)).unwrap();
    std::os::unix::fs::symlink("..data/token", dir.0.join("token")).unwrap();
    let opts = |from: &str| Options {
        socket: dir.0.join("api.sock"),
        group: None,
        listen: Some("127.0.0.1:0".parse().unwrap()),
        token_file: dir.0.join("api.token"),
        token_from: Some(dir.0.join(from)),
        tls: None,
        insecure_listen: false,
        credentials: None,
    };
    let s = Server::start(&opts("token")).unwrap();
    assert_eq!(s.token(), Some(secret));
    let tcp = Target::Tcp(s.tcp_addr().unwrap());
    let bearer = format!("Bearer {secret}");
    assert_eq!(
        get(&tcp, "/v1/labs", &[("Authorization", &bearer)]).status,
        200
    );
    assert_eq!(get(&tcp, "/v1/labs", &[]).status, 401);
    assert!(
        !dir.0.join("api.token").exists(),
        "a token file was written"
    );
    s.stop().unwrap();

    // Refused, and the messages never show the file's content.
    let bad = [
        ("open", secret, 0o644, "open to group or others (mode 644)"),
        (
            "short",
            "0123456789abcdef",
            0o600,
            "at least 32 printable characters",
        ),
        (
            "spaced",
            "0123456789abcdef 0123456789abcdef",
            0o600,
            "without spaces",
        ),
    ];
    for (name, text, mode, says) in bad {
        let path = dir.0.join(name);
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        let e = format!("{:#}", Server::start(&opts(name)).err().unwrap());
        assert!(e.contains(says), "{name}: {e}");
        assert!(
            !e.contains("0123456789abcdef"),
            "{name}: the token is shown: {e}"
        );
    }
    let e = format!("{:#}", Server::start(&opts("none")).err().unwrap());
    assert!(e.contains("reading the token from"), "{e}");
}

#[test]
fn a_token_file_is_made_new_and_never_replaces_or_removes_another_file() {
    let dir = TempDir::new("serve-tokenfile");
    // Aimed at a file of root's (a lab's state, say): refused, the file whole and kept.
    let state = dir.0.join("state.json");
    std::fs::write(&state, "{\"lab\": \"x\"}").unwrap();
    let opts = |token_file: &Path| Options {
        socket: dir.0.join("api.sock"),
        group: None,
        listen: Some("127.0.0.1:0".parse().unwrap()),
        token_file: token_file.to_owned(),
        token_from: None,
        tls: None,
        insecure_listen: false,
        credentials: None,
    };
    let e = Server::start(&opts(&state))
        .err()
        .expect("an existing file is refused");
    assert!(e.to_string().contains("replaces nothing"), "{e:#}");
    assert_eq!(std::fs::read_to_string(&state).unwrap(), "{\"lab\": \"x\"}");
    // A link there is refused too, and the file it names untouched.
    let link = dir.0.join("link.token");
    std::os::unix::fs::symlink(&state, &link).unwrap();
    assert!(Server::start(&opts(&link)).is_err());
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    // The socket of the refused start is gone.
    assert!(!dir.0.join("api.sock").exists());
    // A token file that something else replaced meanwhile is not removed at stop.
    let token = dir.0.join("api.token");
    let s = Server::start(&opts(&token)).unwrap();
    std::fs::remove_file(&token).unwrap();
    std::fs::write(&token, "someone else's").unwrap();
    s.stop().unwrap();
    assert_eq!(std::fs::read_to_string(&token).unwrap(), "someone else's");
    assert_eq!(std::fs::read_to_string(&state).unwrap(), "{\"lab\": \"x\"}");
}

#[test]
fn token_from_checks_the_file_it_reads_and_refuses_a_fifo_at_once() {
    let dir = TempDir::new("serve-tokenfrom");
    let opts = |from: &Path| Options {
        socket: dir.0.join("api.sock"),
        group: None,
        listen: Some("127.0.0.1:0".parse().unwrap()),
        token_file: dir.0.join("api.token"),
        token_from: Some(from.to_owned()),
        tls: None,
        insecure_listen: false,
        credentials: None,
    };
    let fifo = dir.0.join("fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let started = std::time::Instant::now();
    let e = Server::start(&opts(&fifo))
        .err()
        .expect("a FIFO is refused");
    assert!(e.to_string().contains("not a regular file"), "{e:#}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "it waited for a writer"
    );

    // A link flipped between a good token file and one open to others: every start that
    // succeeds has the good file's token, checked on the very file it read.
    let good = "good-token-0123456789abcdef0123456789abcdef";
    let bad = "open-token-0123456789abcdef0123456789abcdef";
    for (name, text, mode) in [("good", good, 0o600), ("bad", bad, 0o644)] {
        std::fs::write(dir.0.join(name), text).unwrap();
        std::fs::set_permissions(dir.0.join(name), std::fs::Permissions::from_mode(mode)).unwrap();
    }
    let link = dir.0.join("token");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flipper = {
        let (dir, stop) = (dir.0.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut i = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let tmp = dir.join("flip");
                let _ = std::fs::remove_file(&tmp);
                std::os::unix::fs::symlink(if i % 2 == 0 { "good" } else { "bad" }, &tmp).unwrap();
                std::fs::rename(&tmp, dir.join("token")).unwrap();
                i += 1;
            }
        })
    };
    let (mut accepted, mut refused) = (0, 0);
    for _ in 0..60 {
        match Server::start(&opts(&link)) {
            Ok(s) => {
                assert_eq!(s.token(), Some(good));
                accepted += 1;
                s.stop().unwrap();
            }
            Err(e) => {
                assert!(!format!("{e:#}").contains(bad), "{e:#}");
                refused += 1;
            }
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    flipper.join().unwrap();
    assert_eq!(accepted + refused, 60);
}

#[test]
fn a_path_in_use_is_refused_and_a_stale_socket_replaced() {
    let dir = TempDir::new("serve-inuse");
    let sock = dir.0.join("api.sock");
    let opts = Options {
        socket: sock.clone(),
        group: None,
        listen: None,
        token_file: dir.0.join("api.token"),
        token_from: None,
        tls: None,
        insecure_listen: false,
        credentials: None,
    };
    std::fs::write(&sock, "not a socket").unwrap();
    let e = Server::start(&opts).err().expect("a file is not replaced");
    assert!(e.to_string().contains("is not a socket"), "{e:#}");
    assert_eq!(std::fs::read_to_string(&sock).unwrap(), "not a socket");
    std::fs::remove_file(&sock).unwrap();

    let first = Server::start(&opts).unwrap();
    let e = Server::start(&opts)
        .err()
        .expect("a live server is not displaced");
    assert!(e.to_string().contains("already listens"), "{e:#}");
    first.stop().unwrap();

    // A socket whose server died (bound, never served) is replaced.
    drop(std::os::unix::net::UnixListener::bind(&sock).unwrap());
    let again = Server::start(&opts).unwrap();
    assert_eq!(
        get(&Target::Unix(sock.clone()), "/openapi.json", &[]).status,
        200
    );
    again.stop().unwrap();

    // A directory others can write is not trusted with the socket.
    let open = dir.0.join("open");
    std::fs::DirBuilder::new()
        .mode(0o777)
        .create(&open)
        .unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    let e = Server::start(&Options {
        socket: open.join("api.sock"),
        ..opts
    })
    .err()
    .expect("an untrusted directory is refused");
    assert!(e.to_string().contains("writable by others"), "{e:#}");
}

#[test]
fn a_group_may_use_the_socket_when_given_and_an_unknown_one_is_refused() {
    use std::os::unix::fs::MetadataExt;
    let dir = TempDir::new("serve-group");
    let opts = |group: &str| Options {
        socket: dir.0.join("api.sock"),
        group: Some(group.to_owned()),
        listen: None,
        token_file: dir.0.join("api.token"),
        token_from: None,
        tls: None,
        insecure_listen: false,
        credentials: None,
    };
    let e = format!(
        "{:#}",
        Server::start(&opts("rtemu-no-such-group")).err().unwrap()
    );
    assert!(e.contains("groupadd --system rtemu-no-such-group"), "{e}");
    assert!(!dir.0.join("api.sock").exists());

    // Giving the socket to a group the server's user is not in needs root.
    if !rtemu_testutil::root_or_skip("a_group_may_use_the_socket", "gives a socket to a group") {
        return;
    }
    // `daemon` (gid 1) is in every Debian base system.
    let s = Server::start(&opts("daemon")).unwrap();
    let meta = std::fs::symlink_metadata(dir.0.join("api.sock")).unwrap();
    assert_eq!(meta.mode() & 0o777, 0o660);
    assert_eq!(meta.gid(), 1);
    assert_eq!(meta.uid(), 0);
    let t = Target::Unix(dir.0.join("api.sock"));
    assert_eq!(get(&t, "/openapi.json", &[]).status, 200);
    s.stop().unwrap();

    // Without a group, root alone.
    let mut root_only = opts("daemon");
    root_only.group = None;
    let s = Server::start(&root_only).unwrap();
    let meta = std::fs::symlink_metadata(dir.0.join("api.sock")).unwrap();
    assert_eq!(meta.mode() & 0o777, 0o600);
    assert_eq!(meta.gid(), 0);
    s.stop().unwrap();
}

#[test]
fn served_openapi_matches_the_checked_in_document() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/openapi.json");
    let doc = rtemu_serve::openapi_json();
    if std::env::var_os("RTEMU_WRITE_OPENAPI").is_some_and(|v| v == "1") {
        std::fs::write(&path, &doc).unwrap();
    }
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        checked_in == doc,
        "docs/openapi.json differs from the document the server serves; regenerate it with \
         `RTEMU_WRITE_OPENAPI=1 cargo test -p rtemu-serve --test serve served_openapi` or \
         `rtemu serve --print-openapi > docs/openapi.json`"
    );
    let dir = TempDir::new("serve-openapi");
    let s = server(&dir.0);
    let served = get(&Target::Unix(dir.0.join("api.sock")), "/openapi.json", &[]);
    assert_eq!(served.status, 200);
    assert_eq!(served.header("content-type"), Some("application/json"));
    assert_eq!(served.text(), checked_in);
    let parsed: serde_json::Value = served.json().unwrap();
    assert!(parsed["openapi"].as_str().unwrap().starts_with("3.1"));
    for path in [
        "/v1/labs",
        "/v1/labs/{lab}",
        "/v1/labs/{lab}/links/{link}/schedule",
        "/v1/labs/{lab}/stats/stream",
        "/v1/labs/{lab}/counters",
        "/v1/labs/{lab}/capture",
        "/v1/labs/{lab}/nodes/{node}/exec",
    ] {
        assert!(
            parsed["paths"][path].is_object(),
            "{path} is not documented"
        );
    }
    s.stop().unwrap();
}

#[test]
fn errors_carry_the_cli_text_and_a_status() {
    let dir = TempDir::new("serve-errors");
    let s = server(&dir.0);
    let t = Target::Unix(dir.0.join("api.sock"));
    let e = error(&get(&t, "/v1/labs/Bad_Name", &[]), 400);
    assert!(
        e.starts_with("invalid lab name \"Bad_Name\": use 1 to 12 characters"),
        "{e}"
    );
    let e = error(&get(&t, "/v1/labs/nosuchlab9999/nodes", &[]), 400);
    assert!(e.contains("invalid lab name"), "{e}");
    assert!(error(&get(&t, "/v2/labs", &[]), 404).contains("under /v1"));
    let r = request(&t, "PUT", "/v1/labs", &[], None, WAIT).unwrap();
    assert_eq!(r.status, 405);

    // Bad TOML, and a bad value, point at the line and column of the request's text.
    let r = post(
        &t,
        "/v1/labs",
        &serde_json::json!({"topology": "lab = \"x\"\n[nodes.a\n"}),
    );
    let e = error(&r, 400);
    assert!(e.starts_with("<request>:2:"), "{e}");
    let bad_netem = "lab = \"x\"\n[nodes.a]\n[nodes.b]\n[[links]]\nendpoints = [\"a\", \"b\"]\nnetem = \"delay 5 parsecs\"\n";
    let e = error(
        &post(&t, "/v1/labs", &serde_json::json!({"topology": bad_netem})),
        400,
    );
    assert!(e.starts_with("<request>:6:"), "{e}");
    // Neither or both of topology and file; unknown fields; no JSON at all.
    let e = error(&post(&t, "/v1/labs", &serde_json::json!({})), 400);
    assert!(e.contains("exactly one of `topology`"), "{e}");
    let e = error(
        &post(
            &t,
            "/v1/labs",
            &serde_json::json!({"topology": "", "file": "x"}),
        ),
        400,
    );
    assert!(e.contains("exactly one of `topology`"), "{e}");
    let e = error(
        &post(&t, "/v1/labs", &serde_json::json!({"topo": "x"})),
        400,
    );
    assert!(e.contains("unknown field `topo`"), "{e}");
    let r = request(&t, "POST", "/v1/labs", &[], None, WAIT).unwrap();
    assert_eq!(r.status, 415);
    let e = error(
        &post(
            &t,
            "/v1/labs",
            &serde_json::json!({"file": "/nonexistent/t.toml"}),
        ),
        400,
    );
    assert!(e.starts_with("cannot read /nonexistent/t.toml"), "{e}");
    let named = serde_json::json!({"topology": "lab = \"x\"\n[nodes.a]\n", "name": "No"});
    let e = error(&post(&t, "/v1/labs", &named), 400);
    assert!(e.starts_with("invalid lab name \"No\""), "{e}");

    // Query parameters are checked before the lab is looked for.
    let e = error(&get(&t, "/v1/labs/anylab/capture?target=a:eth0", &[]), 400);
    assert!(e.contains("needs a limit"), "{e}");
    let e = error(
        &get(&t, "/v1/labs/anylab/stats/stream?interval=0", &[]),
        400,
    );
    assert!(e.contains("from 0.05 to 3600"), "{e}");
    let e = error(
        &post(
            &t,
            "/v1/labs/anylab/nodes/a/exec",
            &serde_json::json!({"argv": []}),
        ),
        400,
    );
    assert!(e.contains("1 to 256 elements"), "{e}");

    if root_or_skip("errors_carry_the_cli_text_and_a_status (unknown lab)") {
        let lab = unique_lab("none");
        let e = error(&get(&t, &format!("/v1/labs/{lab}"), &[]), 404);
        assert_eq!(
            e,
            format!("no lab `{lab}` is running (`rtemu ls` lists the labs)")
        );
        let r = post(
            &t,
            &format!("/v1/labs/{lab}/links/x/set"),
            &serde_json::json!({"netem": "delay 1ms"}),
        );
        assert_eq!(r.status, 404);
    }
    s.stop().unwrap();
}

#[test]
fn an_agent_refuses_a_part_that_does_not_fit_its_file_or_this_machine() {
    let dir = TempDir::new("serve-parts");
    let s = server(&dir.0);
    let t = Target::Unix(dir.0.join("api.sock"));
    let r = get(&t, "/v1/vnis", &[]);
    assert_eq!(r.status, 200, "{}", r.text());
    let vnis: serde_json::Value = r.json().unwrap();
    assert!(vnis["vnis"].is_array(), "{vnis}");

    let src = "lab = \"p\"\n[hosts]\nh1 = { address = \"192.0.2.1\" }\n\
               h2 = { address = \"192.0.2.2\" }\n[nodes.a]\nhost = \"h1\"\n\
               [nodes.b]\nhost = \"h2\"\n[[links]]\nname = \"ab\"\nendpoints = [\"a\", \"b\"]\n";
    let part = |host: &str, vnis: serde_json::Value| {
        serde_json::json!({"topology": src, "file": "split.toml", "host": host,
                           "stitching": {"port": 4789, "vnis": vnis}})
    };
    let ok_vnis = serde_json::json!({"ab": 1_048_576});
    // Errors name the file the coordinator read.
    let bad = serde_json::json!({"topology": "lab = 1\n", "file": "split.toml", "host": "h1",
                                 "stitching": {"port": 4789, "vnis": {}}});
    let e = error(&post(&t, "/v1/parts", &bad), 400);
    assert!(e.starts_with("split.toml:1:7: "), "{e}");
    let e = error(&post(&t, "/v1/parts", &part("h9", ok_vnis.clone())), 400);
    assert_eq!(e, "lab `p` has no host `h9`; its hosts are h1, h2");
    let e = error(
        &post(&t, "/v1/parts", &part("h1", serde_json::json!({}))),
        400,
    );
    assert_eq!(
        e,
        "segment `ab` spans hosts but the stitching gives it no VNI"
    );
    if root_or_skip("an_agent_refuses_a_part (not this host)") {
        // No interface of this machine holds 192.0.2.1.
        let e = error(&post(&t, "/v1/parts", &part("h1", ok_vnis)), 409);
        assert!(
            e.starts_with("host `h1`'s address 192.0.2.1 is on no interface here"),
            "{e}"
        );
    }
    s.stop().unwrap();
}

/// Takes the lab down when dropped, whatever happened.
struct Guard(String);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = rtemu_topo::lab::down(&self.0);
    }
}

#[test]
fn a_lab_of_ideal_links_through_the_api() {
    if !root_or_skip("a_lab_of_ideal_links_through_the_api") {
        return;
    }
    let lab = unique_lab("ideal");
    let _guard = Guard(lab.clone());
    let dir = TempDir::new("serve-ideal");
    let s = server(&dir.0);
    let t = Target::Unix(dir.0.join("api.sock"));
    let topo = format!(
        "lab = \"{lab}\"\nneighbours = \"static\"\n[nodes.a]\n[nodes.b]\n[nodes.c]\n\
         [[links]]\nname = \"ab\"\nendpoints = [\"a\", \"b\"]\n\
         [[lans]]\nname = \"office\"\nmembers = [\"b\", \"c\"]\n"
    );
    let r = post(&t, "/v1/labs", &serde_json::json!({"topology": topo}));
    assert_eq!(r.status, 201, "{}", r.text());
    let up: serde_json::Value = r.json().unwrap();
    assert_eq!(up["name"], lab.as_str());
    assert_eq!(up["status"], "up");
    assert_eq!(up["file"], "<request>");
    assert_eq!(up["externals"], serde_json::json!([]));
    // A second up of the same name is a conflict, unless it replaces.
    let e = error(
        &post(&t, "/v1/labs", &serde_json::json!({"topology": topo})),
        409,
    );
    assert!(e.contains("already exists"), "{e}");

    let labs: Vec<serde_json::Value> = get(&t, "/v1/labs", &[]).json().unwrap();
    assert!(labs.iter().any(|l| l["name"] == lab.as_str()));
    let nodes: Vec<serde_json::Value> = get(&t, &format!("/v1/labs/{lab}/nodes"), &[])
        .json()
        .unwrap();
    assert_eq!(nodes.len(), 3);
    assert_eq!(nodes[1]["netns"], format!("rtemu-{lab}.b"));
    assert_eq!(nodes[1]["interfaces"].as_array().unwrap().len(), 2);
    let links: Vec<serde_json::Value> = get(&t, &format!("/v1/labs/{lab}/links"), &[])
        .json()
        .unwrap();
    assert_eq!(links.len(), 1);
    assert_eq!(
        (&links[0]["a"], &links[0]["b"], &links[0]["impaired"]),
        (&"a".into(), &"b".into(), &false.into())
    );
    let lans: Vec<serde_json::Value> = get(&t, &format!("/v1/labs/{lab}/lans"), &[])
        .json()
        .unwrap();
    assert_eq!(lans[0]["members"], serde_json::json!(["b", "c"]));

    // exec: an argv, its output and status; a node that does not exist; a time limit.
    let exec = |node: &str, body: serde_json::Value| {
        post(&t, &format!("/v1/labs/{lab}/nodes/{node}/exec"), &body)
    };
    let r = exec(
        "a",
        serde_json::json!({"argv": ["ping", "-c", "2", "-i", "0.2", "-W", "2", "b"]}),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let out: serde_json::Value = r.json().unwrap();
    assert_eq!(out["status"], 0, "{out}");
    assert!(
        out["stdout"].as_str().unwrap().contains("2 received"),
        "{out}"
    );
    assert_eq!(out["timed_out"], false);
    // The ideal link's kernel counters saw the pings: a sent what b received.
    let counters: Vec<serde_json::Value> = get(&t, &format!("/v1/labs/{lab}/counters"), &[])
        .json()
        .unwrap();
    assert_eq!(counters.len(), 4, "{counters:?}");
    let on_ab = |node: &str| {
        counters
            .iter()
            .find(|c| c["node"] == node && c["segment"] == "ab")
            .unwrap_or_else(|| panic!("no counters of {node} on ab: {counters:?}"))
    };
    let (a, b) = (on_ab("a"), on_ab("b"));
    let n = |c: &serde_json::Value, k: &str| c[k].as_u64().unwrap();
    assert!(
        n(a, "tx_packets") >= 2 && n(b, "rx_packets") >= 2,
        "{a} {b}"
    );
    assert_eq!(n(a, "tx_packets"), n(b, "rx_packets"));
    assert_eq!(n(a, "tx_bytes"), n(b, "rx_bytes"));
    assert!(n(a, "tx_bytes") >= 2 * 98, "two echo requests: {a}");
    // Only the nodes asked for: b's interfaces, read after a's (its counters did not go back).
    let only_b: Vec<serde_json::Value> = get(&t, &format!("/v1/labs/{lab}/counters?node=b"), &[])
        .json()
        .unwrap();
    assert!(!only_b.is_empty() && only_b.iter().all(|c| c["node"] == "b"));
    assert_eq!(
        only_b.len(),
        counters.iter().filter(|c| c["node"] == "b").count()
    );
    let b_again = only_b.iter().find(|c| c["segment"] == "ab").unwrap();
    assert!(n(b_again, "rx_packets") >= n(b, "rx_packets"));
    let r = get(&t, &format!("/v1/labs/{lab}/counters?node=b&node=zz"), &[]);
    assert_eq!(r.status, 404, "{}", r.text());
    assert!(r.text().contains(r#"has no node \"zz\""#), "{}", r.text());
    let r = exec(
        "a",
        serde_json::json!({"argv": ["sh", "-c", "echo out; echo err >&2; exit 3"]}),
    );
    let out: serde_json::Value = r.json().unwrap();
    assert_eq!(
        (&out["status"], &out["stdout"], &out["stderr"]),
        (&3.into(), &"out\n".into(), &"err\n".into())
    );
    let r = exec(
        "a",
        serde_json::json!({"argv": ["sh", "-c", "sleep 30 & sleep 30"], "timeout": 0.3}),
    );
    let out: serde_json::Value = r.json().unwrap();
    assert_eq!(out["timed_out"], true, "{out}");
    assert_eq!(out["status"], serde_json::Value::Null);
    assert_eq!(out["signal"], 9);
    assert!(out["duration"].as_f64().unwrap() < 5.0, "{out}");
    let e = error(&exec("zz", serde_json::json!({"argv": ["true"]})), 404);
    assert!(e.contains("has no node `zz`; its nodes are a, b, c"), "{e}");
    let e = error(
        &exec("a", serde_json::json!({"argv": ["/nonexistent/program"]})),
        400,
    );
    assert!(e.contains("/nonexistent/program"), "{e}");

    // Stats of a lab without an engine: no directions, no engine.
    let stats: serde_json::Value = get(&t, &format!("/v1/labs/{lab}/stats"), &[])
        .json()
        .unwrap();
    assert_eq!(stats["directions"], serde_json::json!([]));
    assert_eq!(stats["pid"], serde_json::Value::Null);
    // Only impaired links change.
    let e = error(
        &post(
            &t,
            &format!("/v1/labs/{lab}/links/ab/set"),
            &serde_json::json!({"netem": "delay 1ms"}),
        ),
        400,
    );
    assert!(e.contains("is ideal"), "{e}");
    let e = error(
        &post(
            &t,
            &format!("/v1/labs/{lab}/links/nope/down"),
            &serde_json::json!({}),
        ),
        404,
    );
    assert!(e.contains("has no link `nope`; its links are ab"), "{e}");

    // A capture of link ab while a pings b: a pcapng file with its packets.
    let capture = {
        let t = t.clone();
        let path = format!("/v1/labs/{lab}/capture?target=ab&count=4&duration=20");
        std::thread::spawn(move || request(&t, "GET", &path, &[], None, WAIT).unwrap())
    };
    std::thread::sleep(Duration::from_millis(500));
    exec(
        "a",
        serde_json::json!({"argv": ["ping", "-c", "3", "-i", "0.2", "b"]}),
    );
    let r = capture.join().unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.header("content-type"), Some("application/x-pcapng"));
    assert_eq!(
        &r.body[..4],
        &[0x0a, 0x0d, 0x0d, 0x0a],
        "a section header block"
    );
    assert_eq!(rtemu_topo::pcapng::read(&r.body).unwrap().packets.len(), 4);
    let e = error(
        &get(
            &t,
            &format!("/v1/labs/{lab}/capture?target=zz:eth9&count=1"),
            &[],
        ),
        400,
    );
    assert!(e.contains("`zz:eth9` is not an interface or a link"), "{e}");

    // At most MAX_STATS_STREAMS streams at once: one more is 503 until one ends.
    let path = format!("/v1/labs/{lab}/stats/stream?interval=0.05");
    let open: Vec<_> = (0..rtemu_serve::routes::MAX_STATS_STREAMS)
        .map(|_| request_streaming(&t, "GET", &path, &[], None, WAIT).unwrap())
        .collect();
    assert!(open.iter().all(|s| s.status == 200));
    let one_more = format!("{path}&count=1");
    let e = error(&get(&t, &one_more, &[]), 503);
    assert!(e.contains("stats streams are open"), "{e}");
    drop(open);
    let started = std::time::Instant::now();
    while get(&t, &one_more, &[]).status == 503 {
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "no place given back"
        );
        std::thread::sleep(Duration::from_millis(50));
    }

    // A stream without a count ends with `event: end` when the lab goes down.
    let stream = {
        let t = t.clone();
        let path = format!("/v1/labs/{lab}/stats/stream?interval=0.05");
        std::thread::spawn(move || request(&t, "GET", &path, &[], None, WAIT).unwrap())
    };
    std::thread::sleep(Duration::from_millis(300));
    let r = request(&t, "DELETE", &format!("/v1/labs/{lab}"), &[], None, WAIT).unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    let events = stream.join().unwrap().text();
    assert!(events.matches("event: stats\n").count() >= 2, "{events}");
    assert!(events.ends_with("event: end\ndata: {}\n\n"), "{events}");
    let down: serde_json::Value = r.json().unwrap();
    assert_eq!(
        down,
        serde_json::json!({"lab": lab, "removed": true, "report": null})
    );
    assert!(
        lab_namespaces(&lab).is_empty(),
        "{:?}",
        lab_namespaces(&lab)
    );
    let again: serde_json::Value =
        request(&t, "DELETE", &format!("/v1/labs/{lab}"), &[], None, WAIT)
            .unwrap()
            .json()
            .unwrap();
    assert_eq!(again["removed"], false);
    s.stop().unwrap();
}

/// A flood of idle TCP connections, more than the server holds, never keeps the Unix socket
/// from answering: connections over TCP's bounds are closed as they come, and the ones held
/// are closed when they send no request within the header timeout.
#[test]
fn a_flood_of_idle_connections_leaves_the_unix_socket_served() {
    use rtemu_serve::connections::{HEAD_TIMEOUT, TCP};
    use std::io::Read as _;
    let dir = TempDir::new("serve-flood");
    let s = server(&dir.0);
    let addr = s.tcp_addr().unwrap();
    let flood: Vec<std::net::TcpStream> = (0..TCP.total + 100)
        .map(|_| std::net::TcpStream::connect(addr).unwrap())
        .collect();
    for c in &flood {
        c.set_nonblocking(true).unwrap();
    }
    // How many the server still holds open (nothing to read yet, rather than end of file).
    let held = || {
        flood
            .iter()
            .filter(|c| {
                let mut c: &std::net::TcpStream = c;
                matches!(c.read(&mut [0u8; 1]), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
            })
            .count()
    };
    let started = std::time::Instant::now();
    while held() > TCP.per_peer && started.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(50));
    }
    // One peer (127.0.0.1) holds at most its bound; the rest were closed at once.
    assert_eq!(held(), TCP.per_peer);
    let unix = Target::Unix(dir.0.join("api.sock"));
    let asked = std::time::Instant::now();
    assert_eq!(get(&unix, "/v1/labs", &[]).status, 200);
    assert!(
        asked.elapsed() < Duration::from_secs(2),
        "{:?}",
        asked.elapsed()
    );
    // The held ones sent nothing: closed after the header timeout, and a client is served again.
    std::thread::sleep(HEAD_TIMEOUT + Duration::from_secs(1));
    assert_eq!(held(), 0);
    let bearer = format!("Bearer {}", s.token().unwrap());
    let tcp = Target::Tcp(addr);
    assert_eq!(
        get(&tcp, "/v1/labs", &[("Authorization", &bearer)]).status,
        200
    );
    s.stop().unwrap();
}
