// A ReservationStore in Go, written from SPEC.md: the rows, the rule tables, the argument
// checks. Standard library only.
package main

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"sync"
)

const (
	maxKey      = 512
	maxHold     = 128
	maxName     = 256
	lastInstant = ^uint64(0)
)

// Invalid is an invalid argument, by its name in SPEC.md's table of errors.
type Invalid struct{ Name string }

func (e Invalid) Error() string { return e.Name }

// Owner is an aggregate: its type, its tenant (System for SYSTEM_TENANT) and its id. Comparable
// with ==, field by field (D5).
type Owner struct {
	Type, Tenant, ID string
	System           bool
}

// where is a (scope, key): a struct, never a joined string, so that scopes never meet (S1).
type where struct {
	Type, Tenant, Namespace, Key string
	System                       bool
}

type row struct {
	confirmed bool
	owner     Owner
	holds     map[string]bool
	expires   uint64
	version   uint64
}

// Store is one store of the suite: rows, and a clock that never goes back (D10).
type Store struct {
	mu    sync.Mutex
	clock uint64
	rows  map[where]*row
}

func NewStore() *Store { return &Store{rows: map[where]*row{}} }

func text(v any, empty, tooLong string, limit int) (string, error) {
	s, ok := v.(string)
	switch {
	case !ok:
		return "", Invalid{"Unrepresentable"}
	case len(s) == 0: // lengths are UTF-8 bytes (D9)
		return "", Invalid{empty}
	case len(s) > limit:
		return "", Invalid{tooLong}
	}
	return s, nil
}

func u64(v any) (uint64, error) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, Invalid{"Unrepresentable"}
	}
	if n == "-0" { // JSON's -0 is the integer 0 (PROTOCOL.md, "Values")
		return 0, nil
	}
	x, err := strconv.ParseUint(string(n), 10, 64)
	if err != nil {
		return 0, Invalid{"Unrepresentable"}
	}
	return x, nil
}

// parts reads the aggregate type, tenant and third field of a scope or an owner.
func parts(v any, third, empty, tooLong string) (typ, tenant string, system bool, last string, err error) {
	m, ok := v.(map[string]any)
	if !ok {
		return "", "", false, "", Invalid{"Unrepresentable"}
	}
	if typ, err = text(m["aggregate_type"], "EmptyAggregateType", "AggregateTypeTooLong", maxName); err != nil {
		return
	}
	if t, present := m["tenant"]; present && t == nil {
		system = true
	} else if tenant, err = text(t, "EmptyTenantId", "TenantIdTooLong", maxName); err != nil {
		return
	}
	last, err = text(m[third], empty, tooLong, maxName)
	return
}

// loneSurrogate reports whether a JSON line escapes one half of a UTF-16 surrogate pair alone,
// such as "\ud800": text that is not Unicode (D9), which encoding/json decodes as U+FFFD.
func loneSurrogate(line []byte) bool {
	escape := func(i int) rune { // the character of the \uXXXX escape at line[i:], or -1
		if i+6 > len(line) || line[i] != '\\' || line[i+1] != 'u' {
			return -1
		}
		n, err := strconv.ParseUint(string(line[i+2:i+6]), 16, 32)
		if err != nil {
			return -1
		}
		return rune(n)
	}
	for i := 0; i < len(line); i++ {
		if line[i] != '\\' {
			continue
		}
		switch c := escape(i); {
		case c < 0:
			i++ // a one-character escape: \\, \", \n, …
		case c >= 0xD800 && c < 0xDC00:
			if low := escape(i + 6); low < 0xDC00 || low >= 0xE000 {
				return true
			}
			i += 11
		case c >= 0xDC00 && c < 0xE000:
			return true
		default:
			i += 5
		}
	}
	return false
}

func live(r *row, now uint64) bool { return r != nil && (r.confirmed || now < r.expires) } // D1, D7

func ownerJSON(o Owner) map[string]any {
	var tenant any = o.Tenant
	if o.System {
		tenant = nil
	}
	return map[string]any{"aggregate_type": o.Type, "tenant": tenant, "id": o.ID}
}

