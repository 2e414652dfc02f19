//! Commands run with a bound on their wait, signals sent with the `kill` command, and processes
//! found through `/proc` (Linux): what [`crate::cluster`] does to the servers it runs.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use reservation_store::StorageError;

/// Longest wait for the `kill` command itself.
const KILL_LIMIT: Duration = Duration::from_secs(5);

/// How often a wait on a process or a server looks again.
pub(crate) const POLL: Duration = Duration::from_millis(20);

/// Runs `program` with `args` and returns its standard output, or an error that names the
/// command and says what it wrote to standard error. A command still running after `limit` is
/// killed, and is an error.
pub(crate) fn run(program: &str, args: &[&str], limit: Duration) -> Result<String, StorageError> {
    let output = finish(program, args, limit)?;
    if output.status.success() {
        return Ok(String::from_utf8_lossy(&output.stdout).into_owned());
    }
    let said = String::from_utf8_lossy(&output.stderr);
    Err(StorageError::new(format!("{} failed ({}): {}", shown(program, args), output.status, said.trim())))
}

/// The command as an error message shows it.
fn shown(program: &str, args: &[&str]) -> String {
    format!("`{program} {}`", args.join(" "))
}

/// Runs `program` with `args` to its end, whatever its exit status; an error when it cannot run
/// or is still running after `limit` (then it is killed).
fn finish(program: &str, args: &[&str], limit: Duration) -> Result<Output, StorageError> {
    let child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| StorageError::with_source(format!("running {}", shown(program, args)), e))?;
    let pid = child.id();
    let (sender, answer) = mpsc::channel();
    // The thread owns the child, and reaps it; reading both pipes there keeps a talkative command
    // from blocking on a full one.
    std::thread::spawn(move || {
        let _ = sender.send(child.wait_with_output());
    });
    match answer.recv_timeout(limit) {
        Ok(output) => output.map_err(|e| StorageError::with_source(format!("waiting for {}", shown(program, args)), e)),
        Err(_) => {
            // Not reaped yet (the thread still waits for it), so the process id is still its own.
            let _ = signal("KILL", &[pid]);
            Err(StorageError::new(format!("{} did not end within {limit:?}", shown(program, args))))
        }
    }
}

/// Sends the signal `name` (`STOP`, `CONT`, `KILL`) to each of `pids` with the `kill` command,
/// never to 0 or 1. A process that has ended meanwhile is no error (`kill` signals the others all
/// the same); a `kill` command that cannot run is.
pub(crate) fn signal(name: &str, pids: &[u32]) -> Result<(), StorageError> {
    // Never 0, which names the caller's own process group, nor 1, the system's first process.
    let pids: Vec<u32> = pids.iter().copied().filter(|&pid| pid > 1).collect();
    if pids.is_empty() {
        return Ok(());
    }
    let mut args = vec!["-s".to_owned(), name.to_owned()];
    args.extend(pids.iter().map(u32::to_string));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    finish("kill", &args, KILL_LIMIT).map(drop)
}

/// A program of an orchestrated topology (a `pg_autoctl` node, a Patroni node, etcd) run as the
/// `postgres` user in a process group of its own, until [`Daemon::kill`] ends the group.
pub(crate) struct Daemon(Child);

impl Daemon {
    /// Runs `program` with `args` as the `postgres` user (`runuser`), `bin` first on its `PATH`,
    /// in a process group of its own, its output in `log`.
    pub(crate) fn spawn(bin: &str, program: &str, args: &[&str], log: &Path) -> Result<Daemon, StorageError> {
        use std::os::unix::process::CommandExt as _;
        let what = format!("the log of {program}");
        let out = std::fs::File::create(log).map_err(|e| StorageError::with_source(what.clone(), e))?;
        let err = out.try_clone().map_err(|e| StorageError::with_source(what, e))?;
        Command::new("runuser")
            .args(["-u", "postgres", "--", "env", &format!("PATH={bin}:/usr/bin:/bin"), program])
            .args(args)
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map(Daemon)
            .map_err(|e| StorageError::with_source(format!("running {program} as postgres (runuser)"), e))
    }

    /// The program's process id (the leader of its process group).
    pub(crate) fn id(&self) -> u32 {
        self.0.id()
    }

    /// Kills the whole process group (SIGKILL), and reaps the program.
    pub(crate) fn kill(mut self) {
        kill_group(self.0.id());
        let _ = self.0.wait();
    }
}

/// Sends SIGKILL to every process of the process group `group` (never to group 0 or 1); best
/// effort.
pub(crate) fn kill_group(group: u32) {
    if group > 1 {
        let _ = finish("kill", &["-s", "KILL", "--", &format!("-{group}")], KILL_LIMIT);
    }
}

/// What `/proc/<pid>/stat` says of a process: its state letter and when it started.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Stat {
    /// `R`, `S`, `D`, `T` (stopped), `Z` (ended, not yet reaped), …
    pub(crate) state: char,
    /// When the process started, in clock ticks since the system booted.
    pub(crate) started: u64,
    /// Its parent's process id.
    pub(crate) parent: u32,
}

