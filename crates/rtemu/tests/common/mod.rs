//! What the root tests of the `rtemu` binary share: running it, skipping without root, and a
//! lab that is taken down however the test ends.

use std::path::PathBuf;
use std::process::{Command, Output};

/// Runs `rtemu ARGS…` and waits for it.
pub fn rtemu(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rtemu"))
        .args(args)
        .output()
        .expect("rtemu runs")
}

/// Runs `rtemu-bench ARGS…` (the benchmarks, the package's other binary) and waits for it.
// Only the benchmarks' tests run it.
#[allow(dead_code)]
pub fn rtemu_bench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rtemu-bench"))
        .args(args)
        .output()
        .expect("rtemu-bench runs")
}

/// Standard output then standard error, for assertion messages.
pub fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Whether `test` can run: true as root; otherwise it says why it skips, or fails when
/// `RTEMU_REQUIRE_ROOT=1` (CI) forbids skipping.
pub fn root_or_skip(test: &str) -> bool {
    rtemu_testutil::root_or_skip(test, "network namespaces, AF_PACKET")
}

/// A lab brought up from a topology (with `LAB` replaced by a unique name), taken down at drop.
pub struct Lab {
    /// The lab's name.
    pub name: String,
    /// A scratch directory holding its topology file, removed at drop.
    pub dir: PathBuf,
}

impl Lab {
    /// Brings up `toml`; `tag` tells the tests' labs apart.
    pub fn up(tag: &str, toml: &str) -> Lab {
        Lab::up_with(tag, toml, &[])
    }

    /// As [`Lab::up`], with `files` (name, content) written beside the topology file first.
    pub fn up_with(tag: &str, toml: &str, files: &[(&str, &str)]) -> Lab {
        Lab::up_args(tag, toml, files, &[])
    }

    /// As [`Lab::up_with`], with `args` added to `rtemu up`.
    pub fn up_args(tag: &str, toml: &str, files: &[(&str, &str)], args: &[&str]) -> Lab {
        let name = format!("e{tag}{}", std::process::id() % 100_000);
        let dir = std::env::temp_dir().join(format!("rtemu-engine-lab-{name}"));
        std::fs::create_dir_all(&dir).unwrap();
        for (file, content) in files {
            let path = dir.join(file);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, content).unwrap();
        }
        let file = dir.join("lab.toml");
        std::fs::write(&file, toml.replace("LAB", &name)).unwrap();
        // The guard exists before `up` runs, so a half-built lab is removed too.
        let lab = Lab { name, dir };
        let mut up = vec!["up", file.to_str().unwrap()];
        up.extend_from_slice(args);
        let out = rtemu(&up);
        assert!(out.status.success(), "up failed: {}", text(&out));
        lab
    }
}

// Not every test binary runs programs in nodes or reads stats.
#[allow(dead_code)]
impl Lab {
    /// `rtemu exec --lab LAB NODE -- ARGV…`.
    pub fn exec(&self, node: &str, argv: &[&str]) -> Output {
        let mut args = vec!["exec", "--lab", &self.name, node, "--"];
        args.extend_from_slice(argv);
        rtemu(&args)
    }

    /// The engine's counters, `rtemu stats LAB --json`.
    pub fn stats(&self) -> serde_json::Value {
        let out = rtemu(&["stats", &self.name, "--json"]);
        assert!(out.status.success(), "stats: {}", text(&out));
        serde_json::from_slice(&out.stdout).expect("stats --json is JSON")
    }
}

/// The direction of `stats` whose frames come from node `from`.
#[allow(dead_code)]
pub fn direction<'a>(stats: &'a serde_json::Value, from: &str) -> &'a serde_json::Value {
    stats["directions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["from"] == from)
        .unwrap_or_else(|| panic!("no direction from {from}: {stats}"))
}

impl Drop for Lab {
    fn drop(&mut self) {
        let _ = rtemu(&["down", &self.name]);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
