//! [`Disk`]: the tree mounted where a store keeps its storage, served by a process of its own,
//! and cut.

use std::io::{self, BufReader, BufWriter};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, sync_channel};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use crate::fs::{Counts, Trap};
use crate::server::{COUNTS, CUT, HELD, POWER_OFF, POWER_ON, SERVE, TRAP, TREE, UNTRAP};
use crate::tree::{Persistence, TakenBack, Tree};
use crate::wire::{self, In, Out};

/// How long the owner waits for its server's answer beyond what the request itself waits: a
/// mount, an unmount and a copy of the tree take milliseconds; a server that takes this long is
/// stuck.
const ANSWER: Duration = Duration::from_secs(30);

/// What one cut did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CutReport {
    /// The persistence model it cut under.
    pub model: Persistence,
    /// The seed of its choices.
    pub seed: u64,
    /// The operation a trap held when it came, if any.
    pub held: Option<String>,
    /// The effects it took back, never made durable.
    pub taken_back: Vec<TakenBack>,
    /// What the disk served between the last mount and the cut.
    pub counts: Counts,
}

impl std::fmt::Display for CutReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "a power cut under the `{}` model (seed {})", self.model, self.seed)?;
        if let Some(held) = &self.held {
            write!(f, " while {held} was in progress")?;
        }
        let c = &self.counts;
        write!(
            f,
            ", after {} writes, {} syncs of files, {} of directories and {} changes of names",
            c.writes, c.file_syncs, c.dir_syncs, c.names
        )?;
        if self.taken_back.is_empty() {
            return f.write_str(": nothing unsynced was taken back");
        }
        write!(f, "; it took back {} unsynced effects:", self.taken_back.len())?;
        for line in summary(&self.taken_back) {
            write!(f, "\n  {line}")?;
        }
        Ok(())
    }
}

/// The effects, one line each, except that lost writes of one file that follow one another on
/// it (a log's appends) are told as one range.
fn summary(effects: &[TakenBack]) -> Vec<String> {
    let mut lines = Vec::new();
    let mut run: Option<(&str, u64, u64, usize)> = None;
    let flush = |run: &mut Option<(&str, u64, u64, usize)>, lines: &mut Vec<String>| {
        if let Some((path, start, end, writes)) = run.take() {
            let effect = TakenBack::Bytes { path: path.to_owned(), range: (start, end), kept: 0 };
            lines.push(if writes == 1 { effect.to_string() } else { format!("{effect} ({writes} writes)") });
        }
    };
    for effect in effects {
        match (effect, &mut run) {
            (TakenBack::Bytes { path, range, kept: 0 }, Some((p, start, end, writes)))
                if p == path && (*start..=*end).contains(&range.0) =>
            {
                *end = (*end).max(range.1);
                *writes += 1;
            }
            (TakenBack::Bytes { path, range, kept: 0 }, _) => {
                flush(&mut run, &mut lines);
                run = Some((path, range.0, range.1, 1));
            }
            _ => {
                flush(&mut run, &mut lines);
                lines.push(effect.to_string());
            }
        }
    }
    flush(&mut run, &mut lines);
    lines
}

/// The owner's end of the server: requests go to its input; a thread reads its answers.
struct Channel {
    /// `None` once the disk is dropped: the server's input closed.
    to: Option<BufWriter<ChildStdin>>,
    answers: Receiver<io::Result<Vec<u8>>>,
}

impl Channel {
    fn ask(&mut self, request: &[u8], beyond: Duration) -> io::Result<Vec<u8>> {
        wire::send(self.to.as_mut().ok_or(io::ErrorKind::BrokenPipe)?, request)?;
        match self.answers.recv_timeout(ANSWER + beyond) {
            Ok(answer) => answer,
            Err(RecvTimeoutError::Timeout) => Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("the disk's server did not answer within {:?}", ANSWER + beyond),
            )),
            Err(RecvTimeoutError::Disconnected) => Err(io::ErrorKind::BrokenPipe.into()),
        }
    }
}

