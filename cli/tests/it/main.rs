//! The `reservation` command line, run as a user runs it.

mod commands;
