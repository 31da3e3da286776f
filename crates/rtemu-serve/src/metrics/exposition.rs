//! Prometheus's text exposition format, version 0.0.4: what `GET /metrics` answers and every
//! Prometheus since 2.0 (and other scrapers: the OpenTelemetry collector, VictoriaMetrics,
//! Grafana Agent) reads.
//!
//! A family is its `# HELP` and `# TYPE` lines, then all its samples, one a line: the name
//! (with `_bucket`/`_count` for a histogram), the labels `{name="value",…}` and the value.
//! Label values escape `\`, `"` and line feeds; help texts escape `\` and line feeds. Names
//! are fixed by the caller (checked by its tests), never taken from input.

use std::fmt::Write;

/// The media type of the format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// What a family's samples mean, as its `# TYPE` line says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Only grows (it starts over when its source restarts); its name ends in `_total`.
    Counter,
    /// Goes up and down.
    Gauge,
    /// Cumulative buckets: `_bucket{le="…"}` for each upper bound, the last `+Inf`, and
    /// `_count`.
    Histogram,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        }
    }
}

/// A metric family: its name, kind and help text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Family {
    /// Its name (`[a-zA-Z_:][a-zA-Z0-9_:]*`; base units and `_total` in it).
    pub name: &'static str,
    /// What its samples mean.
    pub kind: Kind,
    /// One line saying what it counts or measures.
    pub help: &'static str,
}

/// A sample's value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value {
    /// An exact count.
    Int(u64),
    /// A measure (seconds, or a ratio).
    Float(f64),
}

impl Value {
    /// Nanoseconds as seconds, the base unit.
    pub fn seconds(ns: u64) -> Value {
        Value::Float(ns as f64 / 1e9)
    }

    /// `true` as 1, `false` as 0.
    pub fn flag(b: bool) -> Value {
        Value::Int(u64::from(b))
    }
}

/// Labels of a sample, in the order written.
pub type Labels = Vec<(&'static str, String)>;

/// One sample of a family (one series, or for a histogram, one set of buckets).
#[derive(Debug, Clone, PartialEq)]
pub enum Sample {
    /// A counter's or gauge's value.
    Value(Labels, Value),
    /// A histogram: the count in each bucket (not cumulative) with the bucket's upper bound,
    /// increasing, and the count above the last bound.
    Histogram(Labels, Vec<(f64, u64)>, u64),
}

/// Writes `families`, each with its samples; families without samples are left out.
pub fn encode(families: &[(Family, Vec<Sample>)]) -> String {
    let mut out = String::new();
    for (family, samples) in families.iter().filter(|(_, s)| !s.is_empty()) {
        write_family(&mut out, family, samples);
    }
    out
}

fn write_family(out: &mut String, family: &Family, samples: &[Sample]) {
    out.push_str("# HELP ");
    out.push_str(family.name);
    out.push(' ');
    escape_help(out, family.help);
    out.push('\n');
    let _ = writeln!(out, "# TYPE {} {}", family.name, family.kind.as_str());
    for sample in samples {
        match sample {
            Sample::Value(labels, value) => line(out, family.name, "", labels, None, *value),
            Sample::Histogram(labels, buckets, above) => {
                let mut cumulative = 0;
                for &(le, count) in buckets {
                    cumulative += count;
                    let le = Some(format_float(le));
                    line(
                        out,
                        family.name,
                        "_bucket",
                        labels,
                        le,
                        Value::Int(cumulative),
                    );
                }
                let total = Value::Int(cumulative + above);
                line(
                    out,
                    family.name,
                    "_bucket",
                    labels,
                    Some("+Inf".into()),
                    total,
                );
                line(out, family.name, "_count", labels, None, total);
            }
        }
    }
}

/// `name{labels} value`, with `le` after the labels when given.
fn line(
    out: &mut String,
    name: &str,
    suffix: &str,
    labels: &Labels,
    le: Option<String>,
    value: Value,
) {
    out.push_str(name);
    out.push_str(suffix);
    let le = le.map(|v| ("le", v));
    let mut all = labels.iter().chain(le.as_ref()).peekable();
    if all.peek().is_some() {
        out.push('{');
        for (i, (k, v)) in all.enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(k);
            out.push_str("=\"");
            escape_label_value(out, v);
            out.push('"');
        }
        out.push('}');
    }
    out.push(' ');
    match value {
        Value::Int(n) => {
            let _ = write!(out, "{n}");
        }
        Value::Float(x) => out.push_str(&format_float(x)),
    }
    out.push('\n');
}

