mod classify_table;
mod guard;
mod properties;
