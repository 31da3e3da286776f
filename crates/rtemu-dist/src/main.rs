//! `rtemu-dist OUT`: the files rtemu's package ships beside the binary, rendered from the
//! command line's own clap definition ([`rtemu::Cli`]) so they cannot drift from `rtemu --help`:
//!
//! - `OUT/man/`: `rtemu.1` and a page per subcommand (`rtemu-sim.1`, `rtemu-lab-sleep.1`, …);
//! - `OUT/completions/`: `rtemu.bash`, `_rtemu` (zsh) and `rtemu.fish`.
//!
//! The package build (`deploy/debian/build`) runs it after the release build; it is a tool of
//! this repository, not part of what users run.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::CommandFactory;
use clap_complete::Shell;

/// The shells whose completions the package ships, with the file each one's loader looks for.
const SHELLS: [(Shell, &str); 3] = [
    (Shell::Bash, "rtemu.bash"),
    (Shell::Zsh, "_rtemu"),
    (Shell::Fish, "rtemu.fish"),
];

/// Writes a man page for `rtemu` and for each of its visible subcommands, at every depth, into
/// `dir`; returns their paths.
fn man_pages(dir: &Path) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    clap_mangen::generate_to(rtemu::Cli::command(), dir)
        .with_context(|| format!("writing the man pages into {}", dir.display()))?;
    let mut pages = std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .map(|entry| entry.map(|e| e.path()))
        .collect::<Result<Vec<_>, _>>()?;
    pages.sort();
    Ok(pages)
}

/// Writes the completion script of each shell of [`SHELLS`] into `dir`.
fn completions(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut cli = rtemu::Cli::command();
    for (shell, name) in SHELLS {
        let mut script = Vec::new();
        clap_complete::generate(shell, &mut cli, "rtemu", &mut script);
        let path = dir.join(name);
        std::fs::write(&path, script).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

fn run() -> Result<()> {
    let args: Vec<_> = std::env::args_os().skip(1).collect();
    let [out] = args.as_slice() else {
        bail!("usage: rtemu-dist OUT_DIR (writes OUT_DIR/man and OUT_DIR/completions)");
    };
    let out = Path::new(out);
    let pages = man_pages(&out.join("man"))?;
    completions(&out.join("completions"))?;
    eprintln!(
        "rtemu-dist: {} man pages and {} completion scripts in {}",
        pages.len(),
        SHELLS.len(),
        out.display()
    );
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("rtemu-dist: error: {err:#}");
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The names of the man pages `command` and its visible subcommands get, at every depth.
    fn expected_pages(command: &clap::Command, prefix: &str, into: &mut Vec<String>) {
        let name = format!("{prefix}{}", command.get_name());
        for sub in command.get_subcommands().filter(|s| !s.is_hide_set()) {
            if sub.get_name() != "help" {
                expected_pages(sub, &format!("{name}-"), into);
            }
        }
        into.push(format!("{name}.1"));
    }

    #[test]
    fn every_visible_subcommand_gets_its_page_and_no_hidden_one_does() {
        let dir = rtemu_testutil::TempDir::new("dist-man");
        let pages = man_pages(&dir.0).unwrap();
        let mut names: Vec<String> = pages
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        let mut expected = Vec::new();
        expected_pages(&rtemu::Cli::command(), "", &mut expected);
        names.sort();
        expected.sort();
        assert_eq!(names, expected);
        assert!(names.contains(&"rtemu-sim.1".to_owned()));
        assert!(names.contains(&"rtemu-lab-sleep.1".to_owned()));
        assert!(!names.iter().any(|n| n.starts_with("rtemu-engine")));
        // A page says what its command's help says, in roff.
        let sim = std::fs::read_to_string(dir.0.join("rtemu-sim.1")).unwrap();
        assert!(
            sim.starts_with(".ie \\n(.g .ds Aq"),
            "not roff: {}",
            &sim[..40]
        );
        assert!(sim.contains(".TH rtemu-sim 1"), "{sim}");
        assert!(sim.contains("\\-\\-model"), "no --model in {sim}");
    }

    #[test]
    fn each_completion_script_knows_the_subcommands_and_their_flags() {
        let dir = rtemu_testutil::TempDir::new("dist-completions");
        completions(&dir.0).unwrap();
        for (shell, name) in SHELLS {
            let script = std::fs::read_to_string(dir.0.join(name)).unwrap();
            // Fish names a long option `-l NAME`, the others `--NAME`.
            let long = |flag: &str| match shell {
                Shell::Fish => format!("-l {flag}"),
                _ => format!("--{flag}"),
            };
            for word in ["demo".into(), "sim".into(), long("model"), long("group")] {
                assert!(script.contains(&word), "{shell}: no {word} in {name}");
            }
        }
    }
}
