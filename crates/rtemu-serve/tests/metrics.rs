//! `GET /metrics` as its users meet it: the server's access rules, and the Grafana dashboard
//! (deploy/grafana/rtemu.json), whose every query must name only metrics the server writes.
//! A real Prometheus scraping a lab is python/tests/test_prometheus.py.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use promql_parser::parser::Expr;
use promql_parser::util::{walk_expr, ExprVisitor};
use rtemu_api::client::{request, Target};
use rtemu_serve::metrics::exposition::{Kind, CONTENT_TYPE};
use rtemu_serve::metrics::FAMILIES;
use rtemu_serve::{Options, Server};
use rtemu_testutil::TempDir;

/// Every series name the server may write: each family's, and a histogram's `_bucket` and
/// `_count`.
fn series_names() -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for f in FAMILIES {
        match f.kind {
            Kind::Histogram => {
                names.insert(format!("{}_bucket", f.name));
                names.insert(format!("{}_count", f.name));
            }
            Kind::Counter | Kind::Gauge => {
                names.insert(f.name.to_owned());
            }
        }
    }
    names
}

/// The metric names a PromQL expression selects; an error for a selector without a name.
struct Names(Vec<String>);

impl ExprVisitor for Names {
    type Error = String;

    fn pre_visit(&mut self, expr: &Expr) -> Result<bool, String> {
        let selector = match expr {
            Expr::VectorSelector(vs) => vs,
            Expr::MatrixSelector(ms) => &ms.vs,
            _ => return Ok(true),
        };
        let name = selector
            .name
            .clone()
            .ok_or_else(|| format!("a selector without a metric name: {selector}"))?;
        self.0.push(name);
        Ok(true)
    }
}

/// Every PromQL expression of the dashboard `dash`: its panels' targets (in rows too) and its
/// template variables' `label_values(SELECTOR, LABEL)` queries, with Grafana's variables made
/// PromQL (`$__rate_interval` a duration; `$lab`-style ones are inside label matchers' strings
/// already).
fn expressions(dash: &serde_json::Value) -> Vec<String> {
    fn panels(list: &serde_json::Value, out: &mut Vec<String>) {
        for p in list.as_array().into_iter().flatten() {
            for t in p["targets"].as_array().into_iter().flatten() {
                out.push(
                    t["expr"]
                        .as_str()
                        .expect("every target has an expr")
                        .to_owned(),
                );
            }
            panels(&p["panels"], out);
        }
    }
    let mut out = Vec::new();
    panels(&dash["panels"], &mut out);
    for var in dash["templating"]["list"].as_array().into_iter().flatten() {
        if var["type"] != "query" {
            continue;
        }
        let query = var["query"]["query"]
            .as_str()
            .expect("a query variable's query");
        let selector = query
            .strip_prefix("label_values(")
            .and_then(|q| q.rsplit_once(','))
            .map(|(s, _)| s)
            .unwrap_or_else(|| panic!("variable {}: not label_values(…): {query}", var["name"]));
        out.push(selector.to_owned());
    }
    out.into_iter()
        .map(|e| e.replace("$__rate_interval", "1m"))
        .collect()
}

#[test]
fn every_dashboard_query_names_only_metrics_the_server_writes() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/grafana/rtemu.json");
    let dash: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let known = series_names();
    let exprs = expressions(&dash);
    assert!(
        exprs.len() >= 20,
        "the dashboard has {} queries",
        exprs.len()
    );
    let mut used = BTreeSet::new();
    for e in &exprs {
        let parsed = promql_parser::parser::parse(e).unwrap_or_else(|err| panic!("{e}: {err}"));
        let mut names = Names(Vec::new());
        walk_expr(&mut names, &parsed).unwrap_or_else(|err| panic!("{e}: {err}"));
        assert!(!names.0.is_empty(), "{e} selects no metric");
        for n in names.0 {
            assert!(
                known.contains(&n),
                "{e}: {n} is not a metric the server writes"
            );
            used.insert(n);
        }
    }
    // The dashboard shows what matters: throughput, drops, the queue, release fidelity and
    // the engine's threads.
    for needed in [
        "rtemu_link_delivered_bytes_total",
        "rtemu_link_dropped_frames_total",
        "rtemu_link_in_flight_frames",
        "rtemu_link_release_error_seconds_bucket",
        "rtemu_engine_thread_cpu_seconds_total",
        "rtemu_lab_status",
    ] {
        assert!(
            used.contains(needed),
            "the dashboard does not show {needed}"
        );
    }
}

#[test]
fn the_check_finds_a_name_the_server_does_not_write() {
    let dash = serde_json::json!({
        "panels": [{"type": "row", "panels": [{"targets": [
            {"expr": "sum by (lab) (rate(rtemu_link_delivered_bytes_total[$__rate_interval]))"},
            {"expr": "rate(rtemu_link_bogus_total{lab=~\"$lab\"}[5m]) / on (lab) rtemu_labs"},
        ]}]}],
        "templating": {"list": [{"name": "lab", "type": "query",
            "query": {"query": "label_values(rtemu_lab_status{lab!=\"\"}, lab)"}}]},
    });
    let exprs = expressions(&dash);
    assert_eq!(exprs.len(), 3);
    let mut names = Names(Vec::new());
    for e in &exprs {
        walk_expr(&mut names, &promql_parser::parser::parse(e).unwrap()).unwrap();
    }
    let unknown: Vec<_> = names
        .0
        .iter()
        .filter(|n| !series_names().contains(*n))
        .collect();
    assert_eq!(unknown, ["rtemu_link_bogus_total"]);
    let nameless = promql_parser::parser::parse("{__name__=~\"rtemu_.*\"}").unwrap();
    assert!(walk_expr(&mut Names(Vec::new()), &nameless).is_err());
}

#[test]
fn metrics_follow_the_server_s_access_rules() {
    let dir = TempDir::new("serve-metrics");
    let server = Server::start(&Options {
        socket: dir.0.join("api.sock"),
        group: None,
        listen: Some("127.0.0.1:0".parse().unwrap()),
        token_file: dir.0.join("api.token"),
        token_from: None,
        tls: None,
        insecure_listen: false,
        credentials: None,
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