// Run runs one request of the protocol: an operation's outcome, or a lookup's reservation.
// clock reads the request's clock; Run reads it once, inside the lock.
func (s *Store) Run(r map[string]any, clock func() any) (any, error) {
	if r["now"] != "ask" { // an integer, checked before anything runs
		if _, err := u64(r["now"]); err != nil {
			return nil, err
		}
	}
	typ, tenant, system, ns, err := parts(r["scope"], "namespace", "EmptyNamespace", "NamespaceTooLong")
	if err != nil {
		return nil, err
	}
	key, err := text(r["key"], "EmptyKey", "KeyTooLong", maxKey)
	if err != nil {
		return nil, err
	}
	at := where{typ, tenant, ns, key, system}
	op := r["op"]
	if op == "lookup" {
		s.mu.Lock()
		defer s.mu.Unlock()
		if err := s.tick(clock); err != nil {
			return nil, err
		}
		return show(s.rows[at], s.clock), nil
	}
	var o Owner
	if o.Type, o.Tenant, o.System, o.ID, err = parts(r["owner"], "id", "EmptyAggregateId", "AggregateIdTooLong"); err != nil {
		return nil, err
	}
	var decide func(*row, uint64) (*row, string)
	switch op {
	case "reserve", "abandon":
		hold, err := text(r["hold"], "EmptyHoldId", "HoldIdTooLong", maxHold)
		if err != nil {
			return nil, err
		}
		if op == "abandon" {
			decide = func(cur *row, t uint64) (*row, string) { return abandon(cur, t, o, hold) }
			break
		}
		ttl, err := u64(r["ttl"])
		if err != nil {
			return nil, err
		}
		if ttl == 0 {
			return nil, Invalid{"TtlZero"} // D2
		}
		decide = func(cur *row, t uint64) (*row, string) { return reserve(cur, t, o, hold, ttl) }
	case "confirm":
		v, err := u64(r["version"]) // "ANY" is Unrepresentable here (D4)
		if err != nil {
			return nil, err
		}
		decide = func(cur *row, t uint64) (*row, string) { return confirm(cur, t, o, v) }
	case "release":
		anyVersion, v := r["version"] == "ANY", uint64(0)
		if !anyVersion {
			if v, err = u64(r["version"]); err != nil {
				return nil, err
			}
		}
		decide = func(cur *row, t uint64) (*row, string) { return release(cur, t, o, v, anyVersion) }
	default:
		return nil, fmt.Errorf("unknown op %v", op)
	}
	if o.Type != typ { // D6
		return nil, Invalid{"OwnerTypeMismatch"}
	}
	if !system && (o.System || o.Tenant != tenant) {
		return nil, Invalid{"TenantMismatch"}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.tick(clock); err != nil {
		return nil, err
	}
	next, outcome := decide(s.rows[at], s.clock)
	if next == nil {
		delete(s.rows, at)
	} else {
		s.rows[at] = next
	}
	return outcome, nil
}

// tick reads the clock, under the lock, and moves the store's clock to it unless it is already
// later: the store never decides earlier than it already has (D10).
func (s *Store) tick(clock func() any) error {
	now, err := u64(clock())
	if err != nil {
		return err
	}
	if now > s.clock {
		s.clock = now
	}
	return nil
}

func show(r *row, now uint64) any {
	switch {
	case !live(r, now):
		return nil
	case r.confirmed:
		return map[string]any{"state": "confirmed", "owner": ownerJSON(r.owner), "version": r.version}
	}
	holds := make([]string, 0, len(r.holds))
	for h := range r.holds {
		holds = append(holds, h)
	}
	sort.Strings(holds) // ascending UTF-8 bytes (D11)
	return map[string]any{"state": "pending", "owner": ownerJSON(r.owner), "holds": holds, "expires_at": r.expires}
}

func reserve(r *row, now uint64, o Owner, hold string, ttl uint64) (*row, string) {
	until := now + ttl
	if until < now {
		until = lastInstant // D1: saturates
	}
	switch {
	case !live(r, now): // R1, R2
		return &row{owner: o, holds: map[string]bool{hold: true}, expires: until}, "Taken"
	case r.owner != o: // R5, R7
		return r, "Conflict"
	case r.confirmed: // R6
		return r, "AlreadyConfirmed"
	}
	holds := map[string]bool{hold: true} // R3, R4
	for h := range r.holds {
		holds[h] = true
	}
	if r.expires > until {
		until = r.expires
	}
	return &row{owner: o, holds: holds, expires: until}, "Joined"
}

func confirm(r *row, now uint64, o Owner, v uint64) (*row, string) {
	switch {
	case !live(r, now) || (r.owner == o && (!r.confirmed || v > r.version)): // C1–C4, C6
		return &row{confirmed: true, owner: o, version: v}, "Confirmed"
	case r.owner != o: // C5, C8
		return r, "Conflict"
	}
	return r, "AlreadyConfirmed" // C7
}

func release(r *row, now uint64, o Owner, v uint64, anyVersion bool) (*row, string) {
	switch {
	case !live(r, now): // L1
		return nil, "NotHeld"
	case r.owner != o: // L3, L6
		return r, "NotHeld"
	case !r.confirmed || anyVersion || v >= r.version: // L2, L4
		return nil, "Released"
	}
	return r, "Kept" // L5
}

func abandon(r *row, now uint64, o Owner, hold string) (*row, string) {
	switch {
	case !live(r, now): // A1
		return nil, "NotHeld"
	case r.owner != o: // A5
		return r, "NotHeld"
	case r.confirmed: // A6
		return r, "AlreadyConfirmed"
	case !r.holds[hold]: // A4
		return r, "NotHeld"
	case len(r.holds) == 1: // A2
		return nil, "Abandoned"
	}
	holds := map[string]bool{}
	for h := range r.holds {
		if h != hold {
			holds[h] = true
		}
	}
	return &row{owner: o, holds: holds, expires: r.expires}, "StillReserved" // A3
}
