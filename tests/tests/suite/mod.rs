mod harness;

mod binaries;
mod cluster;
mod openai_load;
mod python_sdk;
mod schemathesis;
mod turn_order;
mod wire_contract;
