mod events;
mod memory;
mod schema;
mod search;
mod sessions;
mod writer;
