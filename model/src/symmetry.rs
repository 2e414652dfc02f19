//! Symmetry reduction: owners are interchangeable, so are the attempts of one owner, and so are
//! the keys. A state's representative is the least, over the permutations of the keys, of the
//! state with its attempts and owners sorted; the sort keys include each one's part in the store
//! (ownership and holds), so that ties are truly identical and the representative is canonical.

use stateright::Representative;

use crate::config::{MAX_ATTEMPTS, MAX_KEYS, MAX_OWNERS};
use crate::state::{Attempt, FREE, Owner, Phase, Slot, State, Words, attempt, hold_bit};

fn has_key(phase: Phase) -> bool {
    matches!(phase, Phase::Reserved | Phase::Appended | Phase::CrashedAfter)
}

/// `s` with key `k` renamed `perm[k]`.
fn permute_keys(s: &State, perm: &[u8; MAX_KEYS]) -> State {
    let rename = |k: u8| perm.get(usize::from(k)).copied().unwrap_or(k);
    let mut r = *s;
    for (k, slot) in s.store.iter().enumerate() {
        if let Some(to) = r.store.get_mut(usize::from(rename(k as u8))) {
            *to = *slot;
        }
    }
    for o in r.owners.iter_mut() {
        let len = usize::from(o.log_len);
        for e in o.log.iter_mut().take(len) {
            *e = rename(*e);
        }
        for a in o.attempts.iter_mut() {
            if has_key(a.phase) {
                a.key = rename(a.key);
            }
        }
    }
    r
}

/// Whether swapping keys `j` and `k` maps `s` onto itself: equal reservations, and every log and
/// attempt that names one names the other alike (in practice: neither is named anywhere).
pub(crate) fn keys_mirror(s: &State, j: u8, k: u8) -> bool {
    if j == k || s.store.get(usize::from(j)) != s.store.get(usize::from(k)) {
        return false;
    }
    let mut swap: [u8; MAX_KEYS] = std::array::from_fn(|x| x as u8);
    swap.swap(usize::from(j).min(MAX_KEYS - 1), usize::from(k).min(MAX_KEYS - 1));
    permute_keys(s, &swap) == *s
}

/// Whether swapping owners `p` and `o` maps `s` onto itself: equal fields, neither owns a
/// reservation, and each pending reservation has the same holds of both.
pub(crate) fn owners_mirror(s: &State, p: u8, o: u8) -> bool {
    let (Some(a), Some(b)) = (s.owners.get(usize::from(p)), s.owners.get(usize::from(o))) else { return false };
    a == b
        && s.store.iter().all(|slot| {
            let owned = slot.tag != FREE && (slot.owner == p || slot.owner == o);
            !owned && (0..MAX_ATTEMPTS as u8).all(|x| slot.has_hold(hold_bit(p, x)) == slot.has_hold(hold_bit(o, x)))
        })
}

/// Whether swapping attempts `b` and `a` of `owner` maps `s` onto itself: equal fields, and each
/// reservation holds both or neither.
pub(crate) fn attempts_mirror(s: &State, owner: u8, b: u8, a: u8) -> bool {
    let (Some(x), Some(y)) = (attempt(s, owner, b), attempt(s, owner, a)) else { return false };
    let (bit_b, bit_a) = (hold_bit(owner, b), hold_bit(owner, a));
    x == y && s.store.iter().all(|slot| slot.has_hold(bit_b) == slot.has_hold(bit_a))
}

/// Indices `0..N` sorted descending by `keys` (insertion sort: N is at most 4).
fn order_desc<K: Ord, const N: usize>(keys: &[K; N]) -> [usize; N] {
    let mut order = [0usize; N];
    for (i, o) in order.iter_mut().enumerate() {
        *o = i;
    }
    for i in 1..N {
        let mut j = i;
        while j > 0 && keys[order[j - 1]] < keys[order[j]] {
            order.swap(j - 1, j);
            j -= 1;
        }
    }
    order
}

fn attempt_key(a: &Attempt, in_store: u8) -> u64 {
    u64::from_be_bytes([0, 0, 0, a.phase as u8, a.key, a.deadline, a.version, in_store])
}

/// Whether `keys` is already in descending order (the usual case: no reordering to do).
fn descending<K: Ord, const N: usize>(keys: &[K; N]) -> bool {
    keys.windows(2).all(|w| matches!(w, [a, b] if a >= b))
}

