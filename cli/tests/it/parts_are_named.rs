//! Every summary of what the suite checks names each of its parts, from the suite's list of
//! checks as data (`reservation_conformance::CHECKS`, `Part`): `reservation conform --help`
//! (made from that list when the program runs), the crate's README and the project's README. The
//! guard runs the same function over a summary with a part left out, to show that it says so.

use reservation_conformance::{CHECKS, Part};

use crate::reservation;

/// The parts of the suite that `summary` does not name (by [`Part::name`]), each said once.
fn unnamed(summary: &str) -> Vec<&'static str> {
    let summary = summary.split_whitespace().collect::<Vec<_>>().join(" ").to_lowercase();
    Part::ALL.iter().map(|p| p.name()).filter(|name| !summary.contains(name)).collect()
}

#[test]
fn every_summary_of_the_suite_names_each_of_its_parts() {
    let help = reservation(&["conform", "--help"]);
    let help = String::from_utf8_lossy(&help.stdout).into_owned();
    let readme = include_str!("../../../README.md");
    let crate_readme = include_str!("../../../conformance/README.md");
    for (what, summary) in
        [("conform --help", help.as_str()), ("README.md", readme), ("conformance/README.md", crate_readme)]
    {
        assert_eq!(unnamed(summary), Vec::<&str>::new(), "{what} does not name these parts of the suite");
    }
    // The help counts each part's checks, from the list.
    for part in Part::ALL {
        let checks = CHECKS.iter().filter(|c| c.part == part).count();
        assert!(checks > 0, "{part:?} has no check");
        let s = if checks == 1 { "" } else { "s" };
        assert!(help.contains(&format!("{} ({checks} check{s})", part.name())), "{part:?}:\n{help}");
    }
    // The guard can fail: a summary with a part left out.
    let without = crate_readme.replace(Part::Crashes.name(), "a check of its own");
    assert_eq!(unnamed(&without), vec![Part::Crashes.name()]);
}
