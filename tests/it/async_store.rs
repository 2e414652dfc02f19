//! The trait serves asynchronous stores as well as synchronous ones: a store whose operations
//! truly await (a stand-in for a networked database on tokio) implements [`ReservationStore`],
//! and one generic async function runs on it under tokio and on [`MemoryStore`] under
//! [`block_on`].

use std::collections::{BTreeSet, HashMap};
use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use reservation_store::spec::{self, Reservation, Step};
use reservation_store::*;
use tokio::sync::Mutex;

type Rows = HashMap<(ReservationScope, Key), StoredReservation>;

/// An asynchronous store: every operation waits for a lock and for a simulated round trip to
/// the database before it runs the spec function inside that "transaction".
struct RemoteStore {
    clock: ManualClock,
    rows: Mutex<Rows>,
}

impl RemoteStore {
    fn new(clock: ManualClock) -> Self {
        RemoteStore { clock, rows: Mutex::new(HashMap::new()) }
    }

    async fn transact<Out>(
        &self,
        scope: &ReservationScope,
        key: &Key,
        transition: impl FnOnce(Option<StoredReservation>, Instant) -> Step<AggregateRef, BTreeSet<HoldId>, Out>,
    ) -> Out {
        let mut rows = self.rows.lock().await;
        tokio::task::yield_now().await;
        let id = (scope.clone(), key.clone());
        let step = transition(rows.remove(&id), self.clock.now());
        if let Some(next) = step.next {
            rows.insert(id, next);
        }
        step.outcome
    }
}

impl ReservationStore for RemoteStore {
    async fn execute(&self, request: Request<'_>) -> StoreResult<Outcome> {
        request.admitted()?;
        Ok(self.transact(request.scope, request.key, |cur, now| spec::apply(cur, now, request.operation)).await)
    }

    async fn lookup(&self, scope: &ReservationScope, key: &Key) -> StoreResult<Option<StoredReservation>> {
        let rows = self.rows.lock().await;
        tokio::task::yield_now().await;
        let current = rows.get(&(scope.clone(), key.clone()));
        Ok(spec::lookup(current, self.clock.now()).cloned())
    }
}

/// A sign-up written once for any store: reserve the name, append the user's first fact
/// (elided here), confirm at its version. Whether the user now holds the name.
async fn sign_up<S: ReservationStore>(
    store: &S,
    scope: &ReservationScope,
    name: &Key,
    user: &AggregateRef,
) -> StoreResult<bool> {
    let attempt = HoldId::new(format!("sign-up-{}", user.id))?;
    let ttl = Ttl::from_millis(5_000)?;
    match store.reserve(scope, name, user, &attempt, ttl).await? {
        ReserveOutcome::Conflict => Ok(false),
        ReserveOutcome::Taken | ReserveOutcome::Joined | ReserveOutcome::AlreadyConfirmed => {
            let outcome = store.confirm(scope, name, user, Version::stream(1)?).await?;
            Ok(outcome != ConfirmOutcome::Conflict)
        }
    }
}

fn scope() -> ReservationScope {
    ReservationScope::parse("user", Some("acme"), "user-name").unwrap()
}

fn user(id: &str) -> AggregateRef {
    AggregateRef::parse("user", Some("acme"), id).unwrap()
}

fn clock() -> ManualClock {
    ManualClock::new(Instant::from_millis(1_000))
}

fn confirmed_to(id: &str) -> Option<StoredReservation> {
    Some(Reservation::confirmed(user(id), Version::stream(1).unwrap()))
}

#[test]
fn sign_up_on_the_synchronous_memory_store_with_block_on() {
    let store = MemoryStore::with_clock(clock());
    let name = Key::new("alice").unwrap();
    assert!(block_on(sign_up(&store, &scope(), &name, &user("u1"))).unwrap());
    assert!(!block_on(sign_up(&store, &scope(), &name, &user("u2"))).unwrap());
    assert!(block_on(sign_up(&store, &scope(), &name, &user("u1"))).unwrap(), "a retried sign-up still holds it");
    assert_eq!(block_on(store.lookup(&scope(), &name)).unwrap(), confirmed_to("u1"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sign_up_on_an_async_store_under_tokio() {
    let store = RemoteStore::new(clock());
    let name = Key::new("alice").unwrap();
    assert!(sign_up(&store, &scope(), &name, &user("u1")).await.unwrap());
    assert!(!sign_up(&store, &scope(), &name, &user("u2")).await.unwrap());
    assert_eq!(store.lookup(&scope(), &name).await.unwrap(), confirmed_to("u1"));
    let stranger = AggregateRef::parse("user", Some("globex"), "u3").unwrap();
    let error = sign_up(&store, &scope(), &name, &stranger).await.unwrap_err();
    assert_eq!(error.invalid(), Some(InvalidArgument::TenantMismatch));
    assert_eq!(store.lookup(&scope(), &name).await.unwrap(), confirmed_to("u1"));
}

/// Races eight sign-ups for one name as tokio tasks; returns who won.
async fn race_on_tokio<S: ReservationStore + Send + Sync + 'static>(store: Arc<S>) -> Vec<String> {
    let name = Key::new("popular").unwrap();
    let tasks: Vec<_> = (0..8)
        .map(|i| {
            let (store, name) = (Arc::clone(&store), name.clone());
            tokio::spawn(async move {
                let id = format!("u{i}");
                sign_up(&*store, &scope(), &name, &user(&id)).await.unwrap().then_some(id)
            })
        })
        .collect();
    let mut winners = Vec::new();
    for task in tasks {
        winners.extend(task.await.unwrap());
    }
    assert_eq!(winners.len(), 1, "{winners:?}");
    assert_eq!(store.lookup(&scope(), &name).await.unwrap(), confirmed_to(&winners[0]));
    winners
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_sign_ups_on_tokio_tasks_exactly_one_wins_on_either_store() {
    race_on_tokio(Arc::new(RemoteStore::new(clock()))).await;
    race_on_tokio(Arc::new(MemoryStore::with_clock(clock()))).await;
}

#[test]
fn async_store_operations_really_suspend() {
    let store = RemoteStore::new(clock());
    let (scope, name, u1) = (scope(), Key::new("alice").unwrap(), user("u1"));
    let mut cx = Context::from_waker(Waker::noop());
    let mut remote_future = pin!(sign_up(&store, &scope, &name, &u1));
    assert!(remote_future.as_mut().poll(&mut cx).is_pending(), "the remote store's reserve must await");
    // block_on drives it to the end all the same, with no runtime.
    assert!(block_on(remote_future).unwrap());
    let sync_store = MemoryStore::with_clock(clock());
    let ready = pin!(sync_store.lookup(&scope, &name)).poll(&mut cx);
    assert!(matches!(ready, Poll::Ready(Ok(None))), "a synchronous store's futures are ready at once");
}
