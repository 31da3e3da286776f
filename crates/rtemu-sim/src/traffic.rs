//! The built-in traffic generator.
