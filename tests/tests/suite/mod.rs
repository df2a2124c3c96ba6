mod harness;

mod binaries;
mod cluster;
mod openai_load;
mod python_sdk;
mod turn_order;
mod wire_contract;