/// A disk that can lose power, mounted at a directory: a store keeps its storage there, and
/// [`Disk::cut`] takes back what it never synced, as a power cut under a [`Persistence`] model
/// would, and mounts what is left in the same place.
///
/// The mount is served by a process of its own (this executable, run again: see the crate's
/// documentation), so that a store that maps its files into memory cannot deadlock with it.
/// Mounting needs `/dev/fuse` and the right to mount (root, or `CAP_SYS_ADMIN`). Dropping the
/// disk kills the mount and ends its server.
pub struct Disk {
    mountpoint: PathBuf,
    server: Child,
    channel: Mutex<Channel>,
    /// The mount's root, held open until the next mount is in place: the old mount then still
    /// holds its device number, so that the new one gets another, and a library that caches
    /// files by device and inode (SQLite does, per process) takes the files after a cut for new
    /// ones, as a restarted machine's processes would.
    pin: Option<std::fs::File>,
}

impl std::fmt::Debug for Disk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Disk").field("mountpoint", &self.mountpoint).finish_non_exhaustive()
    }
}

fn refused(what: &str, input: &mut In<'_>) -> io::Error {
    let why = input.text().unwrap_or_default();
    io::Error::other(format!("{what}: {why}"))
}

impl Disk {
    /// Mounts an empty disk at `mountpoint`, an existing directory.
    ///
    /// # Errors
    /// When the server cannot start or the mount is refused (no `/dev/fuse`, no right to mount,
    /// no such directory).
    pub fn mount(mountpoint: impl AsRef<Path>) -> io::Result<Disk> {
        Disk::mount_tree(mountpoint, Tree::new())
    }

    /// Mounts `tree` at `mountpoint`, everything in it durable.
    ///
    /// # Errors
    /// As [`Disk::mount`].
    pub fn mount_tree(mountpoint: impl AsRef<Path>, tree: Tree) -> io::Result<Disk> {
        let mountpoint = std::path::absolute(mountpoint.as_ref())?;
        let text =
            mountpoint.to_str().ok_or_else(|| io::Error::other("a mountpoint whose path is not UTF-8"))?.to_owned();
        let (tree, _) = tree.cut(Persistence::Process, 0);
        let mut server = Command::new(std::env::current_exe()?)
            .env(SERVE, "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()?;
        let (Some(to), Some(from)) = (server.stdin.take(), server.stdout.take()) else {
            return Err(io::Error::other("the server's pipes"));
        };
        let (sender, answers) = sync_channel(1);
        std::thread::spawn(move || {
            let mut from = BufReader::new(from);
            while sender.send(wire::receive(&mut from)).is_ok() {}
        });
        let mut disk = Disk {
            mountpoint,
            server,
            channel: Mutex::new(Channel { to: Some(BufWriter::new(to)), answers }),
            pin: None,
        };
        let mut first = Out::default();
        first.text(&text);
        wire::put_tree(&mut first, &tree);
        let answer = disk.ask(&first.0, Duration::ZERO)?;
        let mut answer = In(&answer);
        if answer.u8()? != 1 {
            return Err(refused("the mount was refused", &mut answer));
        }
        disk.pin()?;
        Ok(disk)
    }

    /// Holds the root of the mount now in place open, and lets the one before go.
    fn pin(&mut self) -> io::Result<()> {
        let root = std::fs::File::open(&self.mountpoint)?;
        self.pin = Some(root);
        Ok(())
    }

    fn ask(&self, request: &[u8], beyond: Duration) -> io::Result<Vec<u8>> {
        self.channel.lock().unwrap_or_else(PoisonError::into_inner).ask(request, beyond)
    }

    /// Where it is mounted.
    pub fn path(&self) -> &Path {
        &self.mountpoint
    }

    /// Sets (or, with `None`, clears) the trap that holds one operation until the cut.
    ///
    /// # Errors
    /// When the server does not answer.
    pub fn set_trap(&self, trap: Option<Trap>) -> io::Result<()> {
        let mut request = Out::default();
        match trap {
            Some(trap) => wire::put_trap(request.u8(TRAP), &trap),
            None => {
                request.u8(UNTRAP);
            }
        }
        self.ask(&request.0, Duration::ZERO).map(drop)
    }

    /// The operation the trap holds, waiting up to `wait` for it to be reached.
    ///
    /// # Errors
    /// When the server does not answer.
    pub fn held(&self, wait: Duration) -> io::Result<Option<String>> {
        let millis = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX);
        let answer = self.ask(&Out::default().u8(HELD).u64(millis).0, wait)?;
        let mut answer = In(&answer);
        let some = answer.u8()? == 1;
        let held = answer.text()?;
        Ok(some.then_some(held))
    }

