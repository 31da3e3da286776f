//! The `rtemu` binary: the command line is the `rtemu` library's (src/lib.rs).

fn main() -> std::process::ExitCode {
    rtemu::main()
}
