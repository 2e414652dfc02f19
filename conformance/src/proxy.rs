//! [`CuttingProxy`]: a TCP proxy that cuts a store's connection at a chosen moment, so that a
//! networked store's tests can show which errors are determinate and which are not.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// The pattern that cuts the connection, and whether its chunk is forwarded first.
type Trigger = Arc<Mutex<Option<(Vec<u8>, bool)>>>;

/// A loopback TCP proxy to one server. It relays both ways until it is [armed](CuttingProxy::arm)
/// with a byte pattern; then, at the first chunk a client sends that contains the pattern, it
/// stops relaying answers, forwards that chunk to the server or not, and shuts both connections
/// down. The store sees its connection drop mid-request: before the server got the request
/// (`forward` false) or after (`forward` true).
///
/// Its threads live as long as the process (meant for tests).
pub struct CuttingProxy {
    port: u16,
    armed: Trigger,
    cut: Arc<AtomicBool>,
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
        let (a, c) = (armed.clone(), cut.clone());
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let Ok(server) = TcpStream::connect(upstream) else { continue };
                let _ = relay(client, server, a.clone(), c.clone());
            }
        });
        Ok(CuttingProxy { port, armed, cut })
    }

    /// The proxy's port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Cuts the next connection that sends `pattern`, forwarding its chunk first or not.
    pub fn arm(&self, pattern: &[u8], forward: bool) {
        self.cut.store(false, Ordering::SeqCst);
        *self.armed.lock().unwrap_or_else(PoisonError::into_inner) = Some((pattern.to_vec(), forward));
    }

    /// Whether a connection was cut since the last [`CuttingProxy::arm`].
    pub fn was_cut(&self) -> bool {
        self.cut.load(Ordering::SeqCst)
    }
}

/// Relays `client` ⇄ `server` on two threads until a trigger cuts both.
fn relay(client: TcpStream, server: TcpStream, armed: Trigger, cut: Arc<AtomicBool>) -> io::Result<()> {
    let (mut c_read, mut s_write, c_close, s_close) =
        (clone(&client)?, clone(&server)?, clone(&client)?, clone(&server)?);
    let (mut s_read, mut c_write) = (server, client);
    let muted = Arc::new(AtomicBool::new(false));
    let mute = muted.clone();
    std::thread::spawn(move || {
        let mut buf = [0u8; 65536];
        while let Ok(n @ 1..) = c_read.read(&mut buf) {
            let chunk = &buf[..n];
            let trigger = armed.lock().unwrap_or_else(PoisonError::into_inner).clone();
            if let Some((pattern, forward)) = trigger
                && !pattern.is_empty()
                && chunk.windows(pattern.len()).any(|w| w == pattern)
            {
                // No answer reaches the client from now on.
                mute.store(true, Ordering::SeqCst);
                if forward {
                    let _ = s_write.write_all(chunk);
                    // Let the server read the bytes before its connection closes.
                    std::thread::sleep(Duration::from_millis(100));
                }
                *armed.lock().unwrap_or_else(PoisonError::into_inner) = None;
                cut.store(true, Ordering::SeqCst);
                let _ = c_close.shutdown(Shutdown::Both);
                let _ = s_close.shutdown(Shutdown::Both);
                return;
            }
            if s_write.write_all(chunk).is_err() {
                return;
            }
        }
    });
    std::thread::spawn(move || {
        let mut buf = [0u8; 65536];
        while let Ok(n @ 1..) = s_read.read(&mut buf) {
            if muted.load(Ordering::SeqCst) || c_write.write_all(&buf[..n]).is_err() {
                return;
            }
        }
    });
    Ok(())
}
