//! Faults on a seeded schedule: what a harness can do to its store's world, and the check that
//! runs operations while those faults fire.

use reservation_store::StorageError;

/// A fault in the store's world. A harness offers the ones it can cause
/// ([`Harness::faults`](crate::Harness::faults)) and causes them on the suite's call
/// ([`Harness::inject`](crate::Harness::inject)); the suite causes [`Fault::Restart`] and
/// [`Fault::ClockJump`] itself.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
#[non_exhaustive]
pub enum Fault {
    /// Every connection between the store and its server is cut; the server keeps running and the
    /// store must connect again by itself. Operations in flight fail.
    CutConnections,
    /// The server is killed (SIGKILL: nothing is flushed) and started again on the same storage;
    /// the store must connect again by itself.
    Crash,
    /// The server is stopped (SIGSTOP) for a while, then let go on (SIGCONT): it neither answers
    /// nor closes its connections meanwhile.
    Pause,
    /// The primary is killed and a replica promoted in its place; the store must follow it.
    Failover,
    /// The suite's own, for a durable harness: the store is closed and a new one opened on the
    /// same storage ([`Harness::reopen`](crate::Harness::reopen)), as a restarting process.
    Restart,
    /// The suite's own: the store's clock jumps ahead, past every reservation's expiry.
    ClockJump,
}

impl Fault {
    /// Every fault.
    pub const ALL: [Fault; 6] =
        [Fault::CutConnections, Fault::Crash, Fault::Pause, Fault::Failover, Fault::Restart, Fault::ClockJump];

    /// The fault's name, as reports print it: `cut-connections`, `crash`, `pause`, `failover`,
    /// `restart`, `clock-jump`.
    pub const fn name(self) -> &'static str {
        match self {
            Fault::CutConnections => "cut-connections",
            Fault::Crash => "crash",
            Fault::Pause => "pause",
            Fault::Failover => "failover",
            Fault::Restart => "restart",
            Fault::ClockJump => "clock-jump",
        }
    }

    /// Whether the suite causes the fault itself, rather than the harness.
    pub const fn is_the_suites(self) -> bool {
        matches!(self, Fault::Restart | Fault::ClockJump)
    }
}

impl std::fmt::Display for Fault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The error of [`Harness::inject`](crate::Harness::inject) for a fault the harness does not
/// offer.
pub fn not_offered(fault: Fault) -> StorageError {
    StorageError::new(format!("this harness cannot cause the fault `{fault}`"))
}
