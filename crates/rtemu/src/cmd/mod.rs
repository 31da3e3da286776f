//! One module per subcommand.

pub mod demo;
pub mod engine;
pub mod lab;
pub mod link;
pub mod serve;
pub mod sim;
pub mod topo;
pub mod trace;
