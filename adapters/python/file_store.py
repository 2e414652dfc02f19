#!/usr/bin/env python3
"""The Python store of store.py, kept in files: a log of every change, compacted into a snapshot
every 64 records, and the promise to survive a power cut (PROTOCOL.md, "Power cuts").

    reservation conform --command "python3 adapters/python/file_store.py"

Its `hello` declares `"power_cuts": "names"`: every change it acknowledged survives a power cut
that takes back every write and every name that was never synced. The driver then runs the
power-cut check: it sends `open` with a `dir` on a disk that can lose power, cuts the power at
points it draws (inside the store's own writes and syncs among them), kills this process, starts
it again and opens the store in the same `dir`, which must hold every acknowledged change.

The files, in the store's directory:
  log            one record per change, appended and synced before the change is answered: the
                 key, the row after the change, and the instant the store decided at. Each
                 record is framed by its length and a CRC-32, so that a record torn by a cut is
                 recognised and cut off (the log is truncated to its whole records at recovery).
  snapshot       every row and the store's clock, written to snapshot.tmp, synced, renamed into
                 place, the directory synced, and only then the log emptied and synced.

Recovery reads the snapshot, then replays the log over it (a record states the row after it, so
a record already in the snapshot replays to the same row). A store opened without a `dir` (the
suite's other checks) keeps its files in a temporary directory of its own, removed at `close`.

RESERVATION_FILE_BUG plants one durability bug, to show the power-cut check catching it:
  never-synced               the log is written and never synced
  ack-before-sync            a change is answered once its record is written; the record is
                             synced when the next change comes
  dir-never-synced           no directory is ever synced: not when the log is created, not after
                             the snapshot's rename
  snapshot-never-synced      the snapshot is renamed into place without being synced
  truncate-before-snapshot   the log is emptied (and synced) before the snapshot is written
  torn-tail-read             recovery reads records to the end of the log, each to the length
                             its header says, neither that length nor the CRC checked: a record
                             torn by a cut is read as a record, and the store cannot open its own
                             log (run it with --promise torn: only a torn write shows it)

--promise MODEL declares another promise (`process`, `data`, `names`, `torn`, `reorder`);
RESERVATION_FILE_PERIOD sets how many records the log holds before a compaction (64).
"""

import os
import pickle
import shutil
import struct
import sys
import tempfile
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import store as base  # noqa: E402  (the rules and the protocol loop of store.py)

BUG = os.environ.get("RESERVATION_FILE_BUG", "")
PERIOD = int(os.environ.get("RESERVATION_FILE_PERIOD", "64"))  # records between compactions
LOG, SNAPSHOT, TEMP = "log", "snapshot", "snapshot.tmp"
HEADER = struct.Struct("<II")  # a record's length and its CRC-32


def framed(value):
    body = pickle.dumps(value, protocol=4)
    return HEADER.pack(len(body), zlib.crc32(body)) + body


def unframed(data):
    """The values of the whole records at the start of `data`, and the length they take: reading
    stops at the first record that is torn or corrupt."""
    values, at = [], 0
    # torn-tail-read reads on to the end of the data, a header cut short included.
    while at + HEADER.size <= len(data) or (BUG == "torn-tail-read" and at < len(data)):
        n, crc = HEADER.unpack_from(data, at)
        body = data[at + HEADER.size:at + HEADER.size + n]
        if BUG != "torn-tail-read" and (len(body) < n or zlib.crc32(body) != crc):
            break
        values.append(pickle.loads(body))
        at += HEADER.size + n
    return values, at


def read(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None


def sync(fd):
    os.fsync(fd)


def sync_dir(path):
    if BUG == "dir-never-synced":
        return
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class FileStore(base.Store):
    """A store of store.py whose every change is in its log before it is answered."""

    def __init__(self, directory, owned):
        super().__init__()
        self.directory, self.owned = directory, owned
        self.log = None
        self.records = 0
        self.unsynced = False  # ack-before-sync: the last record waits for the next change's sync
        try:
            self.recover()
        except OSError as e:
            raise base.Indeterminate("recovery: %s" % e)

    @classmethod
    def opened(cls, directory=None):
        if directory is None:
            return cls(tempfile.mkdtemp(prefix="reservation-file-store-"), True)
        return cls(directory, False)

    def path(self, name):
        return os.path.join(self.directory, name)

    def recover(self):
        """The rows and the clock from the snapshot and the log; the log cut to its whole records."""
        rows, clock = {}, 0
        snapshot = read(self.path(SNAPSHOT))
        if snapshot is not None:
            values, _ = unframed(snapshot)
            if values:
                rows, clock = values[0]
        log = read(self.path(LOG))
        records, whole = unframed(log or b"")
        for where, row, at in records:
            if row is None:
                rows.pop(where, None)
            else:
                rows[where] = row
            clock = max(clock, at)
        self.rows, self.clock, self.records = rows, clock, len(records)
        self.log = os.open(self.path(LOG), os.O_WRONLY | os.O_CREAT, 0o644)
        if log is None:
            sync(self.log)
            sync_dir(self.directory)
        elif whole < len(log):
            os.ftruncate(self.log, whole)
            sync(self.log)
        os.lseek(self.log, whole, os.SEEK_SET)

    def write(self, where, row):
        """Called by store.py under the store's lock, with the row decided."""
        before = self.rows.get(where)
        super().write(where, row)
        if row is before:
            return  # nothing changed: nothing to log
        try:
            if self.unsynced:
                sync(self.log)
            os.write(self.log, framed((where, row, self.clock)))
            if BUG == "ack-before-sync":
                self.unsynced = True
            elif BUG != "never-synced":
                sync(self.log)
            self.records += 1
            if self.records >= PERIOD:
                self.compact()
        except OSError as e:
            raise base.Indeterminate("the log: %s" % e)

    def empty_log(self):
        os.ftruncate(self.log, 0)
        os.lseek(self.log, 0, os.SEEK_SET)
        sync(self.log)
        self.unsynced = False

    def compact(self):
        """Every row into the snapshot, then the log emptied."""
        if BUG == "truncate-before-snapshot":
            self.empty_log()
        fd = os.open(self.path(TEMP), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, framed((self.rows, self.clock)))
            if BUG != "snapshot-never-synced":
                sync(fd)
        finally:
            os.close(fd)
        os.rename(self.path(TEMP), self.path(SNAPSHOT))
        sync_dir(self.directory)
        if BUG != "truncate-before-snapshot":
            self.empty_log()
        self.records = 0

    def close(self):
        if self.log is not None:
            os.close(self.log)
            self.log = None
        if self.owned:
            shutil.rmtree(self.directory, ignore_errors=True)

    def reopened(self, now):
        """A restart: the files closed, then read back (recovery)."""
        with self.lock:
            os.close(self.log)
            self.log = None
            return FileStore(self.directory, self.owned)


if __name__ == "__main__":
    args = sys.argv[1:]
    promise = args[args.index("--promise") + 1] if "--promise" in args[:-1] else "names"
    base.Store = FileStore
    base.DURABLE = True
    base.POWER_CUTS = promise
    base.main()
