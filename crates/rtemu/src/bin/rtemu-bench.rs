//! The `rtemu-bench` binary: rtemu's benchmarks (the `rtemu-bench` crate), beside `rtemu`.

fn main() -> std::process::ExitCode {
    rtemu_bench::main()
}
