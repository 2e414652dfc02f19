//! Stores that need a server (PostgreSQL, Redis): their tests skip, saying so, when the server
//! does not answer, and fail instead when [`REQUIRE_SERVICES`] is set to `1`, as CI sets it.
//! Harnesses that start servers of their own take their ports from [`loopback_port`], run the
//! commands they need within a bound ([`run_within`]), and cut a node off the network with
//! nftables ([`Partition`]).

use std::collections::BTreeSet;
use std::fmt::Display;
use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant as WallInstant};

use reservation_store::StorageError;

/// The environment variable that turns a missing server from a skip into a failure: `1`.
pub const REQUIRE_SERVICES: &str = "RESERVATION_REQUIRE_SERVICES";

/// Whether a missing server fails the tests: [`REQUIRE_SERVICES`] is `1`.
pub fn services_required() -> bool {
    std::env::var(REQUIRE_SERVICES).is_ok_and(|v| v.trim() == "1")
}

/// The harness `connected` built, or `None` when its server did not answer.
///
/// On `Err`, prints one line to standard error, once per `service` and process, that names the
/// service and the reason (written past the test harness's capture, so that `cargo test` shows
/// it), and returns `None`, so that the test returns without checking anything. When
/// [`services_required`], it panics with the same line instead.
pub fn service<H, E: Display>(service: &str, connected: Result<H, E>) -> Option<H> {
    let error = match connected {
        Ok(harness) => return Some(harness),
        Err(error) => error,
    };
    let line = format!("{service} unavailable: {error}");
    if services_required() {
        panic!("{line} ({REQUIRE_SERVICES}=1 requires it)");
    }
    static SAID: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());
    let first = SAID.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(service.to_owned());
    if first {
        // The test harness captures `eprintln!`, not the standard error handle itself.
        let _ = writeln!(
            std::io::stderr(),
            "skipped: {line}; its tests did not run (set {REQUIRE_SERVICES}=1 to fail instead)"
        );
    }
    None
}

/// A port on 127.0.0.1 that nothing listens on now and that this function has not handed out
/// before in this process, for a harness that starts a server of its own there.
///
/// A harness restarts a crashed server on the port it had, so the port must stay its own while
/// nothing listens there. It is drawn at random from [`loopback_port_range`]: below the kernel's
/// range of ephemeral ports, where no outgoing connection and no `bind` to port 0 (another test's
/// proxy or server) is ever given it; and it is handed out once per process, so no other harness
/// of the process draws it again. Another process could still bind it: a harness should check
/// that the server answering on its port is its own.
pub fn loopback_port() -> std::io::Result<u16> {
    use std::hash::{BuildHasher, RandomState};
    static HANDED_OUT: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());
    let range = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").ok();
    let range = loopback_port_range(range.as_deref());
    let random = RandomState::new();
    let mut last = None;
    for draw in 0..1_024u32 {
        let offset = random.hash_one(draw) % u64::from(range.end - range.start);
        let port = range.start + u16::try_from(offset).unwrap_or(0);
        let mut handed_out = HANDED_OUT.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if handed_out.contains(&port) {
            continue;
        }
        match std::net::TcpListener::bind(("127.0.0.1", port)) {
            Ok(_) => {
                handed_out.insert(port);
                return Ok(port);
            }
            Err(e) => last = Some(e),
        }
    }
    let tried = format!("no port of {range:?} was free and not handed out before, in 1024 draws");
    Err(last.unwrap_or_else(|| std::io::Error::new(std::io::ErrorKind::AddrInUse, tried)))
}

/// The ports [`loopback_port`] draws from, given the kernel's range of ephemeral ports as Linux
/// writes it in `/proc/sys/net/ipv4/ip_local_port_range` (two numbers, `32768 60999` by
/// default): from 10000 up to the range's first port; from 10000 to 32768 when the kernel does not
/// say, or when fewer than 1,000 ports would be left below its range.
pub fn loopback_port_range(ip_local_port_range: Option<&str>) -> std::ops::Range<u16> {
    const LOW: u16 = 10_000;
    let first = ip_local_port_range.and_then(|r| r.split_whitespace().next()?.parse::<u16>().ok());
    LOW..first.filter(|&first| first >= LOW + 1_000).unwrap_or(32_768)
}

