//! What the disk's owner and its server process say to each other: frames of bytes (a length,
//! then the bytes) over the server's standard input and output, and the encoding of the values
//! they carry.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::{self, Read, Write};
use std::os::unix::ffi::OsStringExt;

use crate::fs::{Counts, Trap, TrapOn};
use crate::mount::CutReport;
use crate::tree::{Change, Ino, Kind, Node, Persistence, TakenBack, Tree};

/// The largest frame either side accepts: a tree of a store's files, with room.
pub(crate) const MAX_FRAME: u64 = 1 << 32;

/// Writes one frame.
pub(crate) fn send(to: &mut impl Write, frame: &[u8]) -> io::Result<()> {
    to.write_all(&(frame.len() as u64).to_le_bytes())?;
    to.write_all(frame)?;
    to.flush()
}

/// Reads one frame.
pub(crate) fn receive(from: &mut impl Read) -> io::Result<Vec<u8>> {
    let mut len = [0; 8];
    from.read_exact(&mut len)?;
    let len = u64::from_le_bytes(len);
    if len > MAX_FRAME {
        return Err(io::Error::new(io::ErrorKind::InvalidData, format!("a frame of {len} bytes")));
    }
    let mut frame = Vec::new();
    from.take(len).read_to_end(&mut frame)?;
    if frame.len() as u64 != len {
        return Err(io::ErrorKind::UnexpectedEof.into());
    }
    Ok(frame)
}

/// Builds a frame.
#[derive(Default)]
pub(crate) struct Out(pub(crate) Vec<u8>);

impl Out {
    pub(crate) fn u64(&mut self, n: u64) -> &mut Self {
        self.0.extend_from_slice(&n.to_le_bytes());
        self
    }

    pub(crate) fn u8(&mut self, n: u8) -> &mut Self {
        self.0.push(n);
        self
    }

    pub(crate) fn bytes(&mut self, b: &[u8]) -> &mut Self {
        self.u64(b.len() as u64);
        self.0.extend_from_slice(b);
        self
    }

    pub(crate) fn text(&mut self, s: &str) -> &mut Self {
        self.bytes(s.as_bytes())
    }
}

/// Reads a frame.
pub(crate) struct In<'a>(pub(crate) &'a [u8]);

fn bad(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("the disk's server sent a malformed {what}"))
}

impl In<'_> {
    pub(crate) fn u64(&mut self) -> io::Result<u64> {
        let (head, rest) = self.0.split_first_chunk::<8>().ok_or_else(|| bad("number"))?;
        self.0 = rest;
        Ok(u64::from_le_bytes(*head))
    }

    pub(crate) fn u8(&mut self) -> io::Result<u8> {
        let (head, rest) = self.0.split_first().ok_or_else(|| bad("byte"))?;
        self.0 = rest;
        Ok(*head)
    }

    pub(crate) fn bytes(&mut self) -> io::Result<Vec<u8>> {
        let len = usize::try_from(self.u64()?).map_err(|_| bad("length"))?;
        if len > self.0.len() {
            return Err(bad("length"));
        }
        let (head, rest) = self.0.split_at(len);
        self.0 = rest;
        Ok(head.to_vec())
    }

    pub(crate) fn text(&mut self) -> io::Result<String> {
        String::from_utf8(self.bytes()?).map_err(|_| bad("text"))
    }

    /// How many items follow, each at least `min` bytes long: a count the frame cannot hold is
    /// refused before anything is allocated for it.
    fn count(&mut self, min: usize) -> io::Result<usize> {
        let n = usize::try_from(self.u64()?).map_err(|_| bad("count"))?;
        if n.saturating_mul(min) > self.0.len() {
            return Err(bad("count"));
        }
        Ok(n)
    }
}

fn put_entries(out: &mut Out, entries: &BTreeMap<OsString, Ino>) {
    out.u64(entries.len() as u64);
    for (name, ino) in entries {
        out.bytes(name.as_encoded_bytes()).u64(*ino);
    }
}

fn get_entries(input: &mut In<'_>) -> io::Result<BTreeMap<OsString, Ino>> {
    let n = input.count(16)?;
    (0..n).map(|_| Ok((OsString::from_vec(input.bytes()?), input.u64()?))).collect()
}

pub(crate) fn put_tree(out: &mut Out, tree: &Tree) {
    out.u64(tree.next);
    out.u64(tree.nodes.len() as u64);
    for (ino, node) in &tree.nodes {
        out.u64(*ino).u8(u8::from(node.kind == Kind::Dir)).u64(node.mode.into());
        out.u64(node.owner.0.into()).u64(node.owner.1.into());
        out.bytes(&node.data).bytes(&node.synced);
        out.u64(node.unsynced.len() as u64);
        for change in &node.unsynced {
            match change {
                Change::Write { offset, bytes } => out.u8(0).u64(*offset).bytes(bytes),
                Change::SetLen(len) => out.u8(1).u64(*len),
            };
        }
        put_entries(out, &node.entries);
        put_entries(out, &node.synced_entries);
    }
}

