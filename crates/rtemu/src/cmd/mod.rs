//! One module per subcommand.

pub mod bench;
pub mod engine;
pub mod lab;
pub mod sim;
pub mod topo;
pub mod trace;
