//! The `reservation` command line, run as a user runs it.

mod commands;
mod explorer;
mod junit;
mod model;
mod parts_are_named;
mod rules_are_whole;

use std::process::{Command, Output};

/// Runs the built `reservation` with `args`.
fn reservation(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_reservation"))
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running reservation {args:?}: {e}"))
}

/// What `o` printed, standard output then standard error.
fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}