/// A float as the format reads it: Go's `ParseFloat` syntax, `+Inf`, `-Inf` and `NaN` spelled
/// as the format wants (Rust writes finite numbers in full, never with an exponent).
fn format_float(x: f64) -> String {
    if x.is_nan() {
        "NaN".into()
    } else if x.is_infinite() {
        if x > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else {
        format!("{x}")
    }
}

fn escape_label_value(out: &mut String, v: &str) {
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

fn escape_help(out: &mut String, v: &str) {
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

/// Whether `name` is a valid metric name (`[a-zA-Z_:][a-zA-Z0-9_:]*`).
pub fn valid_metric_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

/// Whether `name` is a valid label name (`[a-zA-Z_][a-zA-Z0-9_]*`, not starting with `__`,
/// which Prometheus keeps for itself).
pub fn valid_label_name(name: &str) -> bool {
    let mut chars = name.chars();
    !name.starts_with("__")
        && chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    const REQUESTS: Family = Family {
        name: "demo_requests_total",
        kind: Kind::Counter,
        help: "Requests, by path \\ and \"method\"\nsecond line",
    };
    const LATENCY: Family = Family {
        name: "demo_latency_seconds",
        kind: Kind::Histogram,
        help: "Latency",
    };
    const EMPTY: Family = Family {
        name: "demo_nothing",
        kind: Kind::Gauge,
        help: "Never written",
    };

    fn labels(pairs: &[(&'static str, &str)]) -> Labels {
        pairs.iter().map(|&(k, v)| (k, v.to_owned())).collect()
    }

    #[test]
    fn families_samples_and_escapes_read_as_the_format_says() {
        let text = encode(&[
            (
                REQUESTS,
                vec![
                    Sample::Value(labels(&[("path", "/a\"b\\c\nd")]), Value::Int(3)),
                    Sample::Value(Vec::new(), Value::Int(u64::MAX)),
                ],
            ),
            (EMPTY, Vec::new()),
            (
                LATENCY,
                vec![Sample::Histogram(
                    labels(&[("lab", "x")]),
                    vec![(0.000001, 2), (0.25, 0), (1.0, 5)],
                    1,
                )],
            ),
        ]);
        let want = "\
# HELP demo_requests_total Requests, by path \\\\ and \"method\"\\nsecond line
# TYPE demo_requests_total counter
demo_requests_total{path=\"/a\\\"b\\\\c\\nd\"} 3
demo_requests_total 18446744073709551615
# HELP demo_latency_seconds Latency
# TYPE demo_latency_seconds histogram
demo_latency_seconds_bucket{lab=\"x\",le=\"0.000001\"} 2
demo_latency_seconds_bucket{lab=\"x\",le=\"0.25\"} 2
demo_latency_seconds_bucket{lab=\"x\",le=\"1\"} 7
demo_latency_seconds_bucket{lab=\"x\",le=\"+Inf\"} 8
demo_latency_seconds_count{lab=\"x\"} 8
";
        assert_eq!(text, want);
    }

    #[test]
    fn floats_are_written_in_full_and_the_special_values_by_name() {
        assert_eq!(format_float(1e-6), "0.000001");
        assert_eq!(format_float(0.1), "0.1");
        assert_eq!(format_float(2.0), "2");
        assert_eq!(format_float(1e21), "1000000000000000000000");
        assert_eq!(format_float(f64::INFINITY), "+Inf");
        assert_eq!(format_float(f64::NEG_INFINITY), "-Inf");
        assert_eq!(format_float(f64::NAN), "NaN");
        assert_eq!(Value::seconds(1_500), Value::Float(0.0000015));
        // Every float reads back as itself.
        for x in [1e-9, 123.456e-7, 0.3, 9.007199254740993e15] {
            assert_eq!(format_float(x).parse::<f64>().unwrap(), x);
        }
    }

    /// A label value as a reader of the format unescapes it; `None` when a bare `"` would end
    /// it early or an escape is not one of the three.
    fn unescape(s: &str) -> Option<String> {
        let mut out = String::new();
        let mut chars = s.chars();
        while let Some(c) = chars.next() {
            match c {
                '"' | '\n' => return None,
                '\\' => out.push(match chars.next()? {
                    '\\' => '\\',
                    '"' => '"',
                    'n' => '\n',
                    _ => return None,
                }),
                c => out.push(c),
            }
        }
        Some(out)
    }

    proptest::proptest! {
        #[test]
        fn any_label_value_reads_back_as_itself(v in proptest::prelude::any::<String>()) {
            let mut out = String::new();
            escape_label_value(&mut out, &v);
            proptest::prop_assert_eq!(unescape(&out), Some(v));
        }
    }

    #[test]
    fn names_are_checked_as_the_format_defines_them() {
        for good in ["a", "rtemu_link_received_bytes_total", "_x", "job:rate5m"] {
            assert!(valid_metric_name(good), "{good}");
        }
        for bad in ["", "1a", "a-b", "a b", "é"] {
            assert!(!valid_metric_name(bad), "{bad}");
        }
        for good in ["lab", "le", "_x", "a1"] {
            assert!(valid_label_name(good), "{good}");
        }
        for bad in ["", "__name__", "a:b", "1a", "a-b"] {
            assert!(!valid_label_name(bad), "{bad}");
        }
    }
}
