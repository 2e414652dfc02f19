//! What a run reached: the rules the store operations reported, and the protocol's scenarios.

use reservation_store::rules::{Rule, RuleSet};

/// A protocol scenario that the coverage counts, beside the rules.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Scenario {
    /// Another owner takes over a key whose pending reservation's attempts all crashed.
    TakeoverAfterCrash,
    /// A pending reservation has the holds of two attempts of its owner at once.
    HandoverWithTwoHolds,
    /// The release of the key a rename gave up frees it.
    Rename,
    /// An old fact is applied after a later fact of its owner confirmed the key.
    ReplayedOldFact,
}

impl Scenario {
    /// Every scenario.
    pub const ALL: [Scenario; 4] =
        [Scenario::TakeoverAfterCrash, Scenario::HandoverWithTwoHolds, Scenario::Rename, Scenario::ReplayedOldFact];

    /// The scenario in a few words.
    pub const fn text(self) -> &'static str {
        match self {
            Scenario::TakeoverAfterCrash => "a takeover after a crash",
            Scenario::HandoverWithTwoHolds => "a handover with two holds",
            Scenario::Rename => "a rename",
            Scenario::ReplayedOldFact => "a replayed old fact",
        }
    }

    pub(crate) const fn bit(self) -> u64 {
        1 << (32 + self as u32)
    }
}

/// What a run reached: the rules the store operations reported, and the scenarios.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub struct Coverage(pub(crate) u64);

impl Coverage {
    /// The rules reached.
    pub fn rules(self) -> RuleSet {
        Rule::TRANSITIONS.into_iter().filter(|r| self.0 & (1 << (*r as u8)) != 0).collect()
    }

    /// Whether `scenario` was reached.
    pub const fn reached(self, scenario: Scenario) -> bool {
        self.0 & scenario.bit() != 0
    }

    /// The rules of the tables never reached.
    pub fn unreached_rules(self) -> Vec<Rule> {
        self.rules().missing_transitions()
    }

    /// The scenarios never reached.
    pub fn unreached_scenarios(self) -> Vec<Scenario> {
        Scenario::ALL.into_iter().filter(|s| !self.reached(*s)).collect()
    }

    /// Both coverages together.
    pub const fn union(self, other: Coverage) -> Coverage {
        Coverage(self.0 | other.0)
    }

    pub(crate) fn rule(rule: Rule) -> u64 {
        1 << (rule as u8)
    }
}
