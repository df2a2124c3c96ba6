mod harness;

mod binaries;
mod openai_load;
mod turn_order;
mod wire_contract;
