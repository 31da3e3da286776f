//! One module per subcommand.

pub mod bench;
pub mod lab;
pub mod sim;
pub mod trace;
