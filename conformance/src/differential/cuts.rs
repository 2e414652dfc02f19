//! Power cuts at the differential's restarts: for a store that promises to survive them
//! ([`crate::Capabilities::power_cuts`]), every other script of the differential check across
//! restarts runs on a store whose storage is on a disk that can lose power
//! ([`reservation_disk::Disk`]), and each of its restarts is a cut under the declared model: the
//! power goes off right after an acknowledged step, the store is dropped, the power comes back and
//! the store opens again on what the cut left. Every step before the cut was acknowledged with
//! nothing in flight, so everything the script did must be there, under every spelling its slots
//! hold.

use std::future::Future;
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard, PoisonError};

use reservation_disk::{CutReport, Disk, Persistence};
use reservation_store::ManualClock;

use crate::erased::{DynHarness, Erased, ErasedStore};
use crate::failure::Failure;
use crate::harness::Harness;

/// A harness whose stores keep their storage on a disk that can lose power, in a directory of
/// their own, and whose reopen is a power cut under `model`. The oracle that runs scripts on it
/// asks it for stores, reopens and futures only (its capabilities and whether an adapter broke
/// are the inner harness's, which the check's caller asks).
pub(super) struct Cutting<'h> {
    inner: Erased<'h>,
    disk: Mutex<Disk>,
    /// The mount's directory, removed after the disk is gone.
    mounted: tempfile::TempDir,
    /// The model every cut is made under: the declared one.
    pub(super) model: Persistence,
    state: Mutex<State>,
}

/// The store's directory and the cuts made since it was opened.
#[derive(Default)]
struct State {
    /// Stores opened so far: each script's store gets a directory of its own.
    opened: u64,
    dir: PathBuf,
    /// What each cut of the current store took back; a cut that failed, why.
    cuts: Vec<Result<CutReport, String>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl<'h> Cutting<'h> {
    /// The cutting harness of `harness`, when it promises to survive power cuts and FUSE mounts
    /// (said where it does not; a failure under `RESERVATION_REQUIRE_SERVICES=1`).
    pub(super) fn of(harness: &'h dyn DynHarness, check: &str) -> Result<Option<Self>, Failure> {
        let inner = Erased::new(harness);
        let Some(model) = inner.capabilities().power_cuts else { return Ok(None) };
        let mounted = tempfile::Builder::new()
            .prefix("reservation-restart-cuts")
            .tempdir()
            .map_err(|e| Failure::without_rule(check, format!("no directory to mount a disk in: {e}")))?;
        let service = "FUSE (a mount of /dev/fuse), for the power cuts of the differential across restarts";
        let Some(disk) = crate::services::service(service, Disk::mount(mounted.path())) else { return Ok(None) };
        Ok(Some(Cutting { inner, disk: Mutex::new(disk), mounted, model, state: Mutex::default() }))
    }

    /// What the cuts of the store opened last took back, for a failure's context.
    pub(super) fn said(&self) -> Vec<String> {
        let state = lock(&self.state);
        let mut said = vec![format!(
            "each restart of this script was a power cut under `{}` (the store's promise), the store's storage in {} on \
             a disk that can lose power",
            self.model,
            state.dir.display()
        )];
        for (n, cut) in (1..).zip(&state.cuts) {
            said.push(match cut {
                Ok(report) => format!("cut {n}: {report}"),
                Err(why) => format!("cut {n} failed: {why}"),
            });
        }
        said
    }

    /// Cuts the power under the store and brings it back: what the cut took back, or why not.
    fn cut(&self, store: ErasedStore<'h>, seed: u64) -> Result<CutReport, String> {
        let mut disk = lock(&self.disk);
        let report = disk.power_off(self.model, seed).map_err(|e| format!("the disk could not be cut: {e}"))?;
        // The store's threads finish on the dead disk before it is mounted again.
        drop(store);
        disk.power_on().map_err(|e| format!("the disk did not come back after the cut: {e}"))?;
        Ok(report)
    }
}

impl<'h> Harness for Cutting<'h> {
    type Store = ErasedStore<'h>;

    /// A store in a new directory of the mount.
    fn store(&self, clock: ManualClock) -> Self::Store {
        let dir = {
            let mut state = lock(&self.state);
            state.opened += 1;
            state.dir = self.mounted.path().join(format!("store-{}", state.opened));
            state.cuts.clear();
            state.dir.clone()
        };
        std::fs::create_dir(&dir)
            .and_then(|()| std::fs::File::open(self.mounted.path())?.sync_all())
            .unwrap_or_else(|e| panic!("making the store's directory {} on the disk: {e}", dir.display()));
        self.inner.store_in(&dir, clock).unwrap_or_else(|| {
            panic!("the harness declares a promise to survive power cuts, but its store_in gave no store")
        })
    }

    fn block_on<F: Future>(&self, future: F) -> F::Output {
        self.inner.block_on(future)
    }

    /// A power cut under the declared model, then the store opened again in its directory: `None`
    /// when the disk could not be cut or did not come back ([`Cutting::said`] says why).
    fn reopen(&self, store: Self::Store, clock: ManualClock) -> Option<Self::Store> {
        let (n, dir) = {
            let state = lock(&self.state);
            (state.cuts.len() as u64, state.dir.clone())
        };
        let cut = self.cut(store, n);
        let ok = cut.is_ok();
        lock(&self.state).cuts.push(cut);
        if !ok {
            return None;
        }
        self.inner.store_in(&dir, clock)
    }
}
