#!/usr/bin/env python3
"""A ReservationStore in Python (standard library only), written from SPEC.md, with its adapter
for the conformance driver: JSON lines on standard input and output (PROTOCOL.md).

    reservation conform --command "python3 adapters/python/store.py"

RESERVATION_PY_BUG plants one bug, to show the suite catching it:
  expiry-boundary  a pending reservation is live at now == expires_at           (D1)
  join-expiry      a join sets the expiry to now+ttl, which may shorten it      (R3)
  version-order    versions compared as signed 64-bit integers                  (C6, D8)
  release-version  a release below the confirmed version frees the key         (L5)
  hold-set         abandoning one hold drops them all                           (A3)
  owner-compare    owners compared by id only                                   (D5)
  scope-isolation  the scope's parts joined with '/', so 'a/b'+'c' meets 'a'+'b/c' (S1)
  atomicity        read, then write, without the store's lock in between        (H1)
"""

import json
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

BUG = os.environ.get("RESERVATION_PY_BUG", "")
U64 = (1 << 64) - 1
MAX_KEY, MAX_HOLD, MAX_NAME = 512, 128, 256


class Invalid(Exception):
    """An invalid argument (D6), by its name in SPEC.md's table of errors."""

    def __init__(self, name, message=""):
        super().__init__(message or name)
        self.name = name


def text(value, empty, too_long, limit):
    """A field as its UTF-8 bytes (D9), checked for emptiness and length."""
    if not isinstance(value, str):
        raise Invalid("Unrepresentable", "not a string")
    try:
        raw = value.encode("utf-8")
    except UnicodeEncodeError:
        raise Invalid("Unrepresentable", "not valid Unicode")
    if not raw:
        raise Invalid(empty)
    if len(raw) > limit:
        raise Invalid(too_long)
    return raw


def u64(value):
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


def reserve(row, now, owner, hold, ttl):
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
    if row is None or not live(row, now):
        return None, "NotHeld"  # A1
    if not same_owner(row["owner"], owner):
        return row, "NotHeld"  # A5
    if row["state"] == "confirmed":
        return row, "AlreadyConfirmed"  # A6
    if hold not in row["holds"]:
        return row, "NotHeld"  # A4
    rest = row["holds"] - {hold}
    if not rest or BUG == "hold-set":
        return None, "Abandoned"  # A2
    return pending(row["owner"], rest, row["expires"]), "StillReserved"  # A3


def owner_json(o):
    return {
        "aggregate_type": o[0].decode("utf-8"),
        "tenant": None if o[1] is None else o[1].decode("utf-8"),
        "id": o[2].decode("utf-8"),
    }


def shown(row, now):
    """Lookup (D7, D11): nothing for a free or expired key; holds in ascending byte order."""
    if row is None or not live(row, now):
        return None
    if row["state"] == "pending":
        holds = [h.decode("utf-8") for h in sorted(row["holds"])]
        return {"state": "pending", "owner": owner_json(row["owner"]), "holds": holds, "expires_at": row["expires"]}
    return {"state": "confirmed", "owner": owner_json(row["owner"]), "version": row["version"]}


class Store:
    """One store of the suite: rows by (scope, key), a clock that never goes back (D10)."""

    def __init__(self):
        self.rows = {}
        self.clock = 0
        self.lock = threading.Lock()

    def run(self, request):
        op = request.get("op")
        scope_json = request.get("scope")
        where = (scope_of(scope_json), text(request.get("key"), "EmptyKey", "KeyTooLong", MAX_KEY))
        now = u64(request.get("now"))
        if op == "lookup":
            with self.lock:
                self.clock = max(self.clock, now)
                return shown(self.rows.get(where), self.clock)
        owner = owner_of(request.get("owner"))
        if op in ("reserve", "abandon"):
            hold = text(request.get("hold"), "EmptyHoldId", "HoldIdTooLong", MAX_HOLD)
        if op == "reserve":
            ttl = u64(request.get("ttl"))
            if ttl == 0:
                raise Invalid("TtlZero")
            decide = lambda row, t: reserve(row, t, owner, hold, ttl)
        elif op == "confirm":
            version = u64(request.get("version"))
            decide = lambda row, t: confirm(row, t, owner, version)
        elif op == "release":
            version = request.get("version")
            version = "ANY" if version == "ANY" else u64(version)
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
                self.clock = max(self.clock, now)
                t = self.clock
            row, outcome = decide(row, t)
            time.sleep(0)
            self.write(where, row)
            return outcome
        with self.lock:
            self.clock = max(self.clock, now)
            row, outcome = decide(self.rows.get(where), self.clock)
            self.write(where, row)
            return outcome

    def write(self, where, row):
        if row is None:
            self.rows.pop(where, None)
        else:
            self.rows[where] = row


def main():
    stores = {}
    out = threading.Lock()
    pool = ThreadPoolExecutor(max_workers=8)

    def answer(request):
        rid = request.get("id")
        try:
            op = request.get("op")
            if op == "hello":
                result = {"protocol": 1, "durable": False}
            elif op == "open":
                stores[request["store"]] = Store()
                result = None
            elif op == "reopen":
                raise RuntimeError("this store keeps nothing across a reopen")
            else:
                result = stores[request["store"]].run(request)
            reply = {"id": rid, "ok": result}
        except Invalid as e:
            reply = {"id": rid, "error": {"kind": "InvalidArgument", "name": e.name, "message": str(e)}}
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
        if request.get("op") in ("hello", "open", "reopen"):
            answer(request)  # in order: later requests name the store
        else:
            pool.submit(answer, request)
    pool.shutdown(wait=True)


if __name__ == "__main__":
    main()
