//! The netem parser against a corpus of real-world and malformed lines with their expected
//! answers, kept small and in the repository (`tests/data/netem_corpus.txt`).

use rtemu_model::netem;

#[test]
fn every_corpus_line_gets_its_expected_answer() {
    let corpus = include_str!("data/netem_corpus.txt");
    let mut cases = 0;
    for (n, line) in corpus.lines().enumerate() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let (expect, input) = line
            .split_once('|')
            .unwrap_or_else(|| panic!("corpus line {}: no `|`", n + 1));
        let (expect, input) = (expect.trim(), input.trim());
        match (expect, netem::parse(input)) {
            ("ok", Ok(cfg)) => {
                let again = netem::parse(&cfg.to_string()).unwrap();
                assert_eq!(again, cfg, "line {}: {input:?} does not round-trip", n + 1);
            }
            ("ok", Err(e)) => panic!("line {}: {input:?} should parse, got: {e}", n + 1),
            (expect, Ok(_)) => panic!("line {}: {input:?} should fail with {expect:?}", n + 1),
            (expect, Err(e)) => {
                let want = expect
                    .strip_prefix("error:")
                    .map(str::trim)
                    .unwrap_or(expect);
                assert_eq!(e.to_string(), want, "line {}", n + 1);
            }
        }
        cases += 1;
    }
    assert!(cases >= 30, "corpus has only {cases} cases");
}
