//! `remove_temporaries` takes every output not yet committed, so it is tried in a process of
//! its own (this test binary), where no other test's output can be one of them.

use std::io::Write;

use rtemu_sys::output::{remove_temporaries, Output};

#[test]
fn removing_temporaries_takes_those_not_yet_committed() {
    let dir = std::env::temp_dir().join(format!("rtemu-sys-signal-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let count = || std::fs::read_dir(&dir).unwrap().count();
    let mut out = Output::create(&dir.join("big.rpl"), &[]).unwrap();
    out.write_all(b"records").unwrap();
    let before = count();
    // What a SIGINT handler does before the program ends.
    remove_temporaries();
    let after = count();
    // An output written on anyway then fails to commit, and leaves nothing.
    let committed = out.commit();
    let last = count();
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!((before, after, last), (1, 0, 0));
    assert!(committed.is_err());
}
