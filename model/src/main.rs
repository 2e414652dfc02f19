//! `reservation-model`: checks the reservation protocol's model, or serves stateright's Explorer.
//! The project's command line, `reservation` (crate `reservation-cli`), offers the same commands
//! beside the conformance suite.

use std::process::ExitCode;

fn main() -> ExitCode {
    match reservation_model::cli::parse::<reservation_model::cli::Cli>(std::env::args_os()) {
        Ok(cli) => reservation_model::cli::execute(cli.command),
        Err(code) => code,
    }
}
