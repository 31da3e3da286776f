//! The crate's modules form no circle: a module that uses another is never used by it, directly
//! or through others, so each reads knowing only the modules below it. (`lab`, `part` and
//! `state` once used each other both ways; the names they share now live in `naming`.)

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The modules `code` names (`crate::x`, also each `x` of `use crate::{x, y::z}`), comments
/// left out.
fn named(code: &str) -> BTreeSet<String> {
    let code: String = code
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    let ident = |s: &str| -> String {
        s.trim_start()
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    let mut out = BTreeSet::new();
    for (at, _) in code.match_indices("crate::") {
        let rest = &code[at + "crate::".len()..];
        let Some(group) = rest.strip_prefix('{') else {
            out.insert(ident(rest));
            continue;
        };
        // The top-level items of the group: split at commas outside inner braces.
        let (mut depth, mut start) = (0, 0);
        for (i, c) in group.char_indices() {
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => {
                    out.insert(ident(&group[start..i]));
                    break;
                }
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    out.insert(ident(&group[start..i]));
                    start = i + 1;
                }
                _ => {}
            }
        }
    }
    out.retain(|m| m.starts_with(|c: char| c.is_ascii_lowercase()));
    out
}

/// Every module of the crate (a file `src/x.rs` or a directory `src/x/`) and the other modules
/// its code names.
fn graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    fn files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                files(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    let mut all = Vec::new();
    files(src, &mut all);
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in all {
        let top = file.strip_prefix(src).unwrap().components().next().unwrap();
        let module = top.as_os_str().to_str().unwrap().trim_end_matches(".rs");
        if module == "lib" {
            continue;
        }
        let mut uses = named(&std::fs::read_to_string(&file).unwrap());
        uses.remove(module);
        graph.entry(module.to_owned()).or_default().extend(uses);
    }
    graph
}

/// A circle of `graph` (its modules in order, the first repeated at the end), if it has one.
fn circle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        graph: &BTreeMap<String, BTreeSet<String>>,
        module: &str,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = path.iter().position(|m| m == module) {
            let mut found = path[i..].to_vec();
            found.push(module.to_owned());
            return Some(found);
        }
        if done.contains(module) {
            return None;
        }
        path.push(module.to_owned());
        for next in graph.get(module).into_iter().flatten() {
            if let Some(found) = visit(graph, next, path, done) {
                return Some(found);
            }
        }
        path.pop();
        done.insert(module.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|m| visit(graph, m, &mut Vec::new(), &mut done))
}

#[test]
fn the_modules_form_no_circle() {
    let graph = graph(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    // The arrows the check guards are the ones it sees.
    for (from, to) in [
        ("lab", "part"),
        ("lab", "state"),
        ("state", "part"),
        ("part", "naming"),
        ("state", "naming"),
        ("capture", "pcapng"),
    ] {
        assert!(
            graph[from].contains(to),
            "{from} → {to} not seen: {graph:?}"
        );
    }
    assert_eq!(circle(&graph), None, "{graph:?}");
}

#[test]
fn a_circle_is_found_through_grouped_and_nested_uses() {
    let code = [
        ("a", "use crate::b::X;\n// crate::z in a comment\n"),
        ("b", "use crate::{\n    c::{D, E},\n    d,\n};"),
        ("c", "fn f() { crate::a::g() }"),
        ("d", ""),
    ];
    let graph: BTreeMap<String, BTreeSet<String>> = code
        .iter()
        .map(|(m, c)| (m.to_string(), named(c)))
        .collect();
    assert_eq!(graph["a"], BTreeSet::from(["b".to_owned()]));
    assert_eq!(graph["b"], BTreeSet::from(["c".to_owned(), "d".to_owned()]));
    assert_eq!(
        circle(&graph),
        Some(["a", "b", "c", "a"].map(String::from).to_vec())
    );
    let mut cut = graph;
    cut.get_mut("c").unwrap().clear();
    assert_eq!(circle(&cut), None);
}
