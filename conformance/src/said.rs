//! What the checks run on a thread said they did: a check that fires faults, crashes or power
//! cuts says what it fired, and the runner takes it as a note of that check. Its own module on
//! the ground floor, so that the checks that say and the runner that asks need not import each
//! other.

std::thread_local! {
    /// What the checks run on this thread said they did, since the runner last asked.
    static SAID: std::cell::RefCell<Vec<String>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Says what a check did (`what`: its run's report), for the report of the run that called it:
/// the runner takes it as a note of that check.
pub(crate) fn say(what: String) {
    SAID.with(|said| said.borrow_mut().push(what));
}

/// What the checks said since the last call, taken.
pub(crate) fn said() -> Vec<String> {
    SAID.with(|said| std::mem::take(&mut *said.borrow_mut()))
}
