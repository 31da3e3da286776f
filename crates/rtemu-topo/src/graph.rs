//! The topology as a picture: Graphviz DOT and Mermaid text, pure functions of a [`Topology`],
//! and SVG, which [`svg`] has Graphviz's `dot` draw from the DOT text (the one function here
//! that runs a program).
//!
//! Nodes are boxes; a point-to-point link is an edge labelled with its two interfaces; a LAN
//! is an ellipse with an edge to each member. Subnets label links and LANs. In a multi-host
//! lab each host is a box (a cluster) around its nodes, and a link between hosts is dashed
//! and says `vxlan`: it is stitched through the underlay.

use std::fmt::Write;
use std::io::{self, Write as _};
use std::process::{Command, Stdio};

use crate::topology::{Host, Node, Segment, SegmentKind, Topology};

fn subnets(seg: &Segment) -> String {
    let nets: Vec<String> = [
        seg.ipv4.map(|n| n.to_string()),
        seg.ipv6.map(|n| n.to_string()),
    ]
    .into_iter()
    .flatten()
    .collect();
    nets.join(" ")
}

/// Graphviz DOT (`dot -Tsvg` draws it).
pub fn dot(topo: &Topology) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "graph \"{}\" {{", topo.lab);
    out.push_str("  node [shape=box];\n");
    for (host, nodes) in by_host(topo) {
        let indent = match host {
            Some(h) => {
                let _ = writeln!(
                    out,
                    "  subgraph \"cluster:{}\" {{\n    label=\"host {} ({})\";",
                    h.name, h.name, h.address
                );
                "    "
            }
            None => "  ",
        };
        for n in nodes {
            // An image node shows its image under its name (a reference holds no quote).
            match &n.container {
                Some(c) => {
                    let _ = writeln!(
                        out,
                        "{indent}\"{}\" [label=\"{}\\n{}\"];",
                        n.name, n.name, c.image
                    );
                }
                None => {
                    let _ = writeln!(out, "{indent}\"{}\";", n.name);
                }
            }
        }
        if host.is_some() {
            out.push_str("  }\n");
        }
    }
    for seg in &topo.segments {
        let name = |i: usize| &topo.nodes[seg.members[i].node].name;
        match seg.kind {
            SegmentKind::Link { .. } => {
                let (label, style) = match crosses(topo, seg) {
                    true => (format!("{} vxlan", subnets(seg)), ", style=dashed"),
                    false => (subnets(seg), ""),
                };
                let _ = writeln!(
                    out,
                    "  \"{}\" -- \"{}\" [label=\"{}\", taillabel=\"{}\", headlabel=\"{}\"{style}];",
                    name(0),
                    name(1),
                    label.trim_start(),
                    seg.members[0].ifname,
                    seg.members[1].ifname
                );
            }
            SegmentKind::External { ref host, mode, .. } => {
                let _ = writeln!(
                    out,
                    "  \"host:{host}\" [shape=plaintext, label=\"host {host} ({mode:?})\"];\n  \"{}\" -- \"host:{host}\" [label=\"{}\", taillabel=\"{}\"];",
                    name(0),
                    subnets(seg),
                    seg.members[0].ifname
                );
            }
            SegmentKind::Lan => {
                let _ = writeln!(
                    out,
                    "  \"lan:{}\" [shape=ellipse, label=\"{}\\n{}\"];",
                    seg.name,
                    seg.name,
                    subnets(seg)
                );
                for (i, m) in seg.members.iter().enumerate() {
                    let _ = writeln!(
                        out,
                        "  \"{}\" -- \"lan:{}\" [taillabel=\"{}\"];",
                        name(i),
                        seg.name,
                        m.ifname
                    );
                }
            }
        }
    }
    out.push_str("}\n");
    out
}

