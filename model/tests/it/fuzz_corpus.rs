//! Replays the committed fuzz corpus and crash inputs of the `model` target
//! (`fuzz/corpus/model/`, `fuzz/regressions/model/`) as random walks of `ModelConfig::fuzz()`, as
//! the target runs them (its input is the raw bytes), so every `cargo test` reruns them.

use std::fs;
use std::path::Path;

use reservation_model::ModelConfig;

#[test]
fn model_corpus_replays_clean() {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz");
    let config = ModelConfig::fuzz();
    let (mut corpus, mut steps) = (0, 0);
    for dir in ["corpus", "regressions"] {
        let Ok(entries) = fs::read_dir(fuzz.join(dir).join("model")) else { continue };
        for path in entries.filter_map(|e| e.ok().map(|e| e.path())) {
            if !path.is_file() || path.file_name().and_then(|n| n.to_str()).is_none_or(|n| n.starts_with('.')) {
                continue;
            }
            let choices = fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            match reservation_model::walk(&config, &choices) {
                Ok(report) => steps += report.steps,
                Err(violation) => panic!("fuzz input {} fails:\n{violation}", path.display()),
            }
            corpus += usize::from(dir == "corpus");
        }
    }
    assert!(corpus > 0, "no input in fuzz/corpus/model: the corpus is missing or empty");
    assert!(steps > 0, "the model corpus walked no step at all");
    eprintln!("model: replayed {corpus} corpus inputs, {steps} steps");
}
