// The module's documentation is SPEC.md itself (see `lib.rs`); this file holds the rule ids that
// the documents, the tests and the failure messages cite, and reads each rule's row from SPEC.md.

use std::fmt;

/// A rule id of the specification: R1–R7 reserve, C1–C8 confirm, L1–L6 release, A1–A6 abandon,
/// D1–D11 values, S1 scopes, P1 durability. [`Rule::text`] states each in one line.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
#[expect(
    missing_docs,
    reason = "a rule is documented by its one-line statement, Rule::text, the one place it is written"
)]
pub enum Rule {
    R1,
    R2,
    R3,
    R4,
    R5,
    R6,
    R7,
    C1,
    C2,
    C3,
    C4,
    C5,
    C6,
    C7,
    C8,
    L1,
    L2,
    L3,
    L4,
    L5,
    L6,
    A1,
    A2,
    A3,
    A4,
    A5,
    A6,
    D1,
    D2,
    D3,
    D4,
    D5,
    D6,
    D7,
    D8,
    D9,
    D10,
    D11,
    S1,
    P1,
}

impl Rule {
    /// Every rule, in table order.
    pub const ALL: [Rule; 40] = {
        use Rule::*;
        [
            R1, R2, R3, R4, R5, R6, R7, C1, C2, C3, C4, C5, C6, C7, C8, L1, L2, L3, L4, L5, L6, A1, A2, A3, A4, A5, A6,
            D1, D2, D3, D4, D5, D6, D7, D8, D9, D10, D11, S1, P1,
        ]
    };

    /// The rules that a transition reports: one per row of the operation tables.
    pub const TRANSITIONS: [Rule; 27] = {
        let mut out = [Rule::R1; 27];
        let mut i = 0;
        while i < 27 {
            out[i] = Rule::ALL[i];
            i += 1;
        }
        out
    };

    /// The rule's id, such as `"R3"`.
    pub const fn id(self) -> &'static str {
        use Rule::*;
        match self {
            R1 => "R1",
            R2 => "R2",
            R3 => "R3",
            R4 => "R4",
            R5 => "R5",
            R6 => "R6",
            R7 => "R7",
            C1 => "C1",
            C2 => "C2",
            C3 => "C3",
            C4 => "C4",
            C5 => "C5",
            C6 => "C6",
            C7 => "C7",
            C8 => "C8",
            L1 => "L1",
            L2 => "L2",
            L3 => "L3",
            L4 => "L4",
            L5 => "L5",
            L6 => "L6",
            A1 => "A1",
            A2 => "A2",
            A3 => "A3",
            A4 => "A4",
            A5 => "A5",
            A6 => "A6",
            D1 => "D1",
            D2 => "D2",
            D3 => "D3",
            D4 => "D4",
            D5 => "D5",
            D6 => "D6",
            D7 => "D7",
            D8 => "D8",
            D9 => "D9",
            D10 => "D10",
            D11 => "D11",
            S1 => "S1",
            P1 => "P1",
        }
    }

    /// The rule in one line, for failure messages: its row of SPEC.md, the one place the rules
    /// are written (a transition row reads `operation on state: next state, outcome`).
    pub fn text(self) -> &'static str {
        RULE_TEXTS.get(self as usize).map_or("", String::as_str)
    }

    /// This rule's bit in a [`RuleSet`].
    const fn bit(self) -> u64 {
        1 << (self as u8)
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.id())
    }
}

/// The specification's text (SPEC.md), compiled in: [`Rule::text`] reads each rule's row from it,
/// and the conformance suite runs its worked examples as written.
pub const SPEC_MD: &str = include_str!("../SPEC.md");

/// Each rule's row of SPEC.md, by rule index; empty for a rule the document lacks (a test
/// asserts there is none).
static RULE_TEXTS: std::sync::LazyLock<Vec<String>> = std::sync::LazyLock::new(|| {
    let mut texts = vec![String::new(); Rule::ALL.len()];
    let mut operation = "";
    for line in SPEC_MD.lines() {
        if let Some(heading) = line.strip_prefix("## ") {
            operation = heading.split('(').next().unwrap_or("").trim();
            continue;
        }
        let cells: Vec<&str> = line.trim().trim_matches('|').split('|').map(str::trim).collect();
        let Some(rule) = cells.first().and_then(|id| Rule::ALL.into_iter().find(|r| r.id() == *id)) else {
            continue;
        };
        let text = match cells.as_slice() {
            [_, statement] => (*statement).to_owned(),
            [_, state, next, outcome] => format!("{operation} on {state}: {next}, {outcome}"),
            _ => continue,
        };
        if let Some(slot) = texts.get_mut(rule as usize) {
            *slot = text;
        }
    }
    texts
});

/// A set of rules, for measuring which rows of the tables a run reached.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub struct RuleSet(u64);

impl RuleSet {
    /// No rule.
    pub const EMPTY: RuleSet = RuleSet(0);

    /// Adds `rule`.
    pub fn insert(&mut self, rule: Rule) {
        self.0 |= rule.bit();
    }

    /// Whether `rule` is in the set.
    pub const fn contains(self, rule: Rule) -> bool {
        self.0 & rule.bit() != 0
    }

    /// The rules in either set.
    pub const fn union(self, other: RuleSet) -> RuleSet {
        RuleSet(self.0 | other.0)
    }

    /// How many rules the set holds.
    pub const fn len(self) -> usize {
        self.0.count_ones() as usize
    }

    /// Whether the set is empty.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The rules of [`Rule::TRANSITIONS`] that are not in the set.
    pub fn missing_transitions(self) -> Vec<Rule> {
        Rule::TRANSITIONS.into_iter().filter(|r| !self.contains(*r)).collect()
    }

    /// The rules in the set, in table order.
    pub fn iter(self) -> impl Iterator<Item = Rule> {
        Rule::ALL.into_iter().filter(move |r| self.contains(*r))
    }
}

impl FromIterator<Rule> for RuleSet {
    fn from_iter<I: IntoIterator<Item = Rule>>(iter: I) -> Self {
        let mut set = RuleSet::EMPTY;
        for r in iter {
            set.insert(r);
        }
        set
    }
}