/// Mermaid flowchart text (renders in Markdown viewers that support Mermaid).
pub fn mermaid(topo: &Topology) -> String {
    let mut out = String::from("graph LR\n");
    for (host, nodes) in by_host(topo) {
        if let Some(h) = host {
            let _ = writeln!(
                out,
                "  subgraph m_{}[\"host {} ({})\"]",
                ident(&h.name),
                h.name,
                h.address
            );
        }
        for n in nodes {
            let image = n
                .container
                .as_ref()
                .map_or(String::new(), |c| format!("<br/>{}", c.image));
            let _ = writeln!(out, "  n_{}[\"{}{image}\"]", ident(&n.name), n.name);
        }
        if host.is_some() {
            out.push_str("  end\n");
        }
    }
    for seg in &topo.segments {
        let name = |i: usize| ident(&topo.nodes[seg.members[i].node].name);
        match seg.kind {
            SegmentKind::Link { .. } => {
                let (line, vxlan) = match crosses(topo, seg) {
                    true => ("-.-", " vxlan"),
                    false => ("---", ""),
                };
                let _ = writeln!(
                    out,
                    "  n_{} {line}|\"{} {}{vxlan} {}\"| n_{}",
                    name(0),
                    seg.members[0].ifname,
                    subnets(seg),
                    seg.members[1].ifname,
                    name(1)
                );
            }
            SegmentKind::External { ref host, .. } => {
                let _ = writeln!(
                    out,
                    "  n_{} ---|\"{} {}\"| h_{}[/\"host {host}\"/]",
                    name(0),
                    seg.members[0].ifname,
                    subnets(seg),
                    ident(host)
                );
            }
            SegmentKind::Lan => {
                let _ = writeln!(
                    out,
                    "  l_{}((\"{} {}\"))",
                    ident(&seg.name),
                    seg.name,
                    subnets(seg)
                );
                for (i, m) in seg.members.iter().enumerate() {
                    let _ = writeln!(
                        out,
                        "  n_{} ---|{}| l_{}",
                        name(i),
                        m.ifname,
                        ident(&seg.name)
                    );
                }
            }
        }
    }
    out
}

/// The nodes on each host, in host order; one group without a host for a lab on one machine.
fn by_host(topo: &Topology) -> Vec<(Option<&Host>, Vec<&Node>)> {
    if topo.hosts.is_empty() {
        return vec![(None, topo.nodes.iter().collect())];
    }
    topo.hosts
        .iter()
        .map(|h| {
            let on = |n: &&Node| n.host.as_deref() == Some(h.name.as_str());
            (Some(h), topo.nodes.iter().filter(on).collect())
        })
        .collect()
}

/// Whether the members of `seg` are on more than one host.
fn crosses(topo: &Topology, seg: &Segment) -> bool {
    let host = |m: &crate::topology::Attachment| topo.nodes[m.node].host.as_deref();
    seg.members.iter().any(|m| host(m) != host(&seg.members[0]))
}

/// Errors of [`svg`].
#[derive(Debug, thiserror::Error)]
pub enum SvgError {
    /// Graphviz is not installed.
    #[error("SVG output needs Graphviz's `{0}` program, which is not installed: install the Debian package graphviz (`apt-get install graphviz`), or print DOT or Mermaid text instead (`--format dot`, `--format mermaid`)")]
    NoGraphviz(String),
    /// Running it failed.
    #[error("running Graphviz `{program} -Tsvg`: {source}")]
    Io {
        /// The program.
        program: String,
        /// Why.
        source: io::Error,
    },
    /// It ran and failed.
    #[error("Graphviz `{program} -Tsvg` failed ({status}): {stderr}")]
    Failed {
        /// The program.
        program: String,
        /// Its exit status.
        status: std::process::ExitStatus,
        /// What it said.
        stderr: String,
    },
}

/// The topology as SVG: its [`dot`] text drawn by Graphviz (`dot -Tsvg`, Debian package
/// `graphviz`).
pub fn svg(topo: &Topology) -> Result<String, SvgError> {
    render_svg("dot", &dot(topo))
}