/// The process `pid`'s [`Stat`], or `None` when there is no such process.
pub(crate) fn stat(pid: u32) -> Option<Stat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name, in parentheses, may hold spaces and parentheses: the fields follow the last.
    let fields: Vec<&str> = text.get(text.rfind(')')? + 1..)?.split_whitespace().collect();
    Some(Stat {
        state: fields.first()?.chars().next()?,
        started: fields.get(19)?.parse().ok()?,
        parent: fields.get(1)?.parse().ok()?,
    })
}

/// Stops (SIGSTOP) every process `pick` lists, listing them again until each one is stopped,
/// so that a process started meanwhile is stopped too, within `limit`; an error, naming `what`,
/// if there is none.
pub(crate) fn stop_every(what: &str, limit: Duration, pick: impl Fn() -> Vec<u32>) -> Result<(), StorageError> {
    if pick().is_empty() {
        return Err(StorageError::new(format!("{what}: none to stop")));
    }
    wait_until(limit, &format!("{what}: every one stopping"), || {
        let running: Vec<u32> = pick().into_iter().filter(|&pid| !stopped(pid)).collect();
        let _ = signal("STOP", &running);
        running.is_empty()
    })
}

/// Whether `pid` is stopped by a signal, or has ended.
pub(crate) fn stopped(pid: u32) -> bool {
    stat(pid).is_none_or(|s| matches!(s.state, 'T' | 't' | 'Z' | 'X'))
}

/// Sweeps what test processes now ended left of the topologies they ran in directories
/// `<temporary directory>/<prefix><process id>-…`: every process whose command line names such
/// a directory (a node's server names its data there, its orchestrator its settings, each
/// server process its cluster, named after the directory, in its title) is killed, and the
/// directory removed. Best effort: what cannot be read is left.
pub(crate) fn sweep_stale(prefix: &str) {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(owner) = name.strip_prefix(prefix).and_then(|rest| rest.split('-').next()?.parse::<u32>().ok()) else {
            continue;
        };
        if owner == std::process::id() || alive(owner) {
            continue;
        }
        let _ = signal("KILL", &pids_where(|command| command.contains(&name)));
        let _ = std::fs::remove_dir_all(entry.path());
    }
}

/// `root` and every process that descends from it, while they run; none for 0 or 1, whose
/// descendants are every process of the machine.
pub(crate) fn descendants(root: u32) -> Vec<u32> {
    if root <= 1 {
        return Vec::new();
    }
    let parents: Vec<(u32, u32)> =
        pids_where(|_| true).into_iter().filter_map(|pid| stat(pid).map(|s| (pid, s.parent))).collect();
    let mut found = vec![root];
    let mut i = 0;
    while let Some(&pid) = found.get(i) {
        found.extend(parents.iter().filter(|(_, parent)| *parent == pid).map(|(child, _)| *child));
        i += 1;
    }
    found.retain(|&pid| alive(pid));
    found
}

/// How many of a log's last lines an error shows.
const LOG_LINES: usize = 8;

/// The last lines that `keep` keeps of each log (`*.log`) in `dir`, in the order of their names,
/// each log headed by its name: for an error that must say what a topology's programs said.
/// Nothing for a directory that cannot be read.
pub(crate) fn logs_end(dir: &Path, keep: impl Fn(&str) -> bool) -> String {
    let Ok(entries) = std::fs::read_dir(dir) else { return String::new() };
    let mut logs: Vec<PathBuf> =
        entries.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "log")).collect();
    logs.sort();
    let mut shown = String::new();
    for log in logs {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let kept: Vec<&str> = text.lines().filter(|l| keep(l)).collect();
        let tail = kept.get(kept.len().saturating_sub(LOG_LINES)..).unwrap_or_default();
        let name = log.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        shown.push_str(&format!("; {name} ends:\n{}", tail.join("\n")));
    }
    shown
}

/// The process id of the postmaster of the data directory `data`, from its `postmaster.pid`,
/// while it runs.
pub(crate) fn postmaster(data: &Path) -> Option<u32> {
    let text = std::fs::read_to_string(data.join("postmaster.pid")).ok()?;
    let pid: u32 = text.lines().next()?.trim().parse().ok()?;
    alive(pid).then_some(pid)
}

/// The WAL senders of the server whose data directory is `data`, while it runs.
pub(crate) fn senders(data: &Path) -> Vec<u32> {
    let Some(postmaster) = postmaster(data) else { return Vec::new() };
    children(postmaster, |command| command.contains(": walsender "))
}

/// The processes the postmaster `postmaster` started whose command line (a server process shows
/// its title there) satisfies `wanted`.
fn children(postmaster: u32, wanted: impl Fn(&str) -> bool) -> Vec<u32> {
    // Every orphan on the machine is a child of 1.
    if postmaster <= 1 {
        return Vec::new();
    }
    pids_where(wanted).into_iter().filter(|&pid| stat(pid).is_some_and(|s| s.parent == postmaster)).collect()
}

/// Whether `pid` is a process that has not ended (an ended one not yet reaped has not run since).
pub(crate) fn alive(pid: u32) -> bool {
    stat(pid).is_some_and(|s| !matches!(s.state, 'Z' | 'X'))
}

