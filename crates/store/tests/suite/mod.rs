mod events;
mod large;
mod memory;
mod schema;
mod search;
mod sessions;
mod watches;
mod writer;