/// Hold ids a state uses: `MAX_OWNERS` owners of `MAX_ATTEMPTS` attempts each.
const HOLDS: usize = MAX_OWNERS * MAX_ATTEMPTS;

/// `s` with key `k` renamed `perm[k]`, then the attempts of each owner and then the owners
/// sorted, descending: unused attempts and owners (equal to ones that did nothing, the least
/// values) come last, so the used ones keep the first indices. An attempt's sort key is its
/// fields and the keys whose reservation has its hold; an owner's is its fields (attempts sorted)
/// and its part in the store: the keys it owns, and the keys that have each of its attempts'
/// holds. Equal sort keys are identical attempts or owners, so ties need no breaking. One pass:
/// the renaming of keys, attempts and owners is applied to the store once, at the end.
fn canonical(s: &State, perm: &[u8; MAX_KEYS]) -> State {
    let width = MAX_ATTEMPTS;
    let rename = |k: u8| perm.get(usize::from(k)).copied().unwrap_or(k);
    let mut store = s.store;
    for (k, slot) in s.store.iter().enumerate() {
        if let Some(to) = store.get_mut(usize::from(rename(k as u8))) {
            *to = *slot;
        }
    }
    let (keys_of, owns) = parts_in_store(&store);
    let mut owners = s.owners;
    // Where each hold bit goes: owner and attempt renamed.
    let mut new_bit: [u8; HOLDS] = std::array::from_fn(|b| b as u8);
    let mut attempts_moved = false;
    let mut keys = [((0u64, 0u64, 0u16), 0u16); MAX_OWNERS];
    // Owners past the configuration's have no attempts, nor holds: they stay as they are, the
    // least, and last.
    for (o, (ow, key)) in owners.iter_mut().zip(keys.iter_mut()).enumerate().take(usize::from(s.owner_count)) {
        let len = usize::from(ow.log_len);
        for e in ow.log.iter_mut().take(len) {
            *e = rename(*e);
        }
        for a in ow.attempts.iter_mut() {
            if has_key(a.phase) {
                a.key = rename(a.key);
            }
        }
        let in_store: [u8; MAX_ATTEMPTS] = std::array::from_fn(|a| keys_of[o * width + a]);
        let akeys: [u64; MAX_ATTEMPTS] = std::array::from_fn(|a| attempt_key(&ow.attempts[a], in_store[a]));
        let mut role = owns[o];
        if descending(&akeys) {
            for (i, &k) in in_store.iter().enumerate() {
                role |= u16::from(k) << (MAX_KEYS * (i + 1));
            }
        } else {
            attempts_moved = true;
            let order = order_desc(&akeys);
            let old = ow.attempts;
            for (i, &from) in order.iter().enumerate() {
                ow.attempts[i] = old[from];
                new_bit[o * width + from] = (o * width + i) as u8;
                role |= u16::from(in_store[from]) << (MAX_KEYS * (i + 1));
            }
        }
        *key = (ow.signature(), role);
    }
    let mut out = State { store, owners, ..*s };
    let owners_sorted = descending(&keys);
    if owners_sorted && !attempts_moved {
        return out;
    }
    if !owners_sorted {
        sort_owners(&mut out, &owners, &keys, &mut new_bit);
    }
    for slot in out.store.iter_mut() {
        let mut h = slot.holds;
        let mut holds = 0u16;
        while h != 0 {
            let b = h.trailing_zeros() as usize;
            holds |= 1 << new_bit.get(b).copied().unwrap_or(b as u8);
            h &= h - 1;
        }
        slot.holds = holds;
    }
    out
}

/// Each key's part in `store`: for each hold bit, the keys whose reservation has it, and for each
/// owner, the keys it owns.
fn parts_in_store(store: &[Slot; MAX_KEYS]) -> ([u8; 16], [u16; MAX_OWNERS]) {
    let mut keys_of = [0u8; 16];
    for (k, slot) in store.iter().enumerate() {
        let mut h = slot.holds;
        while h != 0 {
            if let Some(x) = keys_of.get_mut(h.trailing_zeros() as usize) {
                *x |= 1 << k;
            }
            h &= h - 1;
        }
    }
    let mut owns = [0u16; MAX_OWNERS];
    for (k, slot) in store.iter().enumerate() {
        if slot.tag != FREE
            && let Some(m) = owns.get_mut(usize::from(slot.owner))
        {
            *m |= 1 << k;
        }
    }
    (keys_of, owns)
}