/// The processes that have not ended whose command line (arguments joined by spaces; a
/// PostgreSQL process shows its title there) satisfies `wanted`.
pub(crate) fn pids_where(wanted: impl Fn(&str) -> bool) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| alive(pid))
        .filter(|&pid| command_line(pid).is_some_and(|command| wanted(&command)))
        .collect()
}

/// The command line of `pid`, its arguments joined by spaces.
fn command_line(pid: u32) -> Option<String> {
    let raw = std::fs::read(Path::new("/proc").join(pid.to_string()).join("cmdline")).ok()?;
    Some(String::from_utf8_lossy(&raw).replace('\0', " ").trim_end().to_owned())
}

/// Waits until `done` holds, looking every [`POLL`]; an error that says `what` did not happen
/// after `limit`.
pub(crate) fn wait_until(limit: Duration, what: &str, mut done: impl FnMut() -> bool) -> Result<(), StorageError> {
    let start = Instant::now();
    loop {
        if done() {
            return Ok(());
        }
        if start.elapsed() >= limit {
            return Err(StorageError::new(format!("{what}: not within {limit:?}")));
        }
        std::thread::sleep(POLL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An error shows the last lines of each log of a topology's directory, by name, the lines
    /// `keep` keeps.
    #[test]
    fn the_end_of_each_log_is_shown_by_its_name() {
        let dir = std::env::temp_dir().join(format!("reservation-logs-end-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a directory");
        let many: String = (1..=20).map(|i| format!("line {i}\n")).collect();
        std::fs::write(dir.join("b.log"), many).expect("a log");
        std::fs::write(dir.join("a.log"), "started\nno action\n").expect("a log");
        std::fs::write(dir.join("settings.yml"), "not a log\n").expect("a file");
        let shown = logs_end(&dir, |l| !l.contains("no action"));
        let b: String = (13..=20).map(|i| format!("line {i}")).collect::<Vec<_>>().join("\n");
        assert_eq!(shown, format!("; a.log ends:\nstarted; b.log ends:\n{b}"));
        assert_eq!(logs_end(&dir.join("none"), |_| true), "");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Neither 0 nor 1 has descendants to list: every process of the machine descends from them,
    /// and a list of processes to stop or kill must never be that.
    #[test]
    fn neither_0_nor_1_has_descendants_to_list() {
        assert_eq!(descendants(0), Vec::<u32>::new());
        assert_eq!(descendants(1), Vec::<u32>::new());
        let mut child = Command::new("sh").args(["-c", "sleep 30; true"]).spawn().expect("a process");
        // The shell starts its `sleep` a moment after it starts itself.
        let mut listed = descendants(child.id());
        let _ = wait_until(Duration::from_secs(5), "the shell's sleep", || {
            listed = descendants(child.id());
            listed.len() >= 2
        });
        let _ = child.kill();
        let _ = child.wait();
        assert!(listed.len() >= 2 && listed.first() == Some(&child.id()), "{listed:?}");
    }

    /// Neither 0 (the caller's own process group) nor 1 is ever signalled: were they, this test
    /// process would stop.
    #[test]
    fn neither_the_callers_group_nor_the_first_process_is_signalled() {
        signal("STOP", &[0, 1]).expect("nothing to signal");
        kill_group(0);
        let mut child = Command::new("sleep").arg("30").spawn().expect("a process");
        signal("KILL", &[0, 1, child.id()]).expect("signalled");
        assert!(child.wait().expect("it ended").code().is_none(), "the process beside 0 and 1 was not killed");
    }

    /// What a test process now ended left is swept: its process killed, its directory removed;
    /// what a live process owns is left.
    #[test]
    fn what_an_ended_test_process_left_is_swept_and_a_live_ones_is_left() {
        let mut ended = Command::new("true").spawn().expect("a process");
        let gone = ended.id();
        ended.wait().expect("it ended");
        let prefix = format!("reservation-sweep-test-{}-", std::process::id());
        let stale = format!("{prefix}{gone}-1");
        let live = format!("{prefix}{}-1", std::process::id());
        let (stale_dir, live_dir) = (std::env::temp_dir().join(&stale), std::env::temp_dir().join(&live));
        for dir in [&stale_dir, &live_dir] {
            std::fs::create_dir_all(dir).expect("a directory");
        }
        let spawn = |name: &str| Command::new("sh").args(["-c", "sleep 60; true", name]).spawn().expect("a process");
        let (mut left, mut kept) = (spawn(&stale), spawn(&live));
        sweep_stale(&prefix);
        assert!(!stale_dir.exists(), "the ended process's directory is left");
        assert!(live_dir.exists(), "the live process's directory was removed");
        let swept = left.try_wait().ok().flatten().is_some() || {
            std::thread::sleep(Duration::from_millis(200));
            left.try_wait().ok().flatten().is_some()
        };
        assert!(swept, "the ended process's node still runs");
        assert!(kept.try_wait().expect("its state").is_none(), "the live process's node was killed");
        let _ = kept.kill();
        let _ = kept.wait();
        let _ = std::fs::remove_dir_all(&live_dir);
    }
}
