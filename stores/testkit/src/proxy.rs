//! [`CuttingProxy`]: a TCP proxy that cuts a store's connection at a chosen moment, or holds it
//! open and silent, so that a networked store's tests can show which errors are determinate and
//! which are not, and that no wait of the store is unbounded.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

/// What an armed proxy does at the chunk that contains its pattern.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Then {
    /// Shuts both connections down.
    Cut,
    /// Pauses the proxy: see [`CuttingProxy::pause`].
    Pause,
}

/// The pattern that triggers, whether its chunk is forwarded first, and what it triggers.
type Trigger = Arc<Mutex<Option<(Vec<u8>, bool, Then)>>>;

/// Whether the proxy is paused; every relay waits here, between reading bytes and passing them
/// on, while it is.
#[derive(Default)]
struct Gate {
    paused: Mutex<bool>,
    resumed: Condvar,
}

impl Gate {
    fn state(&self) -> MutexGuard<'_, bool> {
        self.paused.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn set(&self, paused: bool) {
        *self.state() = paused;
        if !paused {
            self.resumed.notify_all();
        }
    }

    /// Returns once the proxy is not paused.
    fn pass(&self) {
        let mut paused = self.state();
        while *paused {
            paused = self.resumed.wait(paused).unwrap_or_else(PoisonError::into_inner);
        }
    }
}

/// A loopback TCP proxy to one server. It relays both ways until it is [armed](CuttingProxy::arm)
/// with a byte pattern; then, at the first chunk a client sends that contains the pattern, it
/// stops relaying answers, forwards that chunk to the server or not, and shuts both connections
/// down. The store sees its connection drop mid-request: before the server got the request
/// (`forward` false) or after (`forward` true).
///
/// [Paused](CuttingProxy::pause) (at once, or at a pattern with [`CuttingProxy::pause_at`]), it
/// keeps every connection open and accepts new ones but relays nothing, neither bytes nor a
/// closed connection, until [resumed](CuttingProxy::resume): a path that went silent. Nothing is
/// lost: what was held back is relayed on resuming, late, as a slow network would deliver it.
///
/// Its threads live as long as the connections they relay (meant for tests).
///
/// ```
/// use std::io::{ErrorKind, Read, Write};
/// use std::net::{TcpListener, TcpStream};
/// use std::time::Duration;
/// use reservation_testkit::proxy::CuttingProxy;
///
/// // An echo server behind the proxy.
/// let server = TcpListener::bind("127.0.0.1:0")?;
/// let upstream = server.local_addr()?;
/// std::thread::spawn(move || {
///     for mut conn in server.incoming().flatten() {
///         std::thread::spawn(move || {
///             let mut buf = [0u8; 64];
///             while let Ok(n @ 1..) = conn.read(&mut buf) {
///                 if conn.write_all(&buf[..n]).is_err() {
///                     return;
///                 }
///             }
///         });
///     }
/// });
/// let proxy = CuttingProxy::start(upstream)?;
/// let mut client = TcpStream::connect(("127.0.0.1", proxy.port()))?;
/// let mut buf = [0u8; 4];
/// client.write_all(b"ping")?;
/// client.read_exact(&mut buf)?;
/// assert_eq!(&buf, b"ping");
///
/// // Paused at "hold": that chunk reaches the server, its echo does not reach the client, and the
/// // connection stays open.
/// proxy.pause_at(b"hold", true);
/// client.write_all(b"hold")?;
/// client.set_read_timeout(Some(Duration::from_millis(300)))?;
/// let silent = client.read(&mut buf).expect_err("a paused proxy relayed an answer");
/// assert!(matches!(silent.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut), "{silent}");
/// assert!(proxy.is_paused());
///
/// // A new connection is accepted, and is silent too.
/// let mut late = TcpStream::connect(("127.0.0.1", proxy.port()))?;
/// late.write_all(b"late")?;
/// late.set_read_timeout(Some(Duration::from_millis(300)))?;
/// assert!(late.read(&mut buf).is_err(), "a paused proxy relayed a new connection");
///
/// // Resumed: what was held back arrives, and the connections work again.
/// proxy.resume();
/// client.set_read_timeout(None)?;
/// client.read_exact(&mut buf)?;
/// assert_eq!(&buf, b"hold");
/// late.set_read_timeout(None)?;
/// late.read_exact(&mut buf)?;
/// assert_eq!(&buf, b"late");
/// client.write_all(b"pong")?;
/// client.read_exact(&mut buf)?;
/// assert_eq!(&buf, b"pong");
///
/// // Paused at once: the client's bytes wait in the proxy, unanswered, until it resumes.
/// proxy.pause();
/// client.write_all(b"gone")?;
/// client.set_read_timeout(Some(Duration::from_millis(300)))?;
/// assert!(client.read(&mut buf).is_err(), "a paused proxy relayed an answer");
/// proxy.resume();
/// client.set_read_timeout(None)?;
/// client.read_exact(&mut buf)?;
/// assert_eq!(&buf, b"gone");
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct CuttingProxy {
    port: u16,
    armed: Trigger,
    cut: Arc<AtomicBool>,
    gate: Arc<Gate>,
}