/// Runs `command`, `input` on its standard input, and waits for it at most `limit`: an error
/// that names the command and quotes what it wrote to standard error when it fails (its first
/// [`SAID_AT_MOST`] bytes, as far as they came within the bound: a process it left running may
/// hold the pipe open), or says that it did not end (then it is killed). What harnesses run
/// themselves (`kill`, `nft`) runs so.
pub fn run_within(mut command: Command, input: Option<&str>, limit: Duration) -> Result<(), StorageError> {
    use std::io::{Read as _, Write as _};
    let shown = std::iter::once(command.get_program())
        .chain(command.get_args())
        .map(|a| a.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ");
    let deadline = WallInstant::now() + limit;
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| StorageError::with_source(format!("running {shown}"), e))?;
    // Read on a thread of its own from the start, so that neither a full pipe nor one held open
    // holds the wait.
    let (sender, said) = std::sync::mpsc::channel();
    if let Some(stderr) = child.stderr.take() {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = stderr.take(SAID_AT_MOST).read_to_end(&mut bytes);
            let _ = sender.send(String::from_utf8_lossy(&bytes).into_owned());
        });
    }
    if let (Some(input), Some(mut stdin)) = (input, child.stdin.take()) {
        stdin.write_all(input.as_bytes()).map_err(|e| StorageError::with_source(format!("writing to {shown}"), e))?;
    }
    drop(child.stdin.take());
    loop {
        match child.try_wait() {
            Ok(Some(status)) if status.success() => return Ok(()),
            Ok(Some(status)) => {
                let left = deadline.saturating_duration_since(WallInstant::now()).max(Duration::from_millis(100));
                let said = said.recv_timeout(left).unwrap_or_default();
                return Err(StorageError::new(format!("{shown}: {status}: {}", said.trim())));
            }
            Ok(None) if WallInstant::now() < deadline => std::thread::sleep(Duration::from_millis(2)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(StorageError::new(format!("{shown} did not end within {limit:?}")));
            }
        }
    }
}

/// The most of a command's standard error [`run_within`] keeps: 64 KiB.
pub const SAID_AT_MOST: u64 = 64 * 1024;

/// How long `nft` may take to load or delete a table.
const NFT_WITHIN: Duration = Duration::from_secs(2);

/// A partition made of nftables rules: a table of its own, `inet reservation_<process id>_<name>`,
/// whose input chain holds the rules it was started with (each one rule of nft's syntax, such as
/// `ip daddr 127.0.1.1 drop`). Every packet on loopback passes that chain, so a rule that drops
/// those to and from an address cuts off whatever listens or connects there. Removed by
/// [`Partition::heal`], or when dropped. Needs `nft` (Debian's `nftables`) and the right to use
/// it (root).
pub struct Partition {
    table: String,
    healed: bool,
}

impl Partition {
    /// Whether `nft` runs here, and may list the tables: whether a partition can be made.
    pub fn available() -> bool {
        nft(&["list", "tables"], None).is_ok()
    }

    /// Loads the table `name` names (unique within this process) with `rules` in its input chain.
    pub fn start(name: &str, rules: &[String]) -> Result<Partition, StorageError> {
        let table = format!("reservation_{}_{name}", std::process::id());
        let rules: String = rules.iter().map(|rule| format!("    {rule}\n")).collect();
        let text = format!(
            "table inet {table} {{\n  chain input {{\n    type filter hook input priority 0; policy accept;\n{rules}  }}\n}}\n"
        );
        nft(&["-f", "-"], Some(&text))?;
        Ok(Partition { table, healed: false })
    }

    /// Deletes the table: the network heals.
    pub fn heal(mut self) -> Result<(), StorageError> {
        self.healed = true;
        nft(&["delete", "table", "inet", &self.table], None)
    }
}

impl Drop for Partition {
    fn drop(&mut self) {
        if !self.healed {
            let _ = nft(&["delete", "table", "inet", &self.table], None);
        }
    }
}

/// Runs `nft` with `args` (and `input` on its standard input), within [`NFT_WITHIN`].
fn nft(args: &[&str], input: Option<&str>) -> Result<(), StorageError> {
    let mut command = Command::new("nft");
    command.args(args);
    run_within(command, input, NFT_WITHIN)
}
