//! The crates' floors: a crate's normal dependencies are crates on lower floors only, as the
//! README's layout table assigns them, so the models stay free of I/O, the engine never
//! imports the simulator and the faces stay thin. Adding a crate means giving it a floor.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

/// The floor of every crate, from the README's layout table (`| floor | crate | holds |`).
fn floors(readme: &str) -> BTreeMap<String, u32> {
    let table = readme
        .split("## Layout")
        .nth(1)
        .expect("the README has a Layout section");
    table
        .lines()
        .skip_while(|l| !l.starts_with("| floor | crate |"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|row| {
            let cells: Vec<&str> = row.split('|').map(str::trim).collect();
            let floor = cells[1]
                .parse()
                .unwrap_or_else(|_| panic!("floor of {row}"));
            (cells[2].trim_matches('`').to_owned(), floor)
        })
        .collect()
}

/// Every workspace crate and the workspace crates among its normal and build dependencies.
fn arrows(root: &Path) -> BTreeMap<String, Vec<String>> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .arg("--manifest-path")
        .arg(root.join("Cargo.toml"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let packages = meta["packages"].as_array().unwrap();
    let ours: Vec<&str> = packages
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    packages
        .iter()
        .map(|p| {
            let uses = p["dependencies"]
                .as_array()
                .unwrap()
                .iter()
                // `kind` is null for normal dependencies, "build" or "dev" otherwise.
                .filter(|d| d["kind"].as_str() != Some("dev"))
                .map(|d| d["name"].as_str().unwrap())
                .filter(|d| ours.contains(d))
                .map(str::to_owned)
                .collect();
            (p["name"].as_str().unwrap().to_owned(), uses)
        })
        .collect()
}

#[test]
fn every_crate_uses_only_crates_on_lower_floors() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let floors = floors(&std::fs::read_to_string(root.join("README.md")).unwrap());
    let arrows = arrows(&root);
    let mut wrong = Vec::new();
    for (krate, uses) in &arrows {
        let Some(&floor) = floors.get(krate) else {
            wrong.push(format!("{krate} has no floor in the README's layout table"));
            continue;
        };
        for used in uses {
            match floors.get(used) {
                Some(&f) if f < floor => {}
                f => wrong.push(format!(
                    "{krate} (floor {floor}) uses {used} (floor {f:?}): only lower floors"
                )),
            }
        }
    }
    for listed in floors.keys().filter(|k| !arrows.contains_key(*k)) {
        wrong.push(format!(
            "the README lists {listed}, which is not a workspace crate"
        ));
    }
    assert!(arrows.len() >= 16, "only {} crates found", arrows.len());
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn the_floor_table_reads_every_row() {
    // The reader itself: a row it skipped would hide an arrow.
    let readme = "## Layout\n\n| floor | crate | holds |\n| ---: | --- | --- |\n| 0 | `a` | x |\n| 2 | `b` | y |\n\nText.\n| 9 | `c` | not in the table |\n";
    let f = floors(readme);
    assert_eq!(
        f.into_iter().collect::<Vec<_>>(),
        [("a".into(), 0), ("b".into(), 2)]
    );
}
