//! The fuzz targets on stable Rust: every file of `fuzz/corpus/<target>/`, and deterministic
//! mutations of it, through its target (`fuzz/src/lib.rs`, included here so each target has
//! one definition). A target panics when a property fails; this test collects every failing
//! input and names it, with its bytes, so it can be kept as a regression corpus file.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;

#[allow(dead_code)]
#[path = "../../../fuzz/src/lib.rs"]
mod targets;

/// Mutations tried per corpus file.
const MUTATIONS: u64 = 48;

fn corpus_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus")
}

/// The files of one target's corpus, sorted so failures are reported in a stable order.
fn corpus(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = corpus_dir().join(target);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("corpus of `{target}` ({}): {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&p).unwrap())
        })
        .collect()
}

/// A small seeded generator (xorshift64*), so the mutations are the same on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Mutation `k` of `input`: a bit flipped, a byte set to an edge value, bytes cut, inserted or
/// repeated, or the input truncated, a few of them at once.
fn mutate(input: &[u8], seed: u64, k: u64) -> Vec<u8> {
    let mut rng = Rng(seed ^ (k + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let mut out = input.to_vec();
    for _ in 0..1 + rng.below(3) {
        let at = rng.below(out.len() + 1);
        match rng.below(6) {
            0 if !out.is_empty() => {
                let i = at.min(out.len() - 1);
                out[i] ^= 1 << rng.below(8);
            }
            1 if !out.is_empty() => {
                let i = at.min(out.len() - 1);
                out[i] = [0, 0xff, 0x7f, 0x80, b'9', b'\n', b'-', b'.'][rng.below(8)];
            }
            2 => out.truncate(at),
            3 => {
                let end = (at + 1 + rng.below(8)).min(out.len());
                out.drain(at.min(end)..end);
            }
            4 => {
                let end = (at + 1 + rng.below(16)).min(out.len());
                let chunk = out[at.min(end)..end].to_vec();
                out.splice(at..at, chunk);
            }
            _ => out.insert(at, rng.next() as u8),
        }
    }
    out
}

fn seed_of(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    })
}

#[test]
fn every_corpus_file_and_its_mutations_pass_their_target() {
    let mut failures = Vec::new();
    let mut runs = 0;
    for &(target, run) in targets::TARGETS {
        let files = corpus(target);
        assert!(
            !files.is_empty(),
            "the corpus of `{target}` is empty: fuzz/corpus/{target}/ needs its seed files"
        );
        for (name, bytes) in &files {
            let inputs = std::iter::once(bytes.clone())
                .chain((0..MUTATIONS).map(|k| mutate(bytes, seed_of(name), k)));
            for (k, input) in inputs.enumerate() {
                runs += 1;
                if catch_unwind(AssertUnwindSafe(|| run(&input))).is_err() {
                    let what = if k == 0 {
                        "itself".to_owned()
                    } else {
                        format!("mutation {k}")
                    };
                    failures.push(format!(
                        "{target}/{name} ({what}): b\"{}\"",
                        input.escape_ascii()
                    ));
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {runs} inputs failed their target:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn every_corpus_directory_belongs_to_a_target() {
    for entry in std::fs::read_dir(corpus_dir()).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        assert!(
            targets::TARGETS.iter().any(|&(t, _)| t == name),
            "fuzz/corpus/{name} has no target in fuzz/src/lib.rs"
        );
    }
}

#[test]
fn mutations_are_deterministic_and_change_the_input() {
    let input = b"delay 10ms 2ms loss 1%";
    let a: Vec<_> = (0..8).map(|k| mutate(input, 7, k)).collect();
    let b: Vec<_> = (0..8).map(|k| mutate(input, 7, k)).collect();
    assert_eq!(a, b);
    assert!(a.iter().filter(|m| m.as_slice() != input).count() >= 6);
}
