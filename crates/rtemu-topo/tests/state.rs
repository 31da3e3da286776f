//! The state file keeps each link's parsed configuration: it reads back exactly as written,
//! and a configuration changed in the file is validated before anything uses it.

use proptest::prelude::*;
use rtemu_model::config::{DistName, LinkConfig};
use rtemu_model::direction::Ways;
use rtemu_model::netem;
use rtemu_model::units::Time;
use rtemu_topo::state::{LabName, State};
use rtemu_topo::topology::{Change, Netem, SegmentKind};
use rtemu_topo::Topology;
use serde_json::{json, Value};

#[path = "../../rtemu-model/tests/strategies/mod.rs"]
mod strategies;

const LAB: &str = "st";

/// A lab of two nodes whose link has both directions' parameters, one direction's own, and a
/// scheduled change.
const FILE: &str = r#"lab = "st"
[nodes.a]
[nodes.b]
[[links]]
name = "ab"
endpoints = ["a", "b"]
netem = "delay 10ms 2ms 25% distribution normal loss 1% 25%"
netem_ba = "rate 10mbit limit 50 seed 7"
schedule = [
  { at = "2s", dir = "a-b", netem = "delay 40ms reorder 5% gap 3" },
  { at = "1s", netem = "loss gemodel 2% 30% ber 1e-6" },
]
"#;

/// The state `up` would record for `FILE`.
fn state() -> State {
    let topology = Topology::parse("st.toml", FILE).unwrap();
    State {
        lab: LabName::new(LAB).unwrap(),
        file: "st.toml".into(),
        namespaces: Vec::new(),
        nodes: Vec::new(),
        handovers: Vec::new(),
        cgroups: Vec::new(),
        programs: None,
        complete: true,
        topology,
        part: None,
    }
}

/// The state file's content as JSON, to be changed by hand.
fn json_of(state: &State) -> Value {
    serde_json::from_slice(&state.to_json().unwrap()).unwrap()
}

/// Reads `value` back as a state file.
fn read(value: &Value) -> Result<State, String> {
    State::from_json(
        &serde_json::to_vec(value).unwrap(),
        &LabName::new(LAB).unwrap(),
    )
}

/// The link's impairment inside a state file's JSON.
fn impairment(value: &mut Value) -> &mut Value {
    &mut value["topology"]["segments"][0]["kind"]["link"]["impairment"]
}

#[test]
fn the_file_holds_the_text_for_display_and_the_configuration_beside_it() {
    let value = json_of(&state());
    let imp = &value["topology"]["segments"][0]["kind"]["link"]["impairment"];
    // What `ls --json` showed before configurations were stored is still there, unchanged.
    assert_eq!(
        imp["netem"],
        "delay 10ms 2ms 25% distribution normal loss 1% 25%"
    );
    assert_eq!(imp["netem_ab"], Value::Null);
    assert_eq!(imp["netem_ba"], "rate 10mbit limit 50 seed 7");
    assert_eq!(imp["schedule"][0]["netem"], "loss gemodel 2% 30% ber 1e-6");
    assert_eq!(imp["schedule"][0]["at_ns"], 1_000_000_000u64);
    // Beside it, the configuration.
    assert_eq!(imp["netem_config"]["delay"], "10ms");
    assert_eq!(imp["netem_config"]["distribution"], "normal");
    assert_eq!(imp["netem_ba_config"]["limit"], 50);
    assert_eq!(imp["netem_ba_config"]["seed"], 7);
    assert_eq!(imp["schedule"][1]["config"]["gap"], 3);
    assert!(imp.get("netem_ab_config").is_none());
}

#[test]
fn every_configuration_reads_back_as_the_file_text_reads() {
    let back = read(&json_of(&state())).unwrap();
    assert_eq!(back, state());
    let (_, imp) = back.topology.impaired_links().next().unwrap();
    for (held, text) in [
        (
            imp.netem_for(false).unwrap(),
            "delay 10ms 2ms 25% distribution normal loss 1% 25%",
        ),
        (imp.netem_for(true).unwrap(), "rate 10mbit limit 50 seed 7"),
        (&imp.schedule[0].netem, "loss gemodel 2% 30% ber 1e-6"),
        (&imp.schedule[1].netem, "delay 40ms reorder 5% gap 3"),
    ] {
        assert_eq!(held.text(), text);
        assert_eq!(held.config(), &netem::parse(text).unwrap(), "{text}");
    }
    assert_eq!(imp.schedule[1].ways, Ways::AToB);
}

