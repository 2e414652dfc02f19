//! The disk's server: a process of its own that mounts the tree and serves the kernel, and obeys
//! its owner ([`crate::Disk`]) over its standard input and output.
//!
//! It must be another process. A server thread in the store's own process deadlocks as soon as
//! the store maps a file of the mount into memory (SQLite's shared-memory index of its log, for
//! one): a page fault holds the process's memory map while it waits for the server, and the
//! server, allocating, waits for the same map.
//!
//! The owner starts it by running its own executable again with [`SERVE`] set: a constructor
//! that runs before `main` ([`serve_if_asked`]) finds the variable and serves instead, in any
//! executable that links this crate (a test binary, the command line), with nothing to install.

use std::io::{self, BufReader, BufWriter};
use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use fuser::{BackgroundSession, Config, MountOption, SessionACL};

use crate::fs::{Fs, Shared, State};
use crate::mount::CutReport;
use crate::tree::Tree;
use crate::wire::{self, In, Out};

/// The environment variable that makes a process the disk's server.
pub(crate) const SERVE: &str = "RESERVATION_DISK_SERVE";

/// Requests, by their first byte.
pub(crate) const TRAP: u8 = 1;
pub(crate) const UNTRAP: u8 = 2;
pub(crate) const HELD: u8 = 3;
pub(crate) const TREE: u8 = 4;
pub(crate) const COUNTS: u8 = 5;
pub(crate) const CUT: u8 = 6;
pub(crate) const POWER_OFF: u8 = 7;
pub(crate) const POWER_ON: u8 = 8;

#[ctor::ctor(unsafe)]
fn serve_if_asked() {
    if std::env::var_os(SERVE).is_some() {
        let code = match serve() {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("reservation-disk server: {e}");
                1
            }
        };
        std::process::exit(code);
    }
}

/// A mount being served.
struct Mounted {
    mountpoint: PathBuf,
    shared: Arc<Shared>,
    session: Option<BackgroundSession>,
}

impl Mounted {
    fn start(mountpoint: &Path, tree: Tree) -> io::Result<Mounted> {
        let shared = Arc::new(Shared::default());
        shared.lock().tree = tree;
        let mut config = Config::default();
        config.mount_options = vec![MountOption::FSName("reservation-disk".to_owned()), MountOption::RW];
        // Servers that drop their privileges (PostgreSQL runs as its own user) use it too.
        config.acl = SessionACL::All;
        let fs = Fs { shared: Arc::clone(&shared), born: SystemTime::now() };
        let session = fuser::spawn_mount(fs, mountpoint, &config)?;
        Ok(Mounted { mountpoint: mountpoint.to_path_buf(), shared, session: Some(session) })
    }

    /// Kills the mount: the disk dead, the held operation failed, the mount detached. Returns the
    /// state at the moment of death.
    fn kill(&mut self) -> State {
        let state = self.die();
        self.detach();
        state
    }

    /// The disk dead, still mounted: the held operation and every later one fail (`EIO`), a name
    /// looked up under the mountpoint included. Returns the state at the moment of death.
    fn die(&self) -> State {
        let mut state = self.shared.lock();
        state.dead = true;
        self.shared.changed.notify_all();
        State {
            tree: state.tree.clone(),
            dead: true,
            counts: state.counts,
            trap: state.trap.take(),
            held: state.held.take(),
        }
    }

    /// The mount detached.
    fn detach(&mut self) {
        if let Some(session) = self.session.take() {
            // Detached, not unmounted: a store still holding files open on it keeps failing with
            // `EIO` until it closes them, and the directory is free for the next mount.
            let _ = rustix::mount::unmount(&self.mountpoint, rustix::mount::UnmountFlags::DETACH);
            drop(session);
        }
    }

