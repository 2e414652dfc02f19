//! The checker's ceiling: how many states per second stateright generates when the model costs
//! next to nothing, measured beside a check so that the check's rate can be given as a ratio to
//! it (the machine's load and speed cancel out).
//!
//! The trivial model counts: four counters from 0 up to a bound, each step one counter up by one
//! or by two. It is sized to about as many unique states as the check it is measured beside (the
//! visited set's size sets much of the checker's rate), most of its states have eight successors
//! (the reservation model's have about as many), its paths are about as deep (the checker copies
//! a state's path for each new state; counters that also went down would make paths as long as
//! the state space), it declares as many always-properties as the
//! reservation model (each true, and each looked up by the checker at every state by the same
//! short name as theirs are), and it runs with the same threads and, when the check uses it, through the same symmetry
//! path (an identity representative).

use std::time::Instant;

use stateright::{Checker, Model, Property, Representative};

use crate::model::properties::CHECKER_NAMES;

/// Counters of the trivial model.
const COUNTERS: usize = 4;

/// The trivial model: each counter from 0 up to `top`, by steps of one or two.
#[derive(Clone, Debug)]
pub(crate) struct Counters {
    top: u8,
}

/// A state of the trivial model.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub(crate) struct Counts([u8; COUNTERS]);

impl Representative for Counts {
    fn representative(&self) -> Self {
        *self
    }
}

fn always_true(_: &Counters, _: &Counts) -> bool {
    true
}

impl Model for Counters {
    type State = Counts;
    type Action = (u8, u8);

    fn init_states(&self) -> Vec<Counts> {
        vec![Counts([0; COUNTERS])]
    }

    fn actions(&self, s: &Counts, out: &mut Vec<(u8, u8)>) {
        for (i, &c) in s.0.iter().enumerate() {
            for by in 1..=2 {
                if c.checked_add(by).is_some_and(|n| n <= self.top) {
                    out.push((i as u8, by));
                }
            }
        }
    }

    fn next_state(&self, s: &Counts, (i, by): (u8, u8)) -> Option<Counts> {
        let mut n = *s;
        let c = n.0.get_mut(usize::from(i))?;
        *c = c.checked_add(by).filter(|n| *n <= self.top)?;
        Some(n)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        CHECKER_NAMES.iter().map(|name| Property::always(name, always_true)).collect()
    }
}

/// What the trivial model's run measured.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Ceiling {
    /// Unique states of the trivial model.
    pub unique_states: usize,
    /// States it generated, repeats included.
    pub total_states: usize,
    /// Wall time.
    pub seconds: f64,
    /// Processor time the process spent meanwhile (every thread), where the system reports it.
    pub cpu_seconds: Option<f64>,
}

impl Ceiling {
    /// Generated states per second of wall time.
    pub fn generated_per_second(&self) -> f64 {
        if self.seconds > 0.0 { self.total_states as f64 / self.seconds } else { 0.0 }
    }

    /// Generated states per processor second, where the system reports processor time: the
    /// checker's ceiling, unmoved by other processes' load.
    pub fn generated_per_cpu_second(&self) -> Option<f64> {
        self.cpu_seconds.filter(|c| *c > 0.0).map(|c| self.total_states as f64 / c)
    }
}

/// The counters' bound that gives at least `unique` states (`(top + 1)^4`), within a byte.
fn top_for(unique: usize) -> u8 {
    let mut side: usize = 2;
    while side < 256 && side.saturating_pow(COUNTERS as u32) < unique {
        side += 1;
    }
    u8::try_from(side - 1).unwrap_or(u8::MAX)
}

/// Runs the trivial model, sized to about `unique` states, depth first on `threads` threads,
/// through the symmetry path if `symmetry`.
pub(crate) fn measure(unique: usize, threads: usize, symmetry: bool) -> Ceiling {
    let model = Counters { top: top_for(unique) };
    let mut builder = model.checker().threads(threads.max(1));
    if symmetry {
        builder = builder.symmetry();
    }
    let (start, cpu) = (Instant::now(), cpu_seconds());
    let checker = builder.spawn_dfs().join();
    Ceiling {
        unique_states: checker.unique_state_count(),
        total_states: checker.state_count(),
        seconds: start.elapsed().as_secs_f64(),
        cpu_seconds: cpu_seconds().zip(cpu).map(|(end, start)| end - start),
    }
}

/// The processor time the process has used so far, every thread's, user and system, in seconds
/// (Linux: fields 14 and 15 of `/proc/self/stat`, in the kernel's fixed 100 ticks per second),
/// or `None` where it cannot be read.
pub(crate) fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The command name, in parentheses, may hold spaces: count fields after it.
    let (_, rest) = stat.rsplit_once(')')?;
    let mut fields = rest.split_whitespace().skip(11);
    let user: u64 = fields.next()?.parse().ok()?;
    let system: u64 = fields.next()?.parse().ok()?;
    Some((user + system) as f64 / 100.0)
}

/// The process's peak resident memory, in bytes (Linux: `VmHWM` of `/proc/self/status`), or
/// `None` where it cannot be read.
pub(crate) fn peak_memory() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kb.checked_mul(1024)
}

/// Starts the process's peak resident memory afresh (Linux: writing 5 to `/proc/self/clear_refs`
/// sets `VmHWM` back to the memory in use), so that the next [`peak_memory`] is the peak of
/// what ran since: several checks in one process each report their own. Whether it could.
pub(crate) fn reset_peak_memory() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

#[cfg(test)]
mod tests {
    use super::{measure, peak_memory, reset_peak_memory, top_for};

    /// After a reset, the peak is what the process held since, not its earlier peak.
    #[test]
    fn a_reset_starts_the_peak_memory_afresh() {
        let big = vec![1u8; 64 << 20];
        std::hint::black_box(&big);
        let before = peak_memory().expect("VmHWM on Linux");
        drop(big);
        assert!(reset_peak_memory());
        let after = peak_memory().expect("VmHWM on Linux");
        assert!(after + (32 << 20) < before, "{after} against {before}");
    }

    #[test]
    fn the_trivial_model_is_sized_to_the_check_and_visits_every_state() {
        assert_eq!(top_for(0), 1);
        assert_eq!(top_for(16), 1);
        assert_eq!(top_for(17), 2);
        assert_eq!(top_for(usize::MAX), u8::MAX);
        let c = measure(10_000, 2, true);
        // 10^4 states; per counter, 9 values step up by one and 8 by two. Generated counts the
        // initial state too.
        assert_eq!(c.unique_states, 10_000);
        assert_eq!(c.total_states, 4 * (9 + 8) * 1000 + 1);
        assert!(c.generated_per_second() > 0.0);
        assert!(c.cpu_seconds.is_none_or(|s| s >= 0.0));
    }
}
