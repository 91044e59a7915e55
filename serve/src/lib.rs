//! kube-gang-serve: the server scaffolding `gang-scheduler` and `gang-webhook` share, written
//! once: log set-up ([`log`]), signal handling ([`shutdown`]), the probe and metrics routes and the
//! thread that serves them ([`probe`]), and the listeners every port of both runs on
//! ([`server`]: connection, handshake, header, body and idle limits a hostile client cannot hold,
//! shared between clients in turn by [`fair`]; bodies read at a client's pace by [`body`]).
//!
//! No scheduling or admission logic lives here: that is `scheduler-core`'s, which does no I/O.

pub mod body;
pub mod fair;
pub mod log;
pub mod probe;
pub mod server;
pub mod shutdown;

pub use fair::Source;
