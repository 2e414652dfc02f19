#!/usr/bin/env python3
"""The Python store of store.py, made durable by a write-ahead log, with its adapter: a store
that can crash, so that the suite's crash check reaches its recovery code.

    reservation conform --command 'echo $$ > /tmp/wal.pid; exec python3 adapters/python/wal_store.py' \
        --fault 'crash=kill -USR1 $(cat /tmp/wal.pid)'

Every change to a row appends a record to the store's log: the key, the instant the store
decided at, the request, and the row after it. A writer thread commits records in groups: asked
for a commit, it gathers records for a short window (5 ms, a disk's flush), then makes them durable at once. An
operation is answered once its record is durable, and holds the store's lock until then.

SIGUSR1 crashes every store of the process, as a crash of its storage server would: records not
yet durable are lost, an operation waiting for one fails with an indeterminate error, and each
store's rows and clock are rebuilt from its durable records (recovery). A `reopen` (the suite's
restart) crashes the store it reopens the same way, so it reaches recovery too. (The log lives in
this process's memory: what it stands for is a file that survives the process; a crash of the
whole process would need the file.)

RESERVATION_WAL_BUG plants one recovery bug, to show the crash check catching it:
  ack-before-write      an operation is answered once its record is queued, before it is durable
  drop-last-record      recovery drops the log's last record, even when it is whole
  skip-duplicate        recovery skips a second confirm of the same owner as a replayed
                        duplicate, then decides a later release again against the old version
  log-requested-version a confirm answered AlreadyConfirmed is logged with the request's lower
                        version instead of the version kept
  clock-not-restored    recovery does not restore the store's clock
  join-from-old-expiry  recovery recomputes a join's expiry from the old expiry, not the join's
                        instant
  unlock-before-durable a write lets the store's lock go before its record is durable
"""

import os
import signal
import sys
import threading
import time
import weakref

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import store as base  # noqa: E402  (the rules and the protocol loop of store.py)

# How long unlock-before-durable's write of a new row waits, its lock let go, before it writes
# its record (a log that must grow, slow as disks can be): the moment in which a lookup shows the
# bug and the crash must come (as conformance/tests/it/wal.rs's store).
UNLOCKED = 0.03

BUG = os.environ.get("RESERVATION_WAL_BUG", "")
WINDOW = 0.005
IDLE = 0.2
STORES = weakref.WeakSet()  # every open store of the process, for SIGUSR1
STORES_LOCK = threading.Lock()


class Crashed(base.Indeterminate):
    """The storage crashed before the operation's record was durable."""


class Log:
    """Records queued for the writer, and those durable."""

    def __init__(self):
        self.queued = []
        self.durable = []
        self.appended = 0
        self.committed = 0
        self.crashes = 0
        self.wanted = False
        self.writing = False
        self.cond = threading.Condition()

    def writer(self):
        """Commits the queued records: at once, after the window, when an operation waits for a
        commit; otherwise after IDLE. Ends when nothing is queued."""
        while True:
            with self.cond:
                if not self.wanted:
                    self.cond.wait(IDLE)
                asked = self.wanted
            if asked:
                time.sleep(WINDOW)  # group commit: gather what else comes in the window
            with self.cond:
                self.durable.extend(self.queued)
                self.committed += len(self.queued)
                self.queued = []
                self.wanted = False
                self.cond.notify_all()
                if not asked:
                    self.writing = False
                    return

    def append(self, record):
        with self.cond:
            self.queued.append(record)
            self.appended += 1
            if not self.writing:
                self.writing = True
                threading.Thread(target=self.writer, daemon=True).start()
            return self.appended, self.crashes

    def commit(self, n, epoch):
        with self.cond:
            self.wanted = True
            self.cond.notify_all()
            while True:
                if self.crashes != epoch:
                    raise Crashed("the storage crashed before the record was durable")
                if self.committed >= n:
                    return
                self.cond.wait()


def recover(records):
    """The rows and the clock that the durable records give."""
    if BUG == "drop-last-record":
        records = records[:-1]
    rows, clock, skipped = {}, 0, set()
    for where, at, request, row in records:
        op, current = request.get("op"), rows.get(where)
        owner = base.owner_of(request.get("owner"))
        if BUG == "skip-duplicate" and op == "confirm" and current and current["state"] == "confirmed" \
                and current["owner"] == owner:
            skipped.add(where)
            continue
        if BUG == "skip-duplicate" and op == "release" and where in skipped:
            version = request.get("version")
            row, _ = base.release(current, at, owner, "ANY" if version == "ANY" else base.u64(version))
        elif BUG == "join-from-old-expiry" and op == "reserve" and current and current["state"] == "pending" \
                and row and row["state"] == "pending" and current["owner"] == owner and base.live(current, at):
            row = base.pending(owner, row["holds"], min(current["expires"] + base.u64(request.get("ttl")), base.U64))
        if row is None:
            rows.pop(where, None)
        else:
            rows[where] = row
        clock = max(clock, at)
    return rows, (0 if BUG == "clock-not-restored" else clock)


class WalStore(base.Store):
    """A store of store.py whose changes go through a write-ahead log."""

    def __init__(self):
        super().__init__()
        self.lock = threading.RLock()  # a crash (SIGUSR1) may come while this thread holds it
        self.log = Log()
        self.local = threading.local()
        with STORES_LOCK:
            STORES.add(self)

    def run(self, request, clock=None):
        self.local.request = request
        self.local.waiting = None
        outcome = super().run(request, clock)
        waiting = self.local.waiting
        if waiting is not None:  # unlock-before-durable: the lock is already let go
            record, new_row = waiting
            if new_row:
                time.sleep(UNLOCKED)
            self.log.commit(*self.log.append(record))
        return outcome

    def write(self, where, row):
        """Called by store.py under the store's lock, with the row decided."""
        request, before = self.local.request, self.rows.get(where)
        logged = row
        if BUG == "log-requested-version" and request.get("op") == "confirm" and row is before and row \
                and row["state"] == "confirmed":
            logged = {"state": "confirmed", "owner": row["owner"], "version": base.u64(request.get("version"))}
        super().write(where, row)
        if logged is before:
            return  # nothing changed: nothing to log
        if BUG == "unlock-before-durable":
            # The record is written once the lock is let go, a new row's after UNLOCKED: while it
            # is not in the log, no other write's commit makes it durable, and a lookup shows it.
            self.local.waiting = ((where, self.clock, request, logged), before is None)
            return
        n = self.log.append((where, self.clock, request, logged))
        if BUG == "ack-before-write":
            return
        self.log.commit(*n)

    def crash(self):
        """Loses what is not durable, and rebuilds the rows and the clock from the log."""
        with self.lock:
            with self.log.cond:
                self.log.queued = []
                self.log.appended = self.log.committed
                self.log.crashes += 1
                self.rows, self.clock = recover(self.log.durable)
                self.log.cond.notify_all()

    def reopened(self, now):
        self.crash()
        return self


def crash_all(_signum, _frame):
    with STORES_LOCK:
        stores = list(STORES)
    for s in stores:
        s.crash()


if __name__ == "__main__":
    signal.signal(signal.SIGUSR1, crash_all)
    base.Store = WalStore
    base.DURABLE = True
    base.main()
