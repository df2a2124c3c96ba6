//! `turnstone-sim`: simulated Turnstone nodes directly on Redis, for client and console
//! scale tests (the original's simulator, cluster spec §9; `docs/simulator.md`).
//!
//! * [`cluster`] — the simulated nodes: heartbeats `sim-NNNN` (`sim: true`), ownership
//!   leases, dispatch of the inbound queues, and per turn the events a real node and our
//!   bridge publish, on the same streams and channels, built from the `turnstone_proto` types.
//! * [`scenario`] — the seeded schedules (steady, burst, node_failure, directed, lifecycle)
//!   pushed through the real queue client.
//! * [`report`] — the counters and the JSON report.
//! * [`config`], [`rng`] — the flags and the seeded randomness.

pub mod cluster;
pub mod config;
pub mod report;
pub mod rng;
pub mod scenario;

pub use cluster::{Cluster, SimNode};
pub use config::{Scenario, SimConfig};
pub use report::{Metrics, Report};
pub use scenario::{run, schedule};
