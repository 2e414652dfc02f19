//! A stateright model of the reservation protocol: owners with event logs, attempts that reserve,
//! append, confirm, abandon or crash, renames and deletions, a subscription that replays committed
//! facts, a store clock with a horizon and node clocks within a skew of it.
//!
//! The store's transitions are the functions of `reservation_store::spec`, called on small types
//! (owners as `u8`, holds as [`reservation_store::spec::BitHolds`]); the model only decides which
//! operations the protocol enables, under the assumptions of [`Assumption`], and checks the
//! end-to-end guarantee and the store's safety properties ([`ALWAYS`]).
//!
//! # What is public, and for whom
//!
//! - A configuration, for every entry point: [`ModelConfig`] (its limits [`MAX_OWNERS`],
//!   [`MAX_ATTEMPTS`], [`MAX_KEYS`], [`MAX_HORIZON`] and [`MAX_TTL`], a configuration out of them
//!   being a [`ConfigError`]), and the protocol's [`Assumption`]s and the set of them it keeps
//!   ([`Assumptions`]).
//! - The model of a configuration, [`ReservationModel`], and the store transition it calls,
//!   [`Transition`]: the specification's, unless a test substitutes a broken one
//!   ([`ReservationModel::with_transition`]) to show that a property can fail.
//! - The exhaustive check (the `reservation` program's `check`, the benches, the project's test
//!   that every rule is reached): [`check::check`] of a configuration, or [`check::check_model`]
//!   of a model, with its [`check::CheckOptions`] and [`check::Strategy`], giving a
//!   [`check::CheckReport`] of [`check::Verdict`]s, each counterexample's steps a
//!   [`check::StepRecord`], and, when asked, the checker's [`check::Ceiling`] measured beside it.
//! - Random walks (the fuzz target `model`): [`walk`], giving a [`WalkReport`] or the
//!   [`Violation`] it found; and many of them, seeded ([`swarm`], the program's `swarm`):
//!   [`swarm::swarm`] with its [`swarm::SwarmOptions`], giving a [`swarm::SwarmReport`] of
//!   [`swarm::SwarmFailure`]s, and [`swarm::choices`], the choices of a seed's walk, so that a
//!   failure replays from its seed through [`walk`].
//! - What the reports name: the always-properties by name ([`ALWAYS`]; each on its own:
//!   [`P_UNIQUE`], [`P_ONE_OWNER`], [`P_CONFIRMED_MOVES`], [`P_OTHERS`], [`P_NEVER_ABANDONED`],
//!   [`P_OLD_RELEASE`], [`P_CRASHED_FREE`], [`P_NO_LEAK`]), which
//!   [`check::CheckOptions::target`] takes; the rules and [`Scenario`]s reached, a [`Coverage`].
//! - The commands, for the one program that runs them (`reservation`, crate `reservation-cli`):
//!   the module [`cli`], with [`cli::Command`] (its flags [`cli::CheckArgs`], [`cli::ExploreArgs`],
//!   [`cli::SwarmArgs`] and their [`cli::ConfigArgs`]), [`cli::parse`], [`cli::execute`], and
//!   [`cli::execute_with`], which hands a [`cli::Finished`] run to the program's JUnit writer
//!   ([`cli::JunitXml`]) for `--junit`, [`cli::PROGRAM`] and [`cli::BAD_ARGUMENTS`].
//!
//! The model's states and actions are not public (its compact state is laid out for the
//! checker), and a [`ReservationModel`] offers nothing of its own but how it is built: it
//! implements stateright's `Model` for the checker (the protocol alone, every step it enables, as
//! the Explorer serves it; a check searches it with its reductions), and the entry points above
//! are how it is run.
//!
//! ```
//! use reservation_model::{ModelConfig, walk};
//!
//! // A random walk through the model, as a fuzzer drives it.
//! let report = walk(&ModelConfig::default(), &[3, 1, 4, 1, 5, 9, 2, 6]).expect("no property fails");
//! assert!(report.steps <= 8);
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod action;
mod ceiling;
pub mod chart;
pub mod check;
pub mod cli;
mod config;
mod coverage;
mod model;
mod recent;
mod reduced;
mod state;
pub mod swarm;
mod symmetry;
mod trace;

pub use config::{
    Assumption, Assumptions, ConfigError, MAX_ATTEMPTS, MAX_HORIZON, MAX_KEYS, MAX_OWNERS, MAX_TTL, ModelConfig,
};
pub use coverage::{Coverage, Scenario};
pub use model::properties::{
    ALWAYS, P_CONFIRMED_MOVES, P_CRASHED_FREE, P_NEVER_ABANDONED, P_NO_LEAK, P_OLD_RELEASE, P_ONE_OWNER, P_OTHERS,
    P_UNIQUE,
};
pub use model::{ReservationModel, Transition};

use model::properties::PROPERTIES;
use reservation_store::rules::RuleSet;
use state::State;
use stateright::Model;

/// What a [`walk`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WalkReport {
    /// Steps taken.
    pub steps: usize,
    /// The rules the store operations reported.
    pub rules: RuleSet,
    /// The rules and scenarios reached.
    pub coverage: Coverage,
    /// The state reached: compared, so that two walks that agree in everything else but end in
    /// different states are not equal, but not public (the state's layout is the model's own).
    last: State,
}

/// An always-property that failed, with the trace that breaks it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// The property's name.
    pub property: &'static str,
    /// The numbered steps from the initial state to the state that breaks it.
    pub trace: String,
    /// Those steps, for machines and charts ([`chart::chart`]); none for an invalid
    /// configuration.
    pub steps: Vec<check::StepRecord>,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "property failed: {}\n{}", self.property, self.trace)
    }
}

impl std::error::Error for Violation {}

/// Walks the model of `config` from its initial state: at step `i` it takes the enabled action
/// `choices[i] % (number of enabled actions)`, and stops when no action is enabled or the choices
/// run out. Every always-property is checked after every step; the first that fails is returned
/// with its trace. An invalid configuration is reported as a violation of "the configuration is
/// valid".
pub fn walk(config: &ModelConfig, choices: &[u8]) -> Result<WalkReport, Violation> {
    if let Err(e) = config.validate() {
        return Err(Violation { property: "the configuration is valid", trace: e.to_string(), steps: Vec::new() });
    }
    let model = ReservationModel::new(*config);
    let start = model.initial_state();
    let mut state = start;
    let mut taken = Vec::new();
    let mut rules = RuleSet::EMPTY;
    let mut actions = Vec::new();
    for &choice in choices {
        actions.clear();
        model.actions(&state, &mut actions);
        if actions.is_empty() {
            break;
        }
        let Some(&action) = actions.get(usize::from(choice) % actions.len()) else { break };
        let Some((next, report)) = model.step(&state, action) else { break };
        taken.push(action);
        state = next;
        for r in report.into_iter().flatten() {
            rules.insert(r.rule);
        }
        if let Some(property) = PROPERTIES.into_iter().find(|p| !(p.holds)(&model, &state)).map(|p| p.name) {
            let steps = check::records(&model, &start, &taken);
            return Err(Violation { property, trace: model.trace_text(&start, &taken), steps });
        }
    }
    Ok(WalkReport { steps: taken.len(), rules, coverage: model.coverage(), last: state })
}

#[cfg(test)]
mod tests;
