#!/usr/bin/env python3
"""A ReservationStore in Python (standard library only), written from SPEC.md, with its adapter
for the conformance driver: JSON lines on standard input and output (PROTOCOL.md).

    reservation conform --command "python3 adapters/python/store.py"

With --durable it declares itself durable: a reopened store keeps the rows and the clock of the
store it reopens, in this process (a stand-in for storage that survives a restart).

RESERVATION_PY_BUG plants one bug, to show the suite catching it:
  expiry-boundary  a pending reservation is live at now == expires_at           (D1)
  join-expiry      a join sets the expiry to now+ttl, which may shorten it      (R3)
  version-order    versions compared as signed 64-bit integers                  (C6, D8)
  release-version  a release below the confirmed version frees the key         (L5)
  hold-set         abandoning one hold drops them all                           (A3)
  owner-compare    owners compared by id only                                   (D5)
  scope-isolation  the scope's parts joined with '/', so 'a/b'+'c' meets 'a'+'b/c' (S1)
  tenant-merge     the scope's tenant left out of the row's key                 (S1)
  any-version      a release at ANY_VERSION taken as one at UNVERSIONED         (L4)
  atomicity        read, then write, without the store's lock in between        (H1)
  last-abandon-keeps  the abandon of the last hold answers Abandoned and keeps the row,
                   a pending reservation with no holds                          (A2)
  lookup-expired   a lookup shows an expired pending reservation                (D7)
  zero-version-absent  a version of 0 read as no version: UNVERSIONED refused   (D3)
  hold-case        hold ids compared ignoring ASCII case                        (D5)
  float-versions   versions decoded as floats, exact only up to 2^53            (D8)
  stale-read       lookups served from a copy of each row one write behind it
  clock-before-lock  the clock read before the store's lock is taken, and used  (D10)
Bugs in the checks of arguments that the typed API cannot make (D2, D4, D6, D8, D9):
  ttl-zero-only-on-pending  a zero TTL refused only where the reserve would write a pending
                            reservation (a confirmed key answers AlreadyConfirmed)    (D2)
  check-after-write         the hold id and the TTL checked after the row is written   (D6)
  skip-tenant-empty         an empty tenant id accepted                                (D6)
  skip-type-empty           an empty aggregate type accepted                           (D6)
  skip-aggregate-id-empty   an empty aggregate id accepted                             (D6)
  skip-name-length          aggregate types, tenants, namespaces and ids of any length (D9)
  chars-not-bytes           lengths counted in characters, not UTF-8 bytes             (D9)
  surrogates-replaced       text that is not Unicode stored with '?' in its place     (D9)
  lenient-numbers           a fractional number taken as its integer part              (D8)
  confirm-any               "ANY" given to confirm taken as the greatest version      (D4)
  extra-fields     a confirmed lookup also carries "holds": [] and "expires_at": 0 (D11)
  utf16-hold-order holds listed in the order of their UTF-16 code units         (D11)
  clock-back-on-reopen  (with --durable) a reopened store's clock starts again from
                   the reopen's now, even when that is earlier                  (D10, P1)
"""

import json
import os
import queue
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

BUG = os.environ.get("RESERVATION_PY_BUG", "")
DURABLE = "--durable" in sys.argv[1:]
POWER_CUTS = None  # what the store survives when the machine loses power: nothing it promises
U64 = (1 << 64) - 1
MAX_KEY, MAX_HOLD, MAX_NAME = 512, 128, 256


class Indeterminate(Exception):
    """A storage failure after which the operation may or may not have happened."""


class Invalid(Exception):
    """An invalid argument (D6), by its name in SPEC.md's table of errors."""

    def __init__(self, name, message=""):
        super().__init__(message or name)
        self.name = name


def text(value, empty, too_long, limit):
    """A field as its UTF-8 bytes (D9), checked for emptiness and length."""
    raw = utf8(value)
    if not raw and not skipped(empty):
        raise Invalid(empty)
    length = len(value) if BUG == "chars-not-bytes" else len(raw)
    if length > limit and not (BUG == "skip-name-length" and limit == MAX_NAME):
        raise Invalid(too_long)
    return raw


def utf8(value):
    """A string's UTF-8 bytes; text that is not Unicode has none (D9)."""
    if not isinstance(value, str):
        raise Invalid("Unrepresentable", "not a string")
    try:
        return value.encode("utf-8", errors="replace" if BUG == "surrogates-replaced" else "strict")
    except UnicodeEncodeError:
        raise Invalid("Unrepresentable", "not valid Unicode")


