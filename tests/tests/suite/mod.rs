mod harness;

mod binaries;
mod cluster;
mod config_contract;
mod grpc_cli;
mod mcp_node;
mod mcp_skills_node;
mod openai_load;
mod otel;
mod python_grpc;
mod python_sdk;
mod real_model;
mod rerank_web_search;
mod schemathesis;
mod searxng_env;
pub(crate) mod security;
mod turn_order;
mod wire_contract;
