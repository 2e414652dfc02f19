//! `reservation-model`: checks the reservation protocol's model, or serves stateright's Explorer.
//! The project's command line, `reservation` (crate `reservation-cli`), offers the same commands
//! beside the conformance suite.

use std::process::ExitCode;

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    reservation_model::cli::run(&argv)
}