    /// A copy of the disk as it is now.
    ///
    /// # Errors
    /// When the server does not answer.
    pub fn tree(&self) -> io::Result<Tree> {
        wire::get_tree(&mut In(&self.ask(&[TREE], Duration::ZERO)?))
    }

    /// What the disk served since it was mounted.
    ///
    /// # Errors
    /// When the server does not answer.
    pub fn counts(&self) -> io::Result<Counts> {
        wire::get_counts(&mut In(&self.ask(&[COUNTS], Duration::ZERO)?))
    }

    /// Cuts the power under `model`, its choices drawn from `seed`: every operation in progress
    /// or to come on this mount fails (`EIO`) from now on, the mount is detached, and what the
    /// model keeps is mounted in the same place, durable. A store open on the old mount must be
    /// dropped and opened again.
    ///
    /// # Errors
    /// When the server does not answer or the new mount is refused.
    pub fn cut(&mut self, model: Persistence, seed: u64) -> io::Result<CutReport> {
        self.cut_by(CUT, model, seed)
    }

    /// As [`Disk::cut`], but the power stays off until [`Disk::power_on`]: the disk is dead and
    /// still mounted, so that every operation on it fails (`EIO`), opening a file by its path
    /// included, and a store that goes on running after the cut (its threads finishing what they
    /// were doing) reaches neither the old disk nor the new one. Only [`Disk::power_on`] may
    /// follow.
    ///
    /// # Errors
    /// When the server does not answer, or the power is off already.
    pub fn power_off(&mut self, model: Persistence, seed: u64) -> io::Result<CutReport> {
        self.cut_by(POWER_OFF, model, seed)
    }

    /// After [`Disk::power_off`]: what the cut kept, mounted in the same place, durable.
    ///
    /// # Errors
    /// When the server does not answer, the power is on, or the new mount is refused.
    pub fn power_on(&mut self) -> io::Result<()> {
        let answer = self.ask(&[POWER_ON], Duration::ZERO)?;
        let mut answer = In(&answer);
        if answer.u8()? != 1 {
            return Err(refused("the power could not come back", &mut answer));
        }
        self.pin()
    }

    fn cut_by(&mut self, request: u8, model: Persistence, seed: u64) -> io::Result<CutReport> {
        let mut out = Out::default();
        out.u8(request);
        wire::put_model(&mut out, model);
        out.u64(seed);
        let answer = self.ask(&out.0, Duration::ZERO)?;
        let mut answer = In(&answer);
        if answer.u8()? != 1 {
            return Err(refused("the cut was refused, or the mount after it", &mut answer));
        }
        let report = wire::get_report(&mut answer)?;
        if request == CUT {
            self.pin()?;
        }
        Ok(report)
    }
}

impl Drop for Disk {
    fn drop(&mut self) {
        self.pin = None;
        // Its input closed, the server kills the mount and ends; a server that does not end in
        // time is killed (the kernel then fails every operation on the mount).
        self.channel.get_mut().unwrap_or_else(PoisonError::into_inner).to = None;
        for _ in 0..100 {
            if matches!(self.server.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.server.kill();
        let _ = self.server.wait();
    }
}
