mod harness;

mod binaries;
mod cluster;
mod config_contract;
mod mcp_node;
mod mcp_skills_node;
mod openai_load;
mod otel;
mod python_sdk;
mod real_model;
mod schemathesis;
mod security;
mod turn_order;
mod wire_contract;
