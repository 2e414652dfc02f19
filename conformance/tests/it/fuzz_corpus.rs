//! Replays the committed fuzz corpus and crash inputs of the `ops`, `sqlite` and `inputs` targets
//! (`fuzz/corpus/<target>/`, `fuzz/regressions/<target>/`) through the same oracle, decoding each
//! file exactly as `fuzz_target!` does, so every `cargo test` reruns what the fuzzer found.

use std::fs;
use std::path::{Path, PathBuf};

use arbitrary::{Arbitrary, Unstructured};
use reservation_conformance::ops::Op;
use reservation_conformance::{Failure, MemoryHarness, oracle};

#[path = "../../../fuzz/harness/sqlite.rs"]
mod sqlite_harness;

/// Every input file of `target`: (path, bytes, whether it is a corpus entry rather than a
/// regression). Hidden files such as `.gitkeep` are skipped.
fn files(target: &str) -> Vec<(PathBuf, Vec<u8>, bool)> {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz");
    let mut out = Vec::new();
    for (dir, is_corpus) in [("corpus", true), ("regressions", false)] {
        let Ok(entries) = fs::read_dir(fuzz.join(dir).join(target)) else { continue };
        let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
        paths.sort();
        for path in paths {
            let hidden = path.file_name().and_then(|n| n.to_str()).is_none_or(|n| n.starts_with('.'));
            if path.is_file() && !hidden {
                let bytes = fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                out.push((path, bytes, is_corpus));
            }
        }
    }
    out
}

/// Decodes each input of `target` as `fuzz_target!` does (inputs shorter than the type's minimum
/// size or that fail to decode are skipped, as the fuzzer skips them) and runs `check` on it.
/// Fails on the first failure, and when the corpus holds no decodable input at all.
fn replay<T: for<'a> Arbitrary<'a>>(target: &str, check: impl Fn(&T) -> Result<(), Failure>) {
    let (mut corpus, mut regressions) = (0, 0);
    for (path, bytes, is_corpus) in files(target) {
        if bytes.len() < T::size_hint(0).0 {
            continue;
        }
        let Ok(input) = T::arbitrary_take_rest(Unstructured::new(&bytes)) else { continue };
        if let Err(failure) = check(&input) {
            panic!("fuzz input {} fails:\n{failure}", path.display());
        }
        if is_corpus { corpus += 1 } else { regressions += 1 }
    }
    assert!(corpus > 0, "no decodable input in fuzz/corpus/{target}: the corpus is missing or empty");
    eprintln!("{target}: replayed {corpus} corpus inputs and {regressions} regressions");
}

#[test]
fn ops_corpus_replays_clean() {
    replay::<Vec<Op>>("ops", |script| oracle::ops(&MemoryHarness, script).map(drop));
}

#[test]
fn inputs_corpus_replays_clean() {
    replay::<oracle::RawInput>("inputs", |input| oracle::inputs(&MemoryHarness, input));
}

#[test]
fn sqlite_corpus_replays_clean() {
    let harness = sqlite_harness::harness();
    replay::<Vec<Op>>("sqlite", |script| oracle::ops(&harness, script).map(drop));
}
