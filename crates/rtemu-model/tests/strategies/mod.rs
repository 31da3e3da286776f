//! proptest strategies for [`LinkConfig`], shared by the test crates that need arbitrary
//! configurations (this crate's, and those of the crates that store them).

use proptest::prelude::*;
use rtemu_model::chance::ChanceConfig;
use rtemu_model::config::{DistName, LinkConfig, TableMode};
use rtemu_model::loss::LossConfig;
use rtemu_model::rate::RateConfig;
use rtemu_model::units::{Percent, Rate, Size, Time};

/// No chance, or one with any probability and a correlation below 99 %.
pub fn arb_chance() -> impl Strategy<Value = Option<ChanceConfig>> {
    prop_oneof![
        Just(None),
        (0.0f64..=1.0, 0.0f64..0.99).prop_map(|(p, c)| Some(ChanceConfig {
            probability: Percent(p),
            correlation: Percent(c)
        })),
    ]
}

/// Valid configurations over every field's whole range, table names and seeds included.
pub fn arb_printable() -> impl Strategy<Value = LinkConfig> {
    (
        arb_config(),
        prop_oneof![Just(None), "[a-z][a-z0-9_./-]{0,12}".prop_map(Some)],
        any::<bool>(),
        proptest::option::of(any::<u64>()),
        0u64..=1 << 53,
        proptest::option::of(f64::MIN_POSITIVE..1.0),
        proptest::option::of((
            1u64..=1_000_000_000_000_000,
            -65535i32..=65535,
            0u32..=65535,
            -65535i32..=65535,
        )),
        1u32..=u32::MAX,
        any::<u32>(),
    )
        .prop_map(
            |(mut cfg, table, netem_tables, seed, jitter, ber, rate, limit, gap)| {
                if let Some(name) =
                    table.filter(|n| matches!(DistName::parse(n), DistName::Table(_)))
                {
                    cfg.distribution = DistName::Table(name);
                }
                if netem_tables {
                    cfg.tables = TableMode::Netem;
                }
                cfg.seed = seed;
                cfg.jitter = Time(jitter);
                cfg.ber = ber;
                cfg.rate = rate.map(|(r, o, c, co)| RateConfig {
                    rate: Rate(r),
                    packet_overhead: o,
                    cell_size: c,
                    cell_overhead: co,
                });
                cfg.limit = limit;
                cfg.gap = gap;
                cfg
            },
        )
}

/// Valid configurations over the values that keep a model quick to run: built-in
/// distributions, delays under 2 s, rates from 1 kbit/s, limits under 5000.
pub fn arb_config() -> impl Strategy<Value = LinkConfig> {
    let delay = (
        0u64..2_000_000_000,
        0u64..500_000_000,
        0.0f64..0.99,
        0usize..4,
    );
    let loss = prop_oneof![
        Just(None),
        arb_chance().prop_map(|c| c.map(LossConfig::Random)),
        (
            0.0f64..0.5,
            0.0f64..0.5,
            0.0f64..0.5,
            0.0f64..=1.0,
            0.0f64..0.5
        )
            .prop_map(|(a, b, c, d, e)| Some(LossConfig::State {
                p13: Percent(a),
                p31: Percent(b),
                p32: Percent(c),
                p23: Percent(d),
                p14: Percent(e)
            })),
        (0.0f64..=1.0, 0.0f64..=1.0, 0.0f64..=1.0, 0.0f64..=1.0).prop_map(|(a, b, c, d)| Some(
            LossConfig::Gemodel {
                p: Percent(a),
                r: Percent(b),
                loss_bad: Percent(c),
                loss_good: Percent(d)
            }
        )),
    ];
    let rate = prop_oneof![
        Just(None),
        (
            1_000u64..10_000_000_000,
            -100i32..100,
            0u32..100,
            -10i32..10
        )
            .prop_map(|(r, o, c, co)| Some(RateConfig {
                rate: Rate(r),
                packet_overhead: o,
                cell_size: c,
                cell_overhead: co
            })),
    ];
    (
        delay,
        loss,
        arb_chance(),
        arb_chance(),
        arb_chance(),
        proptest::option::of(1e-9f64..0.1),
        rate,
        1u32..5000,
        any::<bool>(),
        0u32..10,
    )
        .prop_map(
            |(
                (d, j, c, dist),
                loss,
                duplicate,
                corrupt,
                reorder,
                ber,
                rate,
                limit,
                ordered,
                gap,
            )| {
                let distribution = [
                    DistName::Uniform,
                    DistName::Normal,
                    DistName::Pareto,
                    DistName::Paretonormal,
                ][dist]
                    .clone();
                // netem's `ecn` needs a loss model; the limit's parity chooses it.
                let ecn = loss.is_some() && limit % 2 == 0;
                LinkConfig {
                    delay: Time(d.max(1)),
                    jitter: Time(j),
                    delay_correlation: Percent(c),
                    distribution,
                    loss,
                    duplicate,
                    corrupt,
                    reorder,
                    gap,
                    ber,
                    rate,
                    limit,
                    limit_bytes: (limit % 3 == 0).then_some(Size(limit as u64 * 700)),
                    limit_time: (limit % 5 == 0).then_some(Time(limit as u64 * 100_000)),
                    ordered,
                    ecn,
                    ..LinkConfig::default()
                }
            },
        )
}
