//! `GET /metrics` as its users meet it: the server's access rules.

use std::time::Duration;

use rtemu_serve::client::{request, Target};
use rtemu_serve::metrics::exposition::CONTENT_TYPE;
use rtemu_serve::{Options, Server};
use rtemu_testutil::TempDir;

#[test]
fn metrics_follow_the_server_s_access_rules() {
    let dir = TempDir::new("serve-metrics");
    let server = Server::start(&Options {
        socket: dir.0.join("api.sock"),
        group: None,
        listen: Some("127.0.0.1:0".parse().unwrap()),
        token_file: dir.0.join("api.token"),
        token_from: None,
    })
    .unwrap();
    let wait = Duration::from_secs(30);
    let tcp = Target::Tcp(server.tcp_addr().unwrap());
    let bearer = format!("Bearer {}", server.token().unwrap());
    let get = |t: &Target, headers: &[(&str, &str)]| {
        request(t, "GET", "/metrics", headers, None, wait).unwrap()
    };
    assert_eq!(get(&tcp, &[]).status, 401);
    assert_eq!(get(&tcp, &[("Authorization", "Bearer nope")]).status, 401);
    for (target, headers) in [
        (&tcp, vec![("Authorization", bearer.as_str())]),
        (&Target::Unix(dir.0.join("api.sock")), vec![]),
    ] {
        let reply = get(target, &headers);
        assert_eq!(reply.status, 200, "{}", reply.text());
        assert_eq!(reply.header("content-type"), Some(CONTENT_TYPE));
        let text = reply.text();
        assert!(text.starts_with("# HELP rtemu_labs "), "{text}");
        assert!(
            text.contains("\n# TYPE rtemu_labs gauge\nrtemu_labs "),
            "{text}"
        );
    }
    server.stop().unwrap();
}
