//! The SQLite store's tests: a module per topic, every one on files in temporary directories of
//! its own. Some run this binary again as child processes (a crash, processes sharing a file).

mod adversary;
mod conformance;
mod crash;
mod fault_check;
mod power_cut;
mod processes;
mod store;

/// Runs the test `test` of this binary again in a child process with `env` set to `value`, its
/// stdin and stdout piped, and waits until it prints `READY`; returns the child and its output
/// lines.
fn spawn_ready_child(
    test: &str,
    env: &str,
    value: impl AsRef<std::ffi::OsStr>,
) -> (std::process::Child, std::io::Lines<std::io::BufReader<std::process::ChildStdout>>) {
    use std::io::BufRead;
    use std::process::{Command, Stdio};
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", test, "--nocapture"])
        .env(env, value)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    while lines.next().unwrap().unwrap() != "READY" {}
    (child, lines)
}
