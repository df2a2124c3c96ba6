//! Whole-cluster tests of the bridge: real `turnstone-server` and `turnstone-bridge`
//! processes (built-in scripted model), real Redis, faults injected from outside.

pub mod harness;

mod approval_rounds;
mod bridge_basics;
mod bridge_faults;
mod chaos;
mod cluster_settings;
mod console_governance;
mod drain;
mod mq_client;
mod netns;
mod output_guard;
mod ownership;
mod partitions;
mod plan_relay;
mod policies;
pub(crate) mod python_mq;
mod queued_sends;
mod receipts;
mod redis_auth;
mod tls_roots;
mod turn_outcomes;
