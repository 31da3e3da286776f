//! rtemu's HTTP/JSON API as its callers see it (docs/api.md): the typed bodies of its requests
//! and replies, and a client that speaks it to `rtemu serve` over the Unix socket, TCP, or
//! TLS to an agent whose certificate is pinned.
//!
//! * [`body`]: the request and reply bodies, with their OpenAPI schemas, and the views of a
//!   lab built from its state file (the server and the coordinator build the same views);
//! * [`client`]: a minimal blocking HTTP/1.1 client, for the coordinator, tools and tests;
//! * [`tls`]: the pin the client trusts an agent by, and what the agent's side shares with it
//!   (the certificate's fingerprint, its PEM files, the cryptography);
//! * [`secret`]: files that hold tokens and keys are read only when their owner alone may.
//!
//! It is a crate of its own, below the server (`rtemu-serve`) and the multi-host coordinator
//! (`rtemu-cluster`), so that what only speaks the API (the coordinator, the command line, the
//! benchmarks) does not link the server: the server's routes, listeners and web view stay out
//! of them, and the API's types are the one contract both sides compile against.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod body;
pub mod client;
pub mod secret;
pub mod tls;