fn u32_of(n: u64) -> io::Result<u32> {
    u32::try_from(n).map_err(|_| bad("number"))
}

pub(crate) fn get_tree(input: &mut In<'_>) -> io::Result<Tree> {
    let next = input.u64()?;
    let n = input.count(64)?;
    let mut nodes = BTreeMap::new();
    for _ in 0..n {
        let ino = input.u64()?;
        let kind = if input.u8()? == 1 { Kind::Dir } else { Kind::File };
        let mode = u32_of(input.u64()?)?;
        let owner = (u32_of(input.u64()?)?, u32_of(input.u64()?)?);
        let (data, synced) = (input.bytes()?, input.bytes()?);
        let changes = input.count(9)?;
        let unsynced = (0..changes)
            .map(|_| match input.u8()? {
                0 => Ok(Change::Write { offset: input.u64()?, bytes: input.bytes()? }),
                _ => Ok(Change::SetLen(input.u64()?)),
            })
            .collect::<io::Result<_>>()?;
        let (entries, synced_entries) = (get_entries(input)?, get_entries(input)?);
        nodes.insert(ino, Node { kind, mode, owner, data, synced, unsynced, entries, synced_entries });
    }
    Ok(Tree { nodes, next })
}

pub(crate) fn put_counts(out: &mut Out, c: &Counts) {
    out.u64(c.writes).u64(c.file_syncs).u64(c.dir_syncs).u64(c.names);
}

pub(crate) fn get_counts(input: &mut In<'_>) -> io::Result<Counts> {
    Ok(Counts { writes: input.u64()?, file_syncs: input.u64()?, dir_syncs: input.u64()?, names: input.u64()? })
}

pub(crate) fn put_trap(out: &mut Out, trap: &Trap) {
    let on = match trap.on {
        TrapOn::Write => 0,
        TrapOn::Sync => 1,
        TrapOn::Any => 2,
        TrapOn::Names => 3,
        TrapOn::Tear => 4,
    };
    out.u8(on).u8(u8::from(trap.path.is_some())).text(trap.path.as_deref().unwrap_or("")).u64(trap.nth);
}

pub(crate) fn get_trap(input: &mut In<'_>) -> io::Result<Trap> {
    let on = match input.u8()? {
        0 => TrapOn::Write,
        1 => TrapOn::Sync,
        2 => TrapOn::Any,
        3 => TrapOn::Names,
        4 => TrapOn::Tear,
        n => return Err(io::Error::new(io::ErrorKind::InvalidData, format!("no trap counts operations of kind {n}"))),
    };
    let has_path = input.u8()? == 1;
    let path = input.text()?;
    Ok(Trap { on, path: has_path.then_some(path), nth: input.u64()? })
}

pub(crate) fn put_model(out: &mut Out, model: Persistence) {
    let index = Persistence::ALL.iter().position(|m| *m == model).unwrap_or(0);
    out.u8(index as u8);
}

pub(crate) fn get_model(input: &mut In<'_>) -> io::Result<Persistence> {
    Persistence::ALL.get(usize::from(input.u8()?)).copied().ok_or_else(|| bad("model"))
}

/// What a name's undoing is called, by number on the wire.
const UNDONE: [&str; 3] = ["made", "removed", "pointed at another file (a rename or a link over it)"];

pub(crate) fn put_report(out: &mut Out, report: &CutReport) {
    put_model(out, report.model);
    out.u64(report.seed).u8(u8::from(report.held.is_some())).text(report.held.as_deref().unwrap_or(""));
    put_counts(out, &report.counts);
    out.u64(report.taken_back.len() as u64);
    for effect in &report.taken_back {
        match effect {
            TakenBack::Bytes { path, range, kept } => out.u8(0).text(path).u64(range.0).u64(range.1).u64(*kept),
            TakenBack::Size { path, len } => out.u8(1).text(path).u64(*len),
            TakenBack::Name { dir, name, undone } => {
                let index = UNDONE.iter().position(|u| u == undone).unwrap_or(0);
                out.u8(2).text(dir).text(name).u8(index as u8)
            }
        };
    }
}

pub(crate) fn get_report(input: &mut In<'_>) -> io::Result<CutReport> {
    let model = get_model(input)?;
    let seed = input.u64()?;
    let has_held = input.u8()? == 1;
    let held = input.text()?;
    let counts = get_counts(input)?;
    let n = input.count(9)?;
    let taken_back = (0..n)
        .map(|_| match input.u8()? {
            0 => Ok(TakenBack::Bytes { path: input.text()?, range: (input.u64()?, input.u64()?), kept: input.u64()? }),
            1 => Ok(TakenBack::Size { path: input.text()?, len: input.u64()? }),
            _ => {
                let (dir, name) = (input.text()?, input.text()?);
                let undone = UNDONE.get(usize::from(input.u8()?)).copied().ok_or_else(|| bad("name's undoing"))?;
                Ok(TakenBack::Name { dir, name, undone })
            }
        })
        .collect::<io::Result<_>>()?;
    Ok(CutReport { model, seed, held: has_held.then_some(held), taken_back, counts })
}
