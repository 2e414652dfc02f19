//! `reservation-model`: checks the reservation protocol's model, or serves stateright's Explorer.

use std::process::ExitCode;

mod stores;

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    if argv.first().map(String::as_str) == Some("stores") {
        if argv.len() > 1 {
            eprintln!("error: stores takes no flags\n{}", reservation_model::cli::USAGE);
            return ExitCode::from(64);
        }
        return if stores::run() { ExitCode::SUCCESS } else { ExitCode::from(1) };
    }
    reservation_model::cli::run(&argv)
}