def skipped(empty):
    """Whether a planted bug skips the emptiness check whose error is `empty`."""
    return {
        "skip-tenant-empty": "EmptyTenantId",
        "skip-type-empty": "EmptyAggregateType",
        "skip-aggregate-id-empty": "EmptyAggregateId",
    }.get(BUG) == empty


def u64(value):
    if BUG == "lenient-numbers" and isinstance(value, float) and 0 <= value <= U64:
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= U64:
        raise Invalid("Unrepresentable", "not an integer in 0..=2^64-1")
    return value


def tenant(value):
    if value is None:
        return None  # SYSTEM_TENANT
    return text(value, "EmptyTenantId", "TenantIdTooLong", MAX_NAME)


def scope_of(s):
    if not isinstance(s, dict):
        raise Invalid("Unrepresentable", "scope is not an object")
    parts = (
        text(s.get("aggregate_type"), "EmptyAggregateType", "AggregateTypeTooLong", MAX_NAME),
        tenant(s.get("tenant")),
        text(s.get("namespace"), "EmptyNamespace", "NamespaceTooLong", MAX_NAME),
    )
    if BUG == "scope-isolation":
        return b"/".join(p if p is not None else b"*" for p in parts)
    if BUG == "tenant-merge":
        return (parts[0], parts[2])
    return parts


def owner_of(o):
    if not isinstance(o, dict):
        raise Invalid("Unrepresentable", "owner is not an object")
    return (
        text(o.get("aggregate_type"), "EmptyAggregateType", "AggregateTypeTooLong", MAX_NAME),
        tenant(o.get("tenant")),
        text(o.get("id"), "EmptyAggregateId", "AggregateIdTooLong", MAX_NAME),
    )


def admit(scope_json, owner):
    """D6: the owner's type is the scope's, and the scope's tenant is the owner's or the system's."""
    s_type = text(scope_json.get("aggregate_type"), "EmptyAggregateType", "AggregateTypeTooLong", MAX_NAME)
    s_tenant = tenant(scope_json.get("tenant"))
    if owner[0] != s_type:
        raise Invalid("OwnerTypeMismatch")
    if s_tenant is not None and s_tenant != owner[1]:
        raise Invalid("TenantMismatch")


def same_owner(a, b):
    if BUG == "owner-compare":
        return a[2] == b[2]
    return a == b


def live(row, now):
    """D1: a pending reservation is live on [reserved, expires_at)."""
    if row is None:
        return False
    if row["state"] == "confirmed":
        return True
    if BUG == "expiry-boundary":
        return now <= row["expires"]
    return now < row["expires"]


def newer(v, c):
    """D3, D8: versions are unsigned 64-bit; UNVERSIONED (0) is the lowest."""
    if BUG == "version-order":
        signed = lambda x: x - (1 << 64) if x >= 1 << 63 else x
        return signed(v) > signed(c)
    return v > c


def pending(owner, holds, expires):
    return {"state": "pending", "owner": owner, "holds": frozenset(holds), "expires": expires}


def held_as(row, hold):
    """The bug hold-case: a held hold equal to `hold` but for ASCII case stands for it."""
    if BUG != "hold-case" or row is None or row["state"] != "pending":
        return hold
    return next((h for h in sorted(row["holds"]) if h.lower() == hold.lower()), hold)


def reserve(row, now, owner, hold, ttl):
    hold = held_as(row, hold)
    until = min(now + ttl, U64)  # D1: now+ttl saturates
    if row is None or (row["state"] == "pending" and not live(row, now)):
        return pending(owner, {hold}, until), "Taken"  # R1, R2
    if row["state"] == "pending":
        if not same_owner(row["owner"], owner):
            return row, "Conflict"  # R5
        expires = until if BUG == "join-expiry" else max(row["expires"], until)
        return pending(row["owner"], row["holds"] | {hold}, expires), "Joined"  # R3, R4
    return row, ("AlreadyConfirmed" if same_owner(row["owner"], owner) else "Conflict")  # R6, R7


def confirm(row, now, owner, version):
    confirmed = {"state": "confirmed", "owner": owner, "version": version}
    if row is None:
        return confirmed, "Confirmed"  # C1
    if row["state"] == "pending":
        if same_owner(row["owner"], owner) or not live(row, now):
            return confirmed, "Confirmed"  # C2, C3, C4
        return row, "Conflict"  # C5
    if not same_owner(row["owner"], owner):
        return row, "Conflict"  # C8
    if newer(version, row["version"]):
        return confirmed, "Confirmed"  # C6
    return row, "AlreadyConfirmed"  # C7


