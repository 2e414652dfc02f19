//! The model's configuration: sizes, clocks and the assumptions that hold.

use std::fmt;
use std::str::FromStr;

/// Most owners a configuration may have.
pub const MAX_OWNERS: usize = 4;
/// Most attempts (decisions) per owner.
pub const MAX_ATTEMPTS: usize = 3;
/// Most keys in the scope.
pub const MAX_KEYS: usize = 3;
/// Latest store clock a configuration may reach: times and versions are kept in one byte.
pub const MAX_HORIZON: u8 = 100;
/// Longest time to live and largest skew, in ticks.
pub const MAX_TTL: u8 = 50;

/// An assumption of the protocol (H2, H3, H5, H7, H8 of the design notes) that the model can drop.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub enum Assumption {
    /// H2: an attempt appends only after Taken, Joined or AlreadyConfirmed, and its append and its
    /// confirm land while its pending reservation is live by the store's clock.
    H2,
    /// H3: an attempt judges liveness by its own clock less a margin at least the clock skew.
    H3,
    /// H5: no release of an older fact reaches the store while a newer attempt of the owner is
    /// between reserve and confirm for that key.
    H5,
    /// H7: `ANY_VERSION` is used only when the owner can never take the key again (deletion).
    H7,
    /// H8: the subscription applies each owner's facts in version order (it may restart from an
    /// earlier fact, then goes forward in order).
    H8,
}

impl Assumption {
    /// Every assumption the model can drop.
    pub const ALL: [Assumption; 5] = [Assumption::H2, Assumption::H3, Assumption::H5, Assumption::H7, Assumption::H8];

    /// Its id, such as `"H2"`.
    pub const fn id(self) -> &'static str {
        match self {
            Assumption::H2 => "H2",
            Assumption::H3 => "H3",
            Assumption::H5 => "H5",
            Assumption::H7 => "H7",
            Assumption::H8 => "H8",
        }
    }

    /// The assumption in one line.
    pub const fn text(self) -> &'static str {
        match self {
            Assumption::H2 => {
                "an attempt appends only after Taken, Joined or AlreadyConfirmed, and its append and confirm land while its pending reservation is live by the store's clock"
            }
            Assumption::H3 => {
                "an attempt judges liveness by its own clock less a margin at least as large as the clock skew"
            }
            Assumption::H5 => {
                "no release of an older fact reaches the store while a newer attempt of the owner is between reserve and confirm for that key"
            }
            Assumption::H7 => "ANY_VERSION is used only when the owner can never take the key again (deletion)",
            Assumption::H8 => {
                "a subscription applies each owner's facts in version order (it may restart from an earlier fact, then goes forward)"
            }
        }
    }

    const fn bit(self) -> u8 {
        1 << (self as u8)
    }
}

impl fmt::Display for Assumption {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.id())
    }
}

impl FromStr for Assumption {
    type Err = ConfigError;
    fn from_str(s: &str) -> Result<Self, ConfigError> {
        Assumption::ALL
            .into_iter()
            .find(|a| a.id().eq_ignore_ascii_case(s))
            .ok_or_else(|| ConfigError(format!("unknown assumption {s:?}: expected one of H2, H3, H5, H7, H8")))
    }
}

/// The set of assumptions that hold.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct Assumptions(u8);

impl Assumptions {
    /// Every assumption holds.
    pub const ALL: Assumptions = Assumptions(0b1_1111);

    /// Whether `a` holds.
    pub const fn holds(self, a: Assumption) -> bool {
        self.0 & a.bit() != 0
    }

    /// The set without `a`.
    pub const fn without(self, a: Assumption) -> Assumptions {
        Assumptions(self.0 & !a.bit())
    }

    /// The assumptions dropped from [`Assumptions::ALL`].
    pub fn dropped(self) -> Vec<Assumption> {
        Assumption::ALL.into_iter().filter(|a| !self.holds(*a)).collect()
    }
}

impl Default for Assumptions {
    fn default() -> Self {
        Assumptions::ALL
    }
}

/// An invalid configuration, with the reason.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct ConfigError(pub String);

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

/// What the model contains. [`Default`] is the configuration that `check` verifies exhaustively.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct ModelConfig {
    /// Owners (aggregates of one type), at most [`MAX_OWNERS`].
    pub owners: u8,
    /// Attempts (decisions) per owner, at most [`MAX_ATTEMPTS`]; each appends at most one fact.
    pub attempts: u8,
    /// Keys in the scope, at most [`MAX_KEYS`].
    pub keys: u8,
    /// The store clock ticks from 0 up to this instant, at most [`MAX_HORIZON`].
    pub horizon: u8,
    /// Time to live of a pending reservation, in ticks; at least 1.
    pub ttl: u8,
    /// How far a node's clock may lag or lead the store's, in ticks.
    pub skew: u8,
    /// The assumptions that hold.
    pub assumptions: Assumptions,
}

impl Default for ModelConfig {
    /// Three owners with two attempts each, two keys, a TTL of 1 tick, a skew of 1 tick and a
    /// horizon of 2 ticks (a TTL passes twice), every assumption on.
    fn default() -> Self {
        ModelConfig { owners: 3, attempts: 2, keys: 2, horizon: 2, ttl: 1, skew: 1, assumptions: Assumptions::ALL }
    }
}

impl ModelConfig {
    /// A configuration too large to check exhaustively, for random walks (fuzzing, simulation):
    /// four owners with three attempts each, three keys, a TTL of 3, a skew of 1, a horizon of 12.
    pub fn fuzz() -> Self {
        ModelConfig { owners: 4, attempts: 3, keys: 3, horizon: 12, ttl: 3, skew: 1, ..ModelConfig::default() }
    }

    /// The default configuration with two owners instead of three: small enough for quick tests,
    /// and it still reaches every rule.
    pub fn small() -> Self {
        ModelConfig { owners: 2, ..ModelConfig::default() }
    }

    /// This configuration with assumption `a` dropped.
    pub fn dropping(mut self, a: Assumption) -> Self {
        self.assumptions = self.assumptions.without(a);
        self
    }

    /// Whether assumption `a` holds.
    pub const fn holds(&self, a: Assumption) -> bool {
        self.assumptions.holds(a)
    }

    /// Checks the bounds of every field.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let bad = |what: &str, v: u8, lo: u8, hi: usize| -> Result<(), ConfigError> {
            if (v as usize) < lo as usize || v as usize > hi {
                Err(ConfigError(format!("{what} must be between {lo} and {hi}, not {v}")))
            } else {
                Ok(())
            }
        };
        bad("owners", self.owners, 1, MAX_OWNERS)?;
        bad("attempts", self.attempts, 1, MAX_ATTEMPTS)?;
        bad("keys", self.keys, 1, MAX_KEYS)?;
        bad("horizon", self.horizon, 0, MAX_HORIZON as usize)?;
        bad("ttl", self.ttl, 1, MAX_TTL as usize)?;
        bad("skew", self.skew, 0, MAX_TTL as usize)?;
        Ok(())
    }
}

impl fmt::Display for ModelConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "owners={} attempts={} keys={} horizon={} ttl={} skew={}",
            self.owners, self.attempts, self.keys, self.horizon, self.ttl, self.skew
        )?;
        let dropped = self.assumptions.dropped();
        if dropped.is_empty() {
            f.write_str(" assumptions=all")?;
        } else {
            let ids: Vec<&str> = dropped.iter().map(|a| a.id()).collect();
            write!(f, " dropped={}", ids.join(","))?;
        }
        Ok(())
    }
}
