mod harness;

mod binaries;
mod cluster;
mod config_contract;
mod mcp_node;
mod mcp_skills_node;
mod openai_load;
mod otel;
mod python_sdk;
mod schemathesis;
mod turn_order;
mod wire_contract;