/// Puts the `owners` of `out` in descending order of their sort `keys`, renaming the owners of
/// its reservations, and records in `new_bit` where their hold bits go.
fn sort_owners(
    out: &mut State,
    owners: &[Owner; MAX_OWNERS],
    keys: &[((u64, u64, u16), u16); MAX_OWNERS],
    new_bit: &mut [u8; HOLDS],
) {
    let width = MAX_ATTEMPTS;
    let order = order_desc(keys);
    for (i, &old) in order.iter().enumerate() {
        out.owners[i] = owners[old];
        for a in 0..width {
            new_bit[old * width + a] = (i * width) as u8 + (new_bit[old * width + a] - (old * width) as u8);
        }
    }
    let mut new_of = [0u8; MAX_OWNERS];
    for (i, &old) in order.iter().enumerate() {
        new_of[old] = i as u8;
    }
    for slot in out.store.iter_mut() {
        if slot.tag != FREE {
            slot.owner = new_of.get(usize::from(slot.owner)).copied().unwrap_or(slot.owner);
        }
    }
}

/// What each key is to the state, whoever holds it: invariant under renaming owners and attempts,
/// so that keys with different signatures can be ordered without trying both orders.
fn key_signatures(s: &State) -> [u64; MAX_KEYS] {
    // Per key: facts naming it, latest facts holding it, and attempts naming it by phase.
    let mut in_logs = [0u64; MAX_KEYS];
    let mut latest = [0u64; MAX_KEYS];
    let mut in_attempts = [[0u64; 3]; MAX_KEYS];
    // Owners past the configuration's name no key.
    for o in s.owners.iter().take(usize::from(s.owner_count)) {
        for &e in o.log.iter().take(usize::from(o.log_len)) {
            if let Some(n) = in_logs.get_mut(usize::from(e)) {
                *n += 1;
            }
        }
        if let Some(n) = o.latest_key().and_then(|k| latest.get_mut(usize::from(k))) {
            *n += 1;
        }
        for a in o.attempts.iter().filter(|a| has_key(a.phase)) {
            let phase = match a.phase {
                Phase::Reserved => 0,
                Phase::Appended => 1,
                _ => 2,
            };
            if let Some(n) = in_attempts.get_mut(usize::from(a.key)).and_then(|c| c.get_mut(phase)) {
                *n += 1;
            }
        }
    }
    std::array::from_fn(|k| {
        let slot = s.store[k];
        let [reserved, appended, crashed] = in_attempts[k];
        u64::from(slot.tag) << 48
            | u64::from(slot.at) << 40
            | u64::from(slot.holds.count_ones()) << 32
            | latest[k] << 28
            | in_logs[k] << 20
            | reserved << 12
            | appended << 6
            | crashed
    })
}

/// The orders of the first `n` keys (2 or 3) that a representative may take: new key `i` is old key
/// `order[i]`. Each lists the keys by descending signature, so only keys with equal signatures
/// are tried in both orders (the usual case, all signatures different, leaves one order).
const ORDERS_2: [[u8; 2]; 2] = [[0, 1], [1, 0]];
const ORDERS_3: [[u8; 3]; 6] = [[0, 1, 2], [0, 2, 1], [1, 0, 2], [1, 2, 0], [2, 0, 1], [2, 1, 0]];

/// The renaming (old key to new key) that puts the old keys `order` at the first positions, or
/// `None` when it does not list the keys by descending signature.
fn renaming(order: &[u8], sig: &[u64; MAX_KEYS]) -> Option<[u8; MAX_KEYS]> {
    let sig_of = |k: u8| sig.get(usize::from(k)).copied().unwrap_or(0);
    if !order.windows(2).all(|w| matches!(w, [a, b] if sig_of(*a) >= sig_of(*b))) {
        return None;
    }
    let mut perm: [u8; MAX_KEYS] = std::array::from_fn(|k| k as u8);
    for (new, &old) in order.iter().enumerate() {
        *perm.get_mut(usize::from(old))? = new as u8;
    }
    Some(perm)
}

