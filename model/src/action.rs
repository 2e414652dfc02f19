//! The model's steps, and what their store operations did.

use reservation_store::rules::Rule;
use reservation_store::spec::HoldBit;
use reservation_store::{Operation, Outcome};

/// A step of the model.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Action {
    /// The store's clock ticks.
    Tick,
    /// An attempt starts a decision that takes `key` and reserves it under its hold.
    Reserve {
        /// The owner.
        owner: u8,
        /// The attempt.
        attempt: u8,
        /// The key.
        key: u8,
    },
    /// A reserved attempt reserves again under the same hold (a retry that timed out).
    Retry {
        /// The owner.
        owner: u8,
        /// The attempt.
        attempt: u8,
    },
    /// A reserved attempt appends its fact, having judged its reservation live by its own clock.
    Append {
        /// The owner.
        owner: u8,
        /// The attempt.
        attempt: u8,
    },
    /// An attempt confirms its key with its fact's version.
    Confirm {
        /// The owner.
        owner: u8,
        /// The attempt.
        attempt: u8,
    },
    /// A reserved attempt, whose events are surely not appended, abandons its hold.
    Abandon {
        /// The owner.
        owner: u8,
        /// The attempt.
        attempt: u8,
    },
    /// An attempt crashes.
    Crash {
        /// The owner.
        owner: u8,
        /// The attempt.
        attempt: u8,
    },
    /// The owner appends a fact that gives its key up; the subscription releases it. A deletion
    /// (`delete`) is final and releases with `ANY_VERSION`.
    GiveUp {
        /// The owner.
        owner: u8,
        /// Whether it is a deletion.
        delete: bool,
    },
    /// The subscription applies the owner's next confirm or release.
    Apply {
        /// The owner.
        owner: u8,
    },
    /// The subscription restarts from an earlier fact of the owner.
    Restart {
        /// The owner.
        owner: u8,
        /// The fact's index (its version less one).
        fact: u8,
    },
    /// The subscription delivers an already applied operation again, out of order (H8 dropped).
    Replay {
        /// The owner.
        owner: u8,
        /// The fact's index (its version less one).
        fact: u8,
        /// The operation's index within the fact.
        op: u8,
    },
}

/// A store operation of the protocol: the core crate's [`Operation`], owners and holds by
/// number.
pub type Op = Operation<u8, HoldBit>;

/// What a step's store operations did: the subscription applies a fact's confirm and release in
/// one step; every other step does at most one operation.
pub type Reports = [Option<OpReport>; 2];

/// What one store operation did, for traces.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct OpReport {
    /// The key.
    pub key: u8,
    /// The operation.
    pub op: Op,
    /// The outcome.
    pub outcome: Outcome,
    /// The rule that decided it.
    pub rule: Rule,
}

/// Who takes a step of the model: the lifeline a sequence chart draws it from
/// ([`crate::chart`]).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Actor {
    /// The store's clock, ticking.
    Clock,
    /// An owner: its attempts' reserves, appends, confirms, abandons and crashes, and its facts
    /// that give its key up.
    Owner(u8),
    /// An owner's subscription, applying its facts to the store.
    Subscription(u8),
}

impl Actor {
    /// Who takes `action`.
    pub(crate) fn of(action: &Action) -> Actor {
        match *action {
            Action::Tick => Actor::Clock,
            Action::Reserve { owner, .. }
            | Action::Retry { owner, .. }
            | Action::Append { owner, .. }
            | Action::Confirm { owner, .. }
            | Action::Abandon { owner, .. }
            | Action::Crash { owner, .. }
            | Action::GiveUp { owner, .. } => Actor::Owner(owner),
            Action::Apply { owner } | Action::Restart { owner, .. } | Action::Replay { owner, .. } => {
                Actor::Subscription(owner)
            }
        }
    }
}
