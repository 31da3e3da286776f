//! The `rtemu-bench` binary: rtemu's benchmarks (the `rtemu-bench` crate), beside `rtemu`.

fn main() -> std::process::ExitCode {
    // Parsed as `rtemu` parses its own: a negative value is refused with its range.
    rtemu_bench::main(&rtemu::parse())
}