/// A configuration changed in the state file to one `LinkConfig::validate` refuses: the
/// state is refused, whichever value of the link holds it.
#[test]
fn a_state_file_with_an_invalid_configuration_is_refused() {
    let bad: [(&str, Value); 7] = [
        ("limit", json!(0)),
        ("delay_correlation", json!(1.0)),
        ("ber", json!(2.0)),
        ("reorder", json!({ "probability": 0.1 })),
        ("distribution", json!("a b")),
        ("rate", json!({ "rate": "1mbit", "cell_size": 70000 })),
        ("delay", json!(10_000_000_000_000_000u64)),
    ];
    let good = json_of(&state());
    assert!(read(&good).is_ok());
    for (field, value) in bad {
        for at in ["/netem_config", "/netem_ba_config", "/schedule/1/config"] {
            let mut crafted = good.clone();
            let cfg = impairment(&mut crafted).pointer_mut(at).unwrap();
            cfg[field] = value.clone();
            if field == "reorder" {
                cfg["delay"] = json!(0);
            }
            // A configuration as such, which only validation refuses.
            let as_such: LinkConfig = serde_json::from_value(cfg.clone()).unwrap();
            assert!(as_such.validate().is_err(), "{at} {field} = {value}");
            let err = read(&crafted).expect_err(&format!("{at} {field} = {value}"));
            assert!(err.starts_with("not a lab state"), "{err}");
        }
    }
}

#[test]
fn a_configuration_without_its_text_is_refused() {
    let mut crafted = json_of(&state());
    impairment(&mut crafted)["netem_ab_config"] = json!({ "delay": "1ms" });
    assert!(read(&crafted).is_err());
}

/// A state file written before configurations were stored has only the text: it is read as
/// it was, so such a lab can still be listed and taken down.
#[test]
fn a_state_file_of_text_alone_reads_the_text() {
    let mut old = json_of(&state());
    let imp = impairment(&mut old).as_object_mut().unwrap();
    imp.remove("netem_config");
    imp.remove("netem_ba_config");
    for change in imp["schedule"].as_array_mut().unwrap() {
        change.as_object_mut().unwrap().remove("config");
    }
    assert_eq!(read(&old).unwrap(), state());
    impairment(&mut old)["netem_ba"] = json!("limit 0");
    assert!(read(&old).is_err());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Any valid configuration, in any of the link's values, comes back from the state file
    /// unchanged, bit for bit.
    #[test]
    fn configurations_survive_the_state_file(
        both in strategies::arb_printable(),
        own in strategies::arb_printable(),
        later in strategies::arb_printable(),
    ) {
        let mut state = state();
        let SegmentKind::Link { impairment: Some(imp) } = &mut state.topology.segments[0].kind else {
            panic!("the link is impaired");
        };
        imp.netem = Some(Netem::from_config(both.clone()).unwrap());
        imp.netem_ab = Some(Netem::from_config(own.clone()).unwrap());
        imp.schedule.push(Change {
            at_ns: 3_000_000_000,
            ways: Ways::Both,
            netem: Netem::from_config(later.clone()).unwrap(),
        });
        let back = State::from_json(&state.to_json().unwrap(), &state.lab).unwrap();
        prop_assert_eq!(&back, &state);
        let (_, imp) = back.topology.impaired_links().next().unwrap();
        prop_assert_eq!(imp.netem.as_ref().unwrap().config(), &both);
        prop_assert_eq!(imp.config_for(false), own);
        prop_assert_eq!(imp.schedule.last().unwrap().netem.config(), &later);
    }
}

#[test]
fn a_program_made_configuration_is_validated_and_written_as_netem() {
    let cfg = LinkConfig {
        delay: Time(5_000_000),
        distribution: DistName::Pareto,
        ..LinkConfig::default()
    };
    let n = Netem::from_config(cfg.clone()).unwrap();
    assert_eq!(n.text(), "delay 5ms distribution pareto");
    assert_eq!(n.config(), &cfg);
    let e = Netem::from_config(LinkConfig { limit: 0, ..cfg }).unwrap_err();
    assert_eq!(e.keyword, "limit");
}