/// DOT text drawn as SVG by the Graphviz program `program` (`dot`, or another layout such as
/// `neato`), run as `PROGRAM -Tsvg` with the text on its standard input.
pub fn render_svg(program: &str, dot_text: &str) -> Result<String, SvgError> {
    let io_error = |source| SvgError::Io {
        program: program.to_owned(),
        source,
    };
    let mut child = match Command::new(program)
        .arg("-Tsvg")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(c) => c,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(SvgError::NoGraphviz(program.to_owned()))
        }
        Err(e) => return Err(io_error(e)),
    };
    // Written from a second thread: a large graph's SVG fills the output pipe before `dot` has
    // read all its input, so writing and reading in one thread could wait on each other.
    let mut stdin = child.stdin.take().expect("stdin is piped");
    let text = dot_text.to_owned();
    let writer = match std::thread::Builder::new().spawn(move || stdin.write_all(text.as_bytes())) {
        Ok(w) => w,
        Err(e) => {
            // No thread to write with: `dot` is not left waiting for its input.
            let _ = child.kill();
            let _ = child.wait();
            return Err(io_error(e));
        }
    };
    let out = child.wait_with_output().map_err(io_error)?;
    let written = writer
        .join()
        .unwrap_or_else(|_| Err(io::Error::other("the thread writing to dot panicked")));
    if !out.status.success() {
        return Err(SvgError::Failed {
            program: program.to_owned(),
            status: out.status,
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        });
    }
    written.map_err(io_error)?;
    String::from_utf8(out.stdout)
        .map_err(|e| io_error(io::Error::new(io::ErrorKind::InvalidData, e)))
}

/// Mermaid identifiers may not contain '-'; names never contain '_', so this is one-to-one.
/// Prefixes keep kinds apart: `n_` nodes, `l_` LANs, `h_` host interfaces, `m_` machines.
fn ident(name: &str) -> String {
    name.replace('-', "_")
}

#[cfg(test)]
mod tests {
    use super::*;

    const SRC: &str = r#"
lab = "g"
ip = "ipv4"
[nodes.a]
[nodes.b-1]
[[links]]
endpoints = ["a:up", "b-1"]
ipv4 = "10.0.0.0/30"
[[lans]]
name = "lan"
members = ["a", "b-1"]
ipv4 = "10.0.1.0/24"
"#;

    #[test]
    fn dot_draws_links_as_edges_and_lans_as_ellipses() {
        let topo = Topology::parse("g.toml", SRC).unwrap();
        assert_eq!(
            dot(&topo),
            "graph \"g\" {\n  node [shape=box];\n  \"a\";\n  \"b-1\";\n  \
             \"a\" -- \"b-1\" [label=\"10.0.0.0/30\", taillabel=\"up\", headlabel=\"eth0\"];\n  \
             \"lan:lan\" [shape=ellipse, label=\"lan\\n10.0.1.0/24\"];\n  \
             \"a\" -- \"lan:lan\" [taillabel=\"eth0\"];\n  \
             \"b-1\" -- \"lan:lan\" [taillabel=\"eth1\"];\n}\n"
        );
    }

    #[test]
    fn svg_without_graphviz_says_which_package_to_install() {
        let err = render_svg("rtemu-no-such-graphviz", "graph g {}").unwrap_err();
        assert!(matches!(err, SvgError::NoGraphviz(_)), "{err}");
        assert!(
            err.to_string()
                .contains("install the Debian package graphviz"),
            "{err}"
        );
    }

    #[test]
    fn image_nodes_show_their_image() {
        let src = "lab = \"g\"\n[nodes.a]\nimage = \"localhost/web:1\"\n[nodes.b]\n[[links]]\nendpoints = [\"a\", \"b\"]\n";
        let topo = Topology::parse("g.toml", src).unwrap();
        let dot = dot(&topo);
        assert!(
            dot.contains("  \"a\" [label=\"a\\nlocalhost/web:1\"];\n  \"b\";\n"),
            "{dot}"
        );
        let mermaid = mermaid(&topo);
        assert!(
            mermaid.contains("  n_a[\"a<br/>localhost/web:1\"]\n  n_b[\"b\"]\n"),
            "{mermaid}"
        );
    }

    #[test]
    fn mermaid_identifiers_have_no_dashes() {
        let topo = Topology::parse("g.toml", SRC).unwrap();
        assert_eq!(
            mermaid(&topo),
            "graph LR\n  n_a[\"a\"]\n  n_b_1[\"b-1\"]\n  \
             n_a ---|\"up 10.0.0.0/30 eth0\"| n_b_1\n  \
             l_lan((\"lan 10.0.1.0/24\"))\n  n_a ---|eth0| l_lan\n  n_b_1 ---|eth1| l_lan\n"
        );
    }
}