impl Representative for State {
    /// The least, over the renamings of the keys that order them by descending signature, of the
    /// state with its attempts and owners sorted. A key's signature does not change when owners
    /// or attempts are renamed and moves with the key when keys are, so every state of one class
    /// tries the same sorted states: the representative is canonical, and keys with different
    /// signatures are never tried in both orders.
    fn representative(&self) -> Self {
        let identity: [u8; MAX_KEYS] = std::array::from_fn(|k| k as u8);
        let orders: &[[u8; 3]] = match self.keys {
            3 => &ORDERS_3,
            _ => &[],
        };
        let orders_2: &[[u8; 2]] = if self.keys == 2 { &ORDERS_2 } else { &[] };
        if orders.is_empty() && orders_2.is_empty() {
            return canonical(self, &identity);
        }
        let sig = key_signatures(self);
        // Compared by their words (cheaper than field by field): any total order on the candidates
        // gives a canonical representative.
        let mut best: Option<(State, Option<Words>)> = None;
        let renamings = orders.iter().map(|o| renaming(o, &sig)).chain(orders_2.iter().map(|o| renaming(o, &sig)));
        for perm in renamings.flatten() {
            let candidate = canonical(self, &perm);
            best = Some(match best {
                None => (candidate, None),
                Some((b, words)) => {
                    // The first candidate's words are computed only once a second one comes.
                    let words = words.unwrap_or_else(|| b.words());
                    let w = candidate.words();
                    if w < words { (candidate, Some(w)) } else { (b, Some(words)) }
                }
            });
        }
        best.map_or_else(|| canonical(self, &identity), |(b, _)| b)
    }
}

#[cfg(test)]
mod tests {
    use stateright::{Model, Representative};

    use crate::ModelConfig;
    use crate::action::Action;
    use crate::model::ReservationModel;

    /// Two walks of the default configuration that differ only in which key each reserve names
    /// (key A in one is key B in the other) reach states with one representative at every step.
    /// Renaming keys must not touch a log's unused entries: it did, and every state had a twin.
    #[test]
    fn walks_with_the_keys_swapped_reach_the_same_representatives() {
        let model = ReservationModel::new(ModelConfig::default());
        let swapped = |a: Action| match a {
            Action::Reserve { owner, attempt, key } => Action::Reserve { owner, attempt, key: 1 - key.min(1) },
            other => other,
        };
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut actions = Vec::new();
        let mut checked = 0;
        for _ in 0..200 {
            let (mut s, mut t) = (model.initial_state(), model.initial_state());
            for _ in 0..40 {
                assert_eq!(s.representative(), t.representative(), "{s:?}\n{t:?}");
                checked += 1;
                actions.clear();
                model.actions(&s, &mut actions);
                seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
                let Some(&a) = actions.get((seed >> 33) as usize % actions.len().max(1)) else { break };
                let (Some(n), Some(m)) = (model.next_state(&s, a), model.next_state(&t, swapped(a))) else { break };
                (s, t) = (n, m);
            }
        }
        assert!(checked > 1000);
    }

    /// The same at three keys, for each renaming of them: walks that differ only by the renaming
    /// reach one representative at every step, whichever key orders the signatures allow.
    #[test]
    fn walks_with_the_keys_renamed_reach_the_same_representatives_at_three_keys() {
        let model = ReservationModel::new(ModelConfig { keys: 3, ..ModelConfig::small() });
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut actions = Vec::new();
        let mut checked = 0;
        for perm in [[1u8, 0, 2], [0, 2, 1], [1, 2, 0], [2, 0, 1], [2, 1, 0]] {
            let renamed = |a: Action| match a {
                Action::Reserve { owner, attempt, key } => {
                    Action::Reserve { owner, attempt, key: perm.get(usize::from(key)).copied().unwrap_or(key) }
                }
                other => other,
            };
            for _ in 0..100 {
                let (mut s, mut t) = (model.initial_state(), model.initial_state());
                for _ in 0..40 {
                    assert_eq!(s.representative(), t.representative(), "{perm:?}\n{s:?}\n{t:?}");
                    checked += 1;
                    actions.clear();
                    model.actions(&s, &mut actions);
                    seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
                    let Some(&a) = actions.get((seed >> 33) as usize % actions.len().max(1)) else { break };
                    let (Some(n), Some(m)) = (model.next_state(&s, a), model.next_state(&t, renamed(a))) else { break };
                    (s, t) = (n, m);
                }
            }
        }
        assert!(checked > 5000);
    }
}