fn clone(stream: &TcpStream) -> io::Result<TcpStream> {
    stream.try_clone()
}

impl CuttingProxy {
    /// A proxy on a free loopback port to `upstream`.
    pub fn start(upstream: impl ToSocketAddrs) -> io::Result<CuttingProxy> {
        let upstream: SocketAddr = upstream
            .to_socket_addrs()?
            .next()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "the upstream address resolves to nothing"))?;
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let port = listener.local_addr()?.port();
        let armed: Trigger = Arc::default();
        let cut = Arc::new(AtomicBool::new(false));
        let gate = Arc::new(Gate::default());
        let (a, c, g) = (armed.clone(), cut.clone(), gate.clone());
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let Ok(server) = TcpStream::connect(upstream) else { continue };
                let _ = relay(client, server, a.clone(), c.clone(), g.clone());
            }
        });
        Ok(CuttingProxy { port, armed, cut, gate })
    }

    /// The proxy's port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Cuts the next connection that sends `pattern`, forwarding its chunk first or not.
    pub fn arm(&self, pattern: &[u8], forward: bool) {
        self.cut.store(false, Ordering::SeqCst);
        *self.armed.lock().unwrap_or_else(PoisonError::into_inner) = Some((pattern.to_vec(), forward, Then::Cut));
    }

    /// Whether a connection was cut since the last [`CuttingProxy::arm`].
    pub fn was_cut(&self) -> bool {
        self.cut.load(Ordering::SeqCst)
    }

    /// Pauses the proxy now: every connection, open or opened later, stays open and silent both
    /// ways (no bytes, no closing) until [`CuttingProxy::resume`].
    pub fn pause(&self) {
        self.gate.set(true);
    }

    /// Pauses the proxy (as [`CuttingProxy::pause`]) at the next chunk a client sends that
    /// contains `pattern`: that chunk is forwarded to the server first (`forward`), so that the
    /// server acts on it and its answer is held back, or held back itself until the proxy resumes.
    pub fn pause_at(&self, pattern: &[u8], forward: bool) {
        *self.armed.lock().unwrap_or_else(PoisonError::into_inner) = Some((pattern.to_vec(), forward, Then::Pause));
    }

    /// Relays again, everything held back first.
    pub fn resume(&self) {
        self.gate.set(false);
    }

    /// Whether the proxy is paused.
    pub fn is_paused(&self) -> bool {
        *self.gate.state()
    }
}

/// Relays `client` ⇄ `server` on two threads until a trigger cuts both or either side closes
/// (then the other is told, by a shutdown of its writing half). Each thread waits at `gate`
/// before it passes on what it read, a closed connection included.
fn relay(
    client: TcpStream,
    server: TcpStream,
    armed: Trigger,
    cut: Arc<AtomicBool>,
    gate: Arc<Gate>,
) -> io::Result<()> {
    let (mut c_read, mut s_write, c_close, s_close) =
        (clone(&client)?, clone(&server)?, clone(&client)?, clone(&server)?);
    let (mut s_read, mut c_write) = (server, client);
    let muted = Arc::new(AtomicBool::new(false));
    let mute = muted.clone();
    let answers = gate.clone();
    std::thread::spawn(move || {
        let mut buf = [0u8; 65536];
        while let Ok(n @ 1..) = c_read.read(&mut buf) {
            let chunk = &buf[..n];
            let trigger = armed.lock().unwrap_or_else(PoisonError::into_inner).clone();
            if let Some((pattern, forward, then)) = trigger
                && !pattern.is_empty()
                && chunk.windows(pattern.len()).any(|w| w == pattern)
            {
                *armed.lock().unwrap_or_else(PoisonError::into_inner) = None;
                if then == Then::Pause {
                    gate.set(true);
                    if !forward {
                        gate.pass();
                    }
                    if s_write.write_all(chunk).is_err() {
                        return;
                    }
                    continue;
                }
                // No answer reaches the client from now on.
                mute.store(true, Ordering::SeqCst);
                if forward {
                    let _ = s_write.write_all(chunk);
                    // Let the server read the bytes before its connection closes.
                    std::thread::sleep(Duration::from_millis(100));
                }
                cut.store(true, Ordering::SeqCst);
                let _ = c_close.shutdown(Shutdown::Both);
                let _ = s_close.shutdown(Shutdown::Both);
                return;
            }
            gate.pass();
            if s_write.write_all(chunk).is_err() {
                return;
            }
        }
        gate.pass();
        let _ = s_write.shutdown(Shutdown::Write);
    });
    std::thread::spawn(move || {
        let mut buf = [0u8; 65536];
        while let Ok(n @ 1..) = s_read.read(&mut buf) {
            answers.pass();
            if muted.load(Ordering::SeqCst) || c_write.write_all(&buf[..n]).is_err() {
                return;
            }
        }
        answers.pass();
        let _ = c_write.shutdown(Shutdown::Write);
    });
    Ok(())
}
