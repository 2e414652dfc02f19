//! The recipes a crash run drives its keys through: together they leave rows in every state a
//! row can hold.

use reservation_store::{Operation, ReleaseVersion, Ttl, Version};

use super::{LONG, SHORT};
use crate::history::Call;

/// Owners, by index: alice and bob.
pub(super) const A: u8 = 0;
pub(super) const B: u8 = 1;

/// One step of a recipe: an operation, with its time to live or version as numbers.
#[derive(Clone, Copy, Debug)]
pub(super) enum Step {
    Reserve(u8, u8, u64),
    Confirm(u8, u64),
    Release(u8, Option<u64>),
    Abandon(u8, u8),
}

impl Step {
    pub(super) fn call(self) -> Call {
        let ttl = |ms| Ttl::from_millis(ms).expect("the recipes' times to live are not zero");
        Call::Op(match self {
            Step::Reserve(owner, hold, ms) => Operation::Reserve { owner, hold, ttl: ttl(ms) },
            Step::Confirm(owner, v) => Operation::Confirm { owner, version: Version::from_u64(v) },
            Step::Release(owner, v) => Operation::Release {
                owner,
                version: v.map_or(ReleaseVersion::Any, |v| ReleaseVersion::At(Version::from_u64(v))),
            },
            Step::Abandon(owner, hold) => Operation::Abandon { owner, hold },
        })
    }
}

/// A recipe: what it drives a key to, and its steps, each with the phase (0 to 3) it runs in.
pub(super) type Recipe = (&'static str, &'static [(u8, Step)]);

/// The recipes every round drives a fresh key through, one key each: together they leave rows in
/// every state a row can hold, each made by the operations recovery bugs get wrong.
pub const RECIPE_NAMES: [&str; 14] = {
    let mut names = [""; 14];
    let mut i = 0;
    while i < RECIPES.len() {
        names[i] = RECIPES[i].0;
        i += 1;
    }
    names
};

pub(super) const RECIPES: [Recipe; 14] = [
    (
        "pending with three holds, its expiry moved by two joins",
        &[(0, Step::Reserve(A, 0, 25)), (1, Step::Reserve(A, 1, 30)), (2, Step::Reserve(A, 2, 30))],
    ),
    ("pending, expired", &[(0, Step::Reserve(A, 0, SHORT))]),
    ("expired, then taken afresh by another owner", &[(0, Step::Reserve(A, 0, SHORT)), (2, Step::Reserve(B, 1, LONG))]),
    ("expired, then confirmed by another owner", &[(0, Step::Reserve(B, 0, SHORT)), (2, Step::Confirm(A, 1))]),
    ("confirmed, then raised", &[(0, Step::Confirm(A, 1)), (1, Step::Confirm(A, 3))]),
    (
        "confirmed over its pending, then confirmed lower (AlreadyConfirmed)",
        &[(0, Step::Reserve(A, 0, LONG)), (1, Step::Confirm(A, 3)), (2, Step::Confirm(A, 2))],
    ),
    ("confirmed, then released", &[(0, Step::Confirm(A, 1)), (1, Step::Release(A, Some(1)))]),
    (
        "confirmed, raised, then an older fact's release (Kept)",
        &[(0, Step::Confirm(A, 1)), (1, Step::Confirm(A, 3)), (2, Step::Release(A, Some(2)))],
    ),
    (
        "released with ANY, then confirmed again lower",
        &[(0, Step::Confirm(A, 2)), (1, Step::Release(A, None)), (2, Step::Confirm(A, 1))],
    ),
    (
        "one hold of two abandoned",
        &[(0, Step::Reserve(A, 0, LONG)), (1, Step::Reserve(A, 1, LONG)), (2, Step::Abandon(A, 0))],
    ),
    ("the last hold abandoned", &[(0, Step::Reserve(A, 0, LONG)), (1, Step::Abandon(A, 0))]),
    (
        "pending with two holds, released",
        &[(0, Step::Reserve(A, 0, LONG)), (1, Step::Reserve(A, 1, LONG)), (2, Step::Release(A, Some(1)))],
    ),
    (
        "confirmed, then conflicts that change nothing",
        &[
            (0, Step::Confirm(A, 2)),
            (1, Step::Reserve(B, 0, LONG)),
            (2, Step::Confirm(B, 5)),
            (3, Step::Release(B, None)),
        ],
    ),
    (
        "pending, joined, then confirmed",
        &[(0, Step::Reserve(A, 0, LONG)), (1, Step::Reserve(A, 1, LONG)), (3, Step::Confirm(A, 1))],
    ),
];