    fn held(&self, wait: Duration) -> Option<String> {
        let deadline = Instant::now() + wait;
        let mut state = self.shared.lock();
        loop {
            if state.held.is_some() {
                return state.held.clone();
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            state = self.shared.changed.wait_timeout(state, left).unwrap_or_else(PoisonError::into_inner).0;
        }
    }
}

/// Detaches the dead mount and mounts `tree`, what the cut kept, in its place: an error when the
/// mount is refused.
fn power_on(mounted: &mut Mounted, mountpoint: &Path, tree: Tree) -> io::Result<()> {
    mounted.detach();
    *mounted = Mounted::start(mountpoint, tree)?;
    Ok(())
}

/// Serves: the first frame names the mountpoint and the tree to mount; then one answer per
/// request, until the owner closes the server's input (or dies), which kills the mount.
fn serve() -> io::Result<()> {
    let (mut input, mut output) = (BufReader::new(io::stdin().lock()), BufWriter::new(io::stdout().lock()));
    let first = wire::receive(&mut input)?;
    let mut first = In(&first);
    let mountpoint = PathBuf::from(first.text()?);
    let tree = wire::get_tree(&mut first)?;
    let mut mounted = match Mounted::start(&mountpoint, tree) {
        Ok(m) => m,
        Err(e) => {
            wire::send(&mut output, Out::default().u8(0).text(&e.to_string()).0.as_slice())?;
            return Ok(());
        }
    };
    wire::send(&mut output, &[1])?;
    // What a cut kept, while the power is off: mounted when it comes back.
    let mut kept: Option<Tree> = None;
    loop {
        let Ok(request) = wire::receive(&mut input) else {
            mounted.kill();
            return Ok(());
        };
        let mut request = In(&request);
        let mut answer = Out::default();
        match request.u8()? {
            TRAP => {
                let trap = wire::get_trap(&mut request)?;
                let mut state = mounted.shared.lock();
                state.trap = Some((trap, 0));
                state.held = None;
            }
            UNTRAP => {
                let mut state = mounted.shared.lock();
                state.trap = None;
                state.held = None;
            }
            HELD => {
                let held = mounted.held(Duration::from_millis(request.u64()?));
                answer.u8(u8::from(held.is_some())).text(held.as_deref().unwrap_or(""));
            }
            TREE => wire::put_tree(&mut answer, &mounted.shared.lock().tree),
            COUNTS => wire::put_counts(&mut answer, &mounted.shared.lock().counts),
            op @ (CUT | POWER_OFF) if kept.is_none() => {
                let off = op == POWER_OFF;
                let model = wire::get_model(&mut request)?;
                let seed = request.u64()?;
                let state = mounted.die();
                let (tree, taken_back) = state.tree.cut(model, seed);
                let report = CutReport { model, seed, held: state.held, taken_back, counts: state.counts };
                if off {
                    kept = Some(tree);
                    answer.u8(1);
                    wire::put_report(&mut answer, &report);
                } else {
                    match power_on(&mut mounted, &mountpoint, tree) {
                        Ok(()) => {
                            answer.u8(1);
                            wire::put_report(&mut answer, &report);
                        }
                        Err(e) => {
                            answer.u8(0).text(&e.to_string());
                            wire::send(&mut output, &answer.0)?;
                            return Ok(());
                        }
                    }
                }
            }
            CUT | POWER_OFF => {
                answer.u8(0).text("the power is off already: no cut before it comes back");
            }
            POWER_ON => match kept.take().map(|tree| power_on(&mut mounted, &mountpoint, tree)) {
                None => {
                    answer.u8(0).text("the power is on: no cut to come back from");
                }
                Some(Ok(())) => {
                    answer.u8(1);
                }
                Some(Err(e)) => {
                    answer.u8(0).text(&e.to_string());
                    wire::send(&mut output, &answer.0)?;
                    return Ok(());
                }
            },
            other => return Err(io::Error::new(io::ErrorKind::InvalidData, format!("request {other}"))),
        }
        wire::send(&mut output, &answer.0)?;
    }
}
