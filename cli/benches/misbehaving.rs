//! Prints what adapters that misbehave on purpose cost the driver, `reservation conform --command`
//! (how long the run takes, the report's size, the driver's peak resident memory), and what
//! `reservation serve` holds after 200,000 stores opened and closed:
//! `cargo bench -p reservation-cli --bench misbehaving`.
//!
//! `RESERVATION_BIN=PATH` measures another build of `reservation` (an older one, say). Each
//! driver run is stopped after `LIMIT` or once its peak passes `CEILING`, saying so.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The longest a driver run may take here.
const LIMIT: Duration = Duration::from_secs(180);
/// The most resident memory a driver run may reach here, in KiB (4 GiB).
const CEILING: u64 = 4 << 20;

/// The answer to `hello` (id 0) and to the first `open` (id 1), of an adapter written in sh.
const HELLO_OPEN: &str = r#"read l; echo '{"id":0,"ok":{"protocol":3,"durable":false,"power_cuts":null}}'; read l; echo '{"id":1,"ok":null}'"#;

/// An adapter in Python that answers hello, open and close, and every other request with a
/// storage error whose message is 1,000,000 bytes: a line of about 1 MB, under the line bound.
const LONG_ANSWERS: &str = r#"import json, sys
message = "m" * 1_000_000
for line in sys.stdin:
    r = json.loads(line)
    if r["op"] == "hello":
        a = {"id": r["id"], "ok": {"protocol": 3, "durable": False, "power_cuts": None}}
    elif r["op"] in ("open", "close"):
        a = {"id": r["id"], "ok": None}
    else:
        a = {"id": r["id"], "error": {"kind": "StorageError", "indeterminate": False, "message": message}}
    sys.stdout.write(json.dumps(a) + "\n")
    sys.stdout.flush()
"#;

/// A field of `/proc/PID/status`, in KiB.
fn status_kib(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

/// Runs `reservation conform --command adapter` and prints how it went.
fn driver_run(bin: &Path, dir: &Path, name: &str, adapter: &str) {
    let out = dir.join(format!("{name}.out"));
    let mut child = Command::new(bin)
        .args(["conform", "--command", adapter])
        .current_dir(dir)
        .stdout(std::fs::File::create(&out).expect("a file"))
        .stderr(Stdio::null())
        .spawn()
        .expect("reservation conform started");
    let started = Instant::now();
    let mut peak = 0;
    let mut stopped = None;
    while child.try_wait().expect("waited").is_none() {
        peak = peak.max(status_kib(child.id(), "VmHWM:").unwrap_or(0));
        if started.elapsed() > LIMIT {
            stopped = Some(format!("STOPPED: still running after {:.0?}", started.elapsed()));
        } else if peak > CEILING {
            stopped = Some(format!("STOPPED: its peak passed {}", mib(CEILING)));
        }
        if stopped.is_some() {
            let _ = child.kill();
            let _ = child.wait();
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let took = started.elapsed();
    let report = std::fs::metadata(&out).map_or(0, |m| m.len());
    let verdict = stopped.unwrap_or_else(|| format!("ended in {took:.1?}"));
    println!("  {name}: {verdict}; report {report} bytes; driver's peak resident memory (VmHWM) {}", mib(peak));
}

/// Feeds `reservation serve` `stores` opens, each followed by its close when `close`, and prints
/// its resident memory once every answer is in.
fn serve_run(bin: &Path, stores: u64, close: bool) {
    let mut child = Command::new(bin)
        .arg("serve")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("reservation serve started");
    let mut stdin = child.stdin.take().expect("its input");
    let writer = std::thread::spawn(move || {
        let mut input = std::io::BufWriter::new(&mut stdin);
        let mut id = 0;
        for store in 0..stores {
            writeln!(input, r#"{{"id":{id},"op":"open","store":{store},"now":0}}"#).expect("written");
            id += 1;
            if close {
                writeln!(input, r#"{{"id":{id},"op":"close","store":{store}}}"#).expect("written");
                id += 1;
            }
        }
        input.flush().expect("written");
        drop(input);
        stdin
    });
    let started = Instant::now();
    let expected = if close { 2 * stores } else { stores };
    let mut answers = BufReader::new(child.stdout.take().expect("its output"));
    let (mut line, mut n) = (String::new(), 0);
    while n < expected {
        line.clear();
        if answers.read_line(&mut line).expect("read") == 0 {
            break;
        }
        n += 1;
    }
    let took = started.elapsed();
    let (rss, peak) = (status_kib(child.id(), "VmRSS:").unwrap_or(0), status_kib(child.id(), "VmHWM:").unwrap_or(0));
    drop(writer.join().expect("the writer"));
    let _ = child.wait();
    let what = if close { "open+close pairs" } else { "opens, never closed" };
    println!("  {stores} {what}: {n} answers in {took:.2?}; resident memory then {} (peak {})", mib(rss), mib(peak));
}

fn main() {
    let bin = std::env::var_os("RESERVATION_BIN")
        .map_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_reservation")), PathBuf::from);
    let dir = std::env::temp_dir().join(format!("reservation-misbehaving-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a directory");
    let long_answers = dir.join("long_answers.py");
    std::fs::write(&long_answers, LONG_ANSWERS).expect("written");
    let serve = format!("'{}' serve", bin.display());
    let scenarios = [
        (
            "streams 1.5 GB without a newline",
            format!("{HELLO_OPEN}; read l; head -c 1500000000 /dev/zero | tr '\\0' x; cat > /dev/null"),
        ),
        ("answers every operation with a 1 MB line", format!("python3 '{}'", long_answers.display())),
        (
            "writes a 200 KB line that is not JSON",
            format!("{HELLO_OPEN}; read l; head -c 200000 /dev/zero | tr '\\0' x; echo; cat > /dev/null"),
        ),
        ("stops reading after hello and open", format!("{HELLO_OPEN}; exec sleep 600")),
        (
            "exits right after hello",
            r#"read l; echo '{"id":0,"ok":{"protocol":3,"durable":false,"power_cuts":null}}'; exit 0"#.to_owned(),
        ),
        (
            "writes a line that is not JSON after hello and open",
            format!("{HELLO_OPEN}; echo garbage; exec cat > /dev/null"),
        ),
        (
            "answers an id no request has after hello and open",
            format!(r#"{HELLO_OPEN}; echo '{{"id":999,"ok":null}}'; exec cat > /dev/null"#),
        ),
        (
            "writes a line that is not UTF-8 after hello and open",
            format!(
                r"{HELLO_OPEN}; printf 'ÿþ
'; exec cat > /dev/null"
            ),
        ),
        ("reads on, answers nothing after hello and open", format!("{HELLO_OPEN}; exec cat > /dev/null")),
        ("serve, silent after 3,000 answers", format!("{serve} | {{ sed -u 3000q; cat > /dev/null; }}")),
    ];
    println!("{} against adapters that misbehave:", bin.display());
    for (name, adapter) in &scenarios {
        driver_run(&bin, &dir, name, adapter);
    }
    println!("reservation serve:");
    serve_run(&bin, 200_000, true);
    serve_run(&bin, 200_000, false);
    let _ = std::fs::remove_dir_all(&dir);
}