def release(row, now, owner, version):
    if row is None or not live(row, now):
        return None, "NotHeld"  # L1
    if not same_owner(row["owner"], owner):
        return row, "NotHeld"  # L3, L6
    if row["state"] == "pending":
        return None, "Released"  # L2
    if version == "ANY" or not newer(row["version"], version) or BUG == "release-version":
        return None, "Released"  # L4
    return row, "Kept"  # L5


def abandon(row, now, owner, hold):
    hold = held_as(row, hold)
    if row is None or not live(row, now):
        return None, "NotHeld"  # A1
    if not same_owner(row["owner"], owner):
        return row, "NotHeld"  # A5
    if row["state"] == "confirmed":
        return row, "AlreadyConfirmed"  # A6
    if hold not in row["holds"]:
        return row, "NotHeld"  # A4
    rest = row["holds"] - {hold}
    if not rest and BUG == "last-abandon-keeps":
        return pending(row["owner"], rest, row["expires"]), "Abandoned"
    if not rest or BUG == "hold-set":
        return None, "Abandoned"  # A2
    return pending(row["owner"], rest, row["expires"]), "StillReserved"  # A3


def reserve_ttl_zero():
    raise Invalid("TtlZero")


def pending_only_ttl(decided, ttl):
    """The bug ttl-zero-only-on-pending: a zero TTL refused only where a pending reservation would
    be written (R1-R4), before it is."""
    if ttl == 0 and decided[1] in ("Taken", "Joined"):
        raise Invalid("TtlZero")
    return decided


def owner_json(o):
    return {
        "aggregate_type": o[0].decode("utf-8"),
        "tenant": None if o[1] is None else o[1].decode("utf-8"),
        "id": o[2].decode("utf-8"),
    }


def shown(row, now):
    """Lookup (D7, D11): nothing for a free or expired key; holds in ascending byte order."""
    if row is None or not (live(row, now) or BUG == "lookup-expired"):
        return None
    if row["state"] == "pending":
        holds = [h.decode("utf-8") for h in sorted(row["holds"])]
        if BUG == "utf16-hold-order":
            holds.sort(key=lambda h: h.encode("utf-16-be"))
        return {"state": "pending", "owner": owner_json(row["owner"]), "holds": holds, "expires_at": row["expires"]}
    confirmed = {"state": "confirmed", "owner": owner_json(row["owner"]), "version": row["version"]}
    if BUG == "extra-fields":
        confirmed.update({"holds": [], "expires_at": 0})
    return confirmed


def version_of(value):
    """A version (D8), as the bugs float-versions and zero-version-absent misread it."""
    version = u64(value)
    if BUG == "float-versions":
        version = min(int(float(version)), U64)
    if BUG == "zero-version-absent" and not version:
        raise Invalid("ZeroStreamVersion", "no version given")
    return version


class Store:
    """One store of the suite: rows by (scope, key), a clock that never goes back (D10)."""

    def __init__(self, rows=None, clock=0):
        self.rows = {} if rows is None else rows
        self.copy = {}  # the bug stale-read: each row as it was before its last write
        self.clock = clock
        self.lock = threading.Lock()

    @classmethod
    def opened(cls, directory=None):
        """A new store; `directory` is where a store that survives power cuts keeps its storage
        (PROTOCOL.md, "Power cuts"), never given to this one, which promises none."""
        return cls()

    def close(self):
        """The driver is done with the store."""

    def reopened(self, now):
        """This store after a restart (--durable): its rows, and its clock, which never goes back
        (D10), even when the reopen's now is earlier."""
        with self.lock:
            clock = now if BUG == "clock-back-on-reopen" else self.clock
            return Store(self.rows, clock)

    def run(self, request, clock=None):
        """Runs one request; `clock()` reads its clock (PROTOCOL.md, "The clock"; by default the
        request's `now`), once, inside the lock, and the store never decides earlier than it
        already has (D10)."""
        if clock is None:
            clock = lambda: u64(request.get("now"))
        op = request.get("op")
        scope_json = request.get("scope")
        where = (scope_of(scope_json), text(request.get("key"), "EmptyKey", "KeyTooLong", MAX_KEY))
        if request.get("now") != "ask":
            u64(request.get("now"))
        if op == "lookup":
            with self.lock:
                self.clock = max(self.clock, clock())
                rows = self.copy if BUG == "stale-read" else self.rows
                return shown(rows.get(where), self.clock)
        owner = owner_of(request.get("owner"))
        late = []  # checks that the bug check-after-write makes after the row is written
        if op in ("reserve", "abandon"):
            check_hold = lambda: text(request.get("hold"), "EmptyHoldId", "HoldIdTooLong", MAX_HOLD)
            if BUG == "check-after-write":
                hold = utf8(request.get("hold"))
                late.append(check_hold)
            else:
                hold = check_hold()
        if op == "reserve":
            ttl = u64(request.get("ttl"))
            if ttl == 0 and BUG == "check-after-write":
                late.append(lambda: reserve_ttl_zero())
            elif ttl == 0 and BUG != "ttl-zero-only-on-pending":
                raise Invalid("TtlZero")
            decide = lambda row, t: pending_only_ttl(reserve(row, t, owner, hold, ttl), ttl)
        elif op == "confirm":
            version = request.get("version")
            version = U64 if BUG == "confirm-any" and version == "ANY" else version_of(version)
            decide = lambda row, t: confirm(row, t, owner, version)
        elif op == "release":
            version = request.get("version")
            version = "ANY" if version == "ANY" else version_of(version)
            if version == "ANY" and BUG == "any-version":
                version = 0
            decide = lambda row, t: release(row, t, owner, version)
        elif op == "abandon":
            decide = lambda row, t: abandon(row, t, owner, hold)
        else:
            raise Invalid("Unrepresentable", "unknown op %r" % op)
        admit(scope_json, owner)
        if BUG == "atomicity":
            row = self.rows.get(where)
            time.sleep(0)
            with self.lock:
                self.clock = max(self.clock, clock())
                t = self.clock
            row, outcome = decide(row, t)
            time.sleep(0)
            self.write(where, row)
            return outcome
        if BUG == "clock-before-lock":
            t = max(self.clock, clock())
            with self.lock:
                self.clock = max(self.clock, t)
                row, outcome = decide(self.rows.get(where), t)
                self.write(where, row)
                return outcome
        with self.lock:
            self.clock = max(self.clock, clock())
            row, outcome = decide(self.rows.get(where), self.clock)
            self.write(where, row)
        for check in late:
            check()
        return outcome

    def write(self, where, row):
        if BUG == "stale-read":
            self.copy[where] = self.rows.get(where)
        if row is None:
            self.rows.pop(where, None)
        else:
            self.rows[where] = row


def main():
    stores = {}
    out = threading.Lock()
    pool = ThreadPoolExecutor(max_workers=8)
    asked = {}  # request id -> where the driver's answer to its clock question goes

    def clock(request):
        """The request's clock (PROTOCOL.md, "The clock"): its `now`, or, when that is "ask", the
        driver's answer to a question asked when the store reads it."""

        def read():
            if request.get("now") != "ask":
                return u64(request.get("now"))
            answer = queue.Queue(maxsize=1)
            with out:
                asked[request.get("id")] = answer
                sys.stdout.write(json.dumps({"clock": request.get("id")}) + "\n")
                sys.stdout.flush()
            return u64(answer.get(timeout=60))

        return read

    def answer(request):
        rid = request.get("id")
        try:
            op = request.get("op")
            if op == "hello":
                result = {"protocol": 3, "durable": DURABLE, "power_cuts": POWER_CUTS}
            elif op == "open":
                stores[request["store"]] = Store.opened(request.get("dir"))
                result = None
            elif op == "close":
                stores.pop(request["store"]).close()  # a store not open: KeyError, answered below
                result = None
            elif op == "reopen":
                if not DURABLE:
                    raise RuntimeError("this store keeps nothing across a reopen (run it with --durable)")
                stores[request["as"]] = stores.pop(request["store"]).reopened(u64(request.get("now")))
                result = None
            else:
                result = stores[request["store"]].run(request, clock(request))
            reply = {"id": rid, "ok": result}
        except Invalid as e:
            reply = {"id": rid, "error": {"kind": "InvalidArgument", "name": e.name, "message": str(e)}}
        except Indeterminate as e:
            reply = {"id": rid, "error": {"kind": "StorageError", "indeterminate": True, "message": str(e)}}
        except Exception as e:  # a bug of this store: the driver reports it, quoting the message
            reply = {"id": rid, "error": {"kind": "StorageError", "indeterminate": False, "message": repr(e)}}
        line = json.dumps(reply, ensure_ascii=False)
        with out:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()

    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        if "clock" in request and "op" not in request:  # the answer to a clock question
            waiting = asked.pop(request["clock"], None)
            if waiting is not None:
                waiting.put(request.get("now"))
        elif request.get("op") in ("hello", "open", "reopen", "close"):
            answer(request)  # in order: later requests name the store
        else:
            pool.submit(answer, request)
    pool.shutdown(wait=True)


if __name__ == "__main__":
    main()
