//! Running the checker: strategies, progress, completeness and the report.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use reservation_store::rules::Rule;
use stateright::{Checker, HasDiscoveries, Model, UniformChooser};

pub use crate::action::Actor;
pub use crate::ceiling::Ceiling;
use crate::config::{Assumptions, ModelConfig};
use crate::coverage::{Coverage, Scenario};
use crate::model::ReservationModel;
use crate::model::properties::{ALWAYS, checker_name};
use crate::reduced::Reduced;

/// How the state space is searched.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Strategy {
    /// The default: breadth first when the configuration drops an assumption or the model's store
    /// transition is substituted for the specification's ([`ReservationModel::with_transition`]:
    /// a counterexample is expected, and the shortest one is wanted), depth first otherwise (the
    /// exhaustive check, as fast as it goes); a depth-first run that finds a counterexample is
    /// followed by a breadth-first one, so the trace printed is the shortest.
    Auto,
    /// Depth first, on several threads, with symmetry reduction: the exhaustive check.
    Dfs,
    /// Breadth first: shortest counterexamples (single-threaded); symmetry reduction, if asked,
    /// happens inside the model, whose steps lead to one representative of each class of states.
    Bfs,
    /// Random walks until the timeout: never exhaustive.
    Simulate,
}

impl std::str::FromStr for Strategy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(Strategy::Auto),
            "dfs" => Ok(Strategy::Dfs),
            "bfs" => Ok(Strategy::Bfs),
            "simulate" => Ok(Strategy::Simulate),
            _ => Err(format!("unknown strategy {s:?}: expected auto, dfs, bfs or simulate")),
        }
    }
}

/// How to run a check.
#[derive(Clone, Copy, Debug)]
pub struct CheckOptions {
    /// The search strategy.
    pub strategy: Strategy,
    /// Checker threads.
    pub threads: usize,
    /// The reductions: symmetry over owners, attempts and keys (depth-first and simulation;
    /// breadth first reduces inside the model instead), and, depth first with every assumption
    /// and the specification's store transition, eager steps (docs/model.md). Off, the check
    /// explores every state.
    pub symmetry: bool,
    /// The simulation's seed.
    pub seed: u64,
    /// Stop after this long; a run stopped so is reported incomplete.
    pub timeout: Option<Duration>,
    /// Stop at the first failing always-property (the counterexample searches).
    pub stop_at_failure: bool,
    /// Stop once this property has a counterexample (the tests that show a property can fail).
    pub target: Option<&'static str>,
    /// Print a progress line to stderr every this often.
    pub progress: Option<Duration>,
    /// After the check, measure the checker's ceiling beside it ([`Ceiling`]).
    pub ceiling: bool,
}

impl Default for CheckOptions {
    fn default() -> Self {
        CheckOptions {
            strategy: Strategy::Auto,
            threads: 2,
            symmetry: true,
            seed: 0,
            timeout: None,
            stop_at_failure: false,
            target: None,
            progress: None,
            ceiling: false,
        }
    }
}

/// The verdict on one always-property.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    /// The property's name.
    pub name: &'static str,
    /// Whether a counterexample was found.
    pub fails: bool,
    /// The counterexample's numbered trace.
    pub trace: Option<String>,
    /// The counterexample's length in steps.
    pub steps: Option<usize>,
    /// The counterexample, step by step (empty when the property holds).
    pub path: Vec<StepRecord>,
}

impl Verdict {
    /// The counterexample as `check` prints it: a line naming the property and the number of
    /// steps, then the numbered trace; `None` when the property holds.
    pub fn counterexample(&self) -> Option<String> {
        self.fails.then(|| {
            format!(
                "counterexample to \"{}\" ({} steps):\n{}",
                self.name,
                self.steps.unwrap_or(0),
                self.trace.as_deref().unwrap_or("")
            )
        })
    }
}

/// One step of a counterexample, for machines: what happened, by which rules, and the store and
/// the owners' latest facts after it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StepRecord {
    /// The action, in words.
    pub action: String,
    /// Who took the step: the lifeline a sequence chart draws it from ([`crate::chart`]).
    pub actor: Actor,
    /// The step as the counterexample's trace says it, its outcomes and rules with it, on one
    /// line (without the store clock it starts at, which [`StepRecord::now`] holds).
    pub said: String,
    /// The store's clock when the step was taken.
    pub now: u8,
    /// The rules that decided its store operations (none for a step without one).
    pub rules: Vec<Rule>,
    /// The store after the step.
    pub store: String,
    /// Each owner's latest fact after the step.
    pub facts: String,
}

/// What a check found.
#[derive(Clone, Debug)]
pub struct CheckReport {
    /// The configuration checked.
    pub config: ModelConfig,
    /// Whether the model's store transition was the specification's: false when a test
    /// substituted one ([`ReservationModel::with_transition`]).
    pub specification: bool,
    /// How it was checked.
    pub options: CheckOptions,
    /// Unique states (representatives, with symmetry reduction).
    pub unique_states: usize,
    /// States generated, repeats included.
    pub total_states: usize,
    /// The deepest path explored.
    pub max_depth: usize,
    /// Wall time.
    pub seconds: f64,
    /// Whether every reachable state was visited, or the run stopped at the failure it was asked
    /// to stop at: a run cut short by the timeout is never complete, nor is a simulation that
    /// found no failure.
    pub complete: bool,
    /// One verdict per always-property.
    pub verdicts: Vec<Verdict>,
    /// The rules and scenarios the run reached.
    pub coverage: Coverage,
    /// Processor time the check used (every thread), where the system reports it.
    pub cpu_seconds: Option<f64>,
    /// The process's peak resident memory once the check ended, in bytes, where the system
    /// reports it.
    pub peak_memory: Option<u64>,
    /// The checker's ceiling, measured after the check when [`CheckOptions::ceiling`] asks.
    pub ceiling: Option<Ceiling>,
}

impl CheckReport {
    /// Unique states per second.
    pub fn states_per_second(&self) -> f64 {
        if self.seconds > 0.0 { self.unique_states as f64 / self.seconds } else { 0.0 }
    }

    /// Generated states (repeats included) per second.
    pub fn generated_per_second(&self) -> f64 {
        if self.seconds > 0.0 { self.total_states as f64 / self.seconds } else { 0.0 }
    }

    /// Generated states per processor second, where the system reports processor time.
    pub fn generated_per_cpu_second(&self) -> Option<f64> {
        self.cpu_seconds.filter(|c| *c > 0.0).map(|c| self.total_states as f64 / c)
    }

    /// The check's generated states per processor second over the ceiling's, when the ceiling
    /// was measured (per second of wall time where processor time is not reported): a ratio that
    /// other processes' load does not move.
    pub fn ratio_to_ceiling(&self) -> Option<f64> {
        let c = self.ceiling?;
        let (mine, theirs) = match (self.generated_per_cpu_second(), c.generated_per_cpu_second()) {
            (Some(m), Some(t)) => (m, t),
            _ => (self.generated_per_second(), c.generated_per_second()),
        };
        (theirs > 0.0).then(|| mine / theirs)
    }

    /// The always-properties that failed.
    pub fn failures(&self) -> Vec<&Verdict> {
        self.verdicts.iter().filter(|v| v.fails).collect()
    }

    /// The verdict on the property `name`.
    pub fn verdict(&self, name: &str) -> Option<&Verdict> {
        self.verdicts.iter().find(|v| v.name == name)
    }

    /// The rules of the tables never reached.
    pub fn unreached_rules(&self) -> Vec<Rule> {
        self.coverage.unreached_rules()
    }

    /// The scenarios never reached.
    pub fn unreached_scenarios(&self) -> Vec<Scenario> {
        self.coverage.unreached_scenarios()
    }

    /// Whether every always-property holds on a complete run.
    pub fn holds(&self) -> bool {
        self.complete && self.failures().is_empty()
    }

    /// The reductions the check searched with, in a few words.
    fn reductions(&self) -> &'static str {
        let o = &self.options;
        match (o.symmetry, o.strategy) {
            (false, _) => "off",
            (true, Strategy::Bfs) => "on (in the model: breadth first ignores the checker's)",
            (true, Strategy::Dfs | Strategy::Auto)
                if self.config.assumptions == Assumptions::ALL && self.specification =>
            {
                "on, with eager steps"
            }
            (true, _) => "on",
        }
    }

    /// The report as text.
    pub fn text(&self) -> String {
        let mut out = String::new();
        let o = &self.options;
        let _ = writeln!(out, "configuration: {}", self.config);
        if !self.specification {
            let _ = writeln!(out, "store transition: a substitute for the specification's");
        }
        let _ = writeln!(out, "strategy: {:?}, threads {}, symmetry {}", o.strategy, o.threads, self.reductions());
        let _ = writeln!(out, "unique states: {}", self.unique_states);
        let _ = writeln!(out, "total states: {}", self.total_states);
        let _ = writeln!(out, "depth: {}", self.max_depth);
        let _ = writeln!(out, "seconds: {:.2}", self.seconds);
        let _ = writeln!(out, "states per second: {:.0}", self.states_per_second());
        let _ = writeln!(out, "generated states per second: {:.0}", self.generated_per_second());
        if let Some(bytes) = self.peak_memory {
            let _ = writeln!(out, "peak memory: {} MB", bytes / (1024 * 1024));
        }
        if let Some(cpu) = self.cpu_seconds {
            let _ = writeln!(out, "processor seconds: {cpu:.2}");
        }
        if let (Some(c), Some(ratio)) = (self.ceiling, self.ratio_to_ceiling()) {
            let _ = writeln!(
                out,
                "ceiling (a trivial model, {} unique states, {} generated, {:.2} s, {:.2} processor s): {:.0} generated states per processor second; ratio {:.2}",
                c.unique_states,
                c.total_states,
                c.seconds,
                c.cpu_seconds.unwrap_or(0.0),
                c.generated_per_cpu_second().unwrap_or_else(|| c.generated_per_second()),
                ratio
            );
        }
        let _ = writeln!(out, "complete: {}", if self.complete { "yes" } else { "NO (stopped early)" });
        let _ = writeln!(out, "properties:");
        for v in &self.verdicts {
            let verdict = match (v.fails, self.complete) {
                (true, _) => "FAILS",
                (false, true) => "holds",
                (false, false) => "unknown (run incomplete)",
            };
            let _ = writeln!(out, "  always {}: {verdict}", v.name);
        }
        let rules = self.coverage.rules().len();
        let _ = writeln!(out, "coverage: {rules} of {} rules reached", Rule::TRANSITIONS.len());
        for s in Scenario::ALL {
            let reached = if self.coverage.reached(s) { "reached" } else { "NOT reached" };
            let _ = writeln!(out, "  sometimes {}: {reached}", s.text());
        }
        let unreached: Vec<&str> = self.unreached_rules().iter().map(|r| r.id()).collect();
        let _ = writeln!(
            out,
            "unreached rule ids: {}",
            if unreached.is_empty() { "none".to_string() } else { unreached.join(" ") }
        );
        for counterexample in self.failures().iter().filter_map(|v| v.counterexample()) {
            let _ = writeln!(out, "\n{counterexample}");
        }
        out
    }

    /// The final figures as one JSON object.
    pub fn json(&self) -> String {
        let failed: Vec<String> = self.failures().iter().map(|v| json_string(v.name)).collect();
        let unreached: Vec<String> = self.unreached_rules().iter().map(|r| json_string(r.id())).collect();
        let scenarios: Vec<String> = self.unreached_scenarios().iter().map(|s| json_string(s.text())).collect();
        let c = &self.config;
        let dropped: Vec<String> = c.assumptions.dropped().iter().map(|a| json_string(a.id())).collect();
        format!(
            concat!(
                "{{\"owners\":{},\"attempts\":{},\"keys\":{},\"horizon\":{},\"ttl\":{},\"skew\":{},",
                "\"dropped_assumptions\":[{}],\"strategy\":\"{:?}\",\"threads\":{},\"symmetry\":{},",
                "\"unique_states\":{},\"total_states\":{},\"depth\":{},\"seconds\":{:.3},",
                "\"states_per_second\":{:.0},\"generated_per_second\":{:.0},\"cpu_seconds\":{},\"peak_memory_mb\":{},",
                "\"ceiling_unique_states\":{},\"ceiling_total_states\":{},\"ceiling_generated_per_cpu_second\":{},\"ratio_to_ceiling\":{},\"complete\":{},\"holds\":{},\"failed\":[{}],\"unreached_rules\":[{}],\"unreached_scenarios\":[{}],",
                "\"counterexamples\":[{}]}}"
            ),
            c.owners,
            c.attempts,
            c.keys,
            c.horizon,
            c.ttl,
            c.skew,
            dropped.join(","),
            self.options.strategy,
            self.options.threads,
            self.options.symmetry,
            self.unique_states,
            self.total_states,
            self.max_depth,
            self.seconds,
            self.states_per_second(),
            self.generated_per_second(),
            self.cpu_seconds.map_or("null".to_string(), |c| format!("{c:.2}")),
            self.peak_memory.map_or("null".to_string(), |b| (b / (1024 * 1024)).to_string()),
            self.ceiling.map_or("null".to_string(), |c| c.unique_states.to_string()),
            self.ceiling.map_or("null".to_string(), |c| c.total_states.to_string()),
            self.ceiling.and_then(|c| c.generated_per_cpu_second()).map_or("null".to_string(), |g| format!("{g:.0}")),
            self.ratio_to_ceiling().map_or("null".to_string(), |r| format!("{r:.3}")),
            self.complete,
            self.holds(),
            failed.join(","),
            unreached.join(","),
            scenarios.join(","),
            self.failures().iter().map(|v| counterexample_json(v)).collect::<Vec<_>>().join(",")
        )
    }
}

fn counterexample_json(v: &Verdict) -> String {
    let steps: Vec<String> = v
        .path
        .iter()
        .map(|st| {
            let rules: Vec<String> = st.rules.iter().map(|r| json_string(r.id())).collect();
            format!(
                "{{\"action\":{},\"rules\":[{}],\"store\":{},\"facts\":{}}}",
                json_string(&st.action),
                rules.join(","),
                json_string(&st.store),
                json_string(&st.facts)
            )
        })
        .collect();
    format!("{{\"property\":{},\"steps\":[{}]}}", json_string(v.name), steps.join(","))
}

fn json_string(s: &str) -> String {
    let mut out = String::from("\"");
    for ch in s.chars() {
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Checks the model of `config`, whose store transition is the specification's: [`check_model`]
/// of [`ReservationModel::new`]. The configuration must be valid ([`ModelConfig::validate`]).
pub fn check(config: ModelConfig, options: CheckOptions) -> CheckReport {
    check_model(ReservationModel::new(config), options)
}

/// Checks `model`, whatever its store transition ([`ReservationModel::with_transition`]). Its
/// configuration must be valid ([`ModelConfig::validate`]). Each search starts afresh from the
/// model's configuration and transition: nothing another search of it reached is counted.
pub fn check_model(model: ReservationModel, options: CheckOptions) -> CheckReport {
    if options.strategy != Strategy::Auto {
        return check_with(&model, options);
    }
    let bfs = CheckOptions { strategy: Strategy::Bfs, threads: 1, stop_at_failure: true, ..options };
    if !model.config.assumptions.dropped().is_empty() || !model.transition_is_spec() {
        return check_with(&model, bfs);
    }
    let dfs = check_with(&model, CheckOptions { strategy: Strategy::Dfs, ..options });
    if dfs.failures().is_empty() || options.target.is_some() {
        return dfs;
    }
    // Depth first found a counterexample, by a long way round: find the shortest one.
    let shortest = check_with(&model, bfs);
    if shortest.failures().is_empty() { dfs } else { shortest }
}

fn check_with(model: &ReservationModel, options: CheckOptions) -> CheckReport {
    let config = model.config;
    // Breadth first ignores the checker's symmetry reduction: reduce inside the model instead.
    let bfs_reduced = options.symmetry && options.strategy == Strategy::Bfs;
    let search = Reduced::new(model);
    let search = if bfs_reduced { search.quotient() } else { search };
    let search = if options.symmetry { search.skipping_symmetric_actions() } else { search };
    let depth_first = matches!(options.strategy, Strategy::Dfs | Strategy::Auto);
    let search = if options.symmetry && depth_first { search.taking_eager_steps() } else { search };
    // Depth first, the search leaves out successors it handed the checker a moment ago.
    let search = if depth_first { search.skipping_recent_repeats() } else { search };
    let mut builder = search.checker().threads(options.threads.max(1));
    if options.symmetry && options.strategy != Strategy::Bfs {
        builder = builder.symmetry();
    }
    if let Some(name) = options.target {
        builder = builder.finish_when(HasDiscoveries::AnyOf([checker_name(name)].into_iter().collect()));
    } else if options.stop_at_failure {
        builder = builder.finish_when(HasDiscoveries::AnyFailures);
    }
    // Simulation never ends by itself.
    let timeout = match (options.strategy, options.timeout) {
        (Strategy::Simulate, None) => Some(Duration::from_secs(10)),
        (_, t) => t,
    };
    if let Some(t) = timeout {
        builder = builder.timeout(t);
    }
    let start = Instant::now();
    let cpu = crate::ceiling::cpu_seconds();
    match options.strategy {
        Strategy::Dfs | Strategy::Auto => finish(builder.spawn_dfs(), config, options, timeout, (start, cpu)),
        Strategy::Bfs => finish(builder.spawn_bfs(), config, options, timeout, (start, cpu)),
        Strategy::Simulate => {
            finish(builder.spawn_simulation(options.seed, UniformChooser), config, options, timeout, (start, cpu))
        }
    }
}

fn finish<C: Checker<Reduced>>(
    checker: C,
    config: ModelConfig,
    options: CheckOptions,
    timeout: Option<Duration>,
    (start, cpu_at_start): (Instant, Option<f64>),
) -> CheckReport {
    if let Some(every) = options.progress {
        print_progress(&checker, every, start);
    }
    let checker = checker.join();
    let elapsed = start.elapsed();
    // The threads have ended: the repeats left out are counted, and `next_state` is the model's
    // again before the paths are replayed.
    let repeats = usize::try_from(checker.model().end_search()).unwrap_or(usize::MAX);
    let cpu_seconds = crate::ceiling::cpu_seconds().zip(cpu_at_start).map(|(end, start)| end - start);
    let search = checker.model();
    let model = search.protocol();
    let discoveries = checker.discoveries();
    let failed = match options.target {
        Some(name) => discoveries.contains_key(checker_name(name)),
        None => options.stop_at_failure && ALWAYS.iter().any(|p| discoveries.contains_key(checker_name(p))),
    };
    // stateright marks a run stopped by its timeout as done: judge completeness here. A run that
    // may have hit its timeout is incomplete, and so is every simulation (never exhaustive),
    // unless it stopped at a failure it was asked to stop at.
    let timed_out = timeout.is_some_and(|t| elapsed + Duration::from_millis(100) >= t);
    let complete = match options.strategy {
        Strategy::Simulate => failed,
        _ => !timed_out || failed,
    };
    let specification = model.transition_is_spec();
    let start_state = model.initial_state();
    let verdicts = ALWAYS
        .into_iter()
        .map(|name| {
            let path = discoveries.get(checker_name(name));
            let actions = path.and_then(|path| search.concrete_path(&path.clone().into_actions()));
            Verdict {
                name,
                fails: path.is_some(),
                steps: actions.as_ref().map(Vec::len),
                path: actions.as_deref().map(|a| records(model, &start_state, a)).unwrap_or_default(),
                trace: actions.map(|a| model.trace_text(&start_state, &a)),
            }
        })
        .collect();
    let peak_memory = crate::ceiling::peak_memory();
    let unique_states = checker.unique_state_count();
    let total_states = checker.state_count().saturating_add(repeats);
    let (max_depth, coverage) = (checker.max_depth(), model.coverage());
    // The visited set goes before the ceiling's run, which builds one as large.
    drop(checker);
    let ceiling = options.ceiling.then(|| {
        let symmetry = options.symmetry && options.strategy != Strategy::Bfs;
        crate::ceiling::measure(unique_states, options.threads, symmetry)
    });
    CheckReport {
        config,
        specification,
        options,
        unique_states,
        total_states,
        max_depth,
        seconds: elapsed.as_secs_f64(),
        complete,
        verdicts,
        coverage,
        cpu_seconds,
        peak_memory,
        ceiling,
    }
}

/// Prints a progress line to stderr every `every` until the search of `checker`, started at
/// `start`, is done.
fn print_progress<C: Checker<Reduced>>(checker: &C, every: Duration, start: Instant) {
    let mut last = Instant::now();
    let mut last_states = 0usize;
    while !checker.is_done() {
        std::thread::sleep(Duration::from_millis(50));
        if last.elapsed() >= every {
            let states = checker.unique_state_count();
            let rate = (states.saturating_sub(last_states)) as f64 / last.elapsed().as_secs_f64();
            eprintln!(
                "progress: {states} unique states, {} total, {rate:.0} states/s, depth {}, {:.0} s",
                checker.state_count().saturating_add(checker.model().repeats_so_far()),
                checker.max_depth(),
                start.elapsed().as_secs_f64()
            );
            last = Instant::now();
            last_states = states;
        }
    }
}

/// The steps of `actions` from `start`, for machines.
pub(crate) fn records(
    model: &ReservationModel,
    start: &crate::state::State,
    actions: &[crate::action::Action],
) -> Vec<StepRecord> {
    let mut out = Vec::with_capacity(actions.len());
    let mut s = *start;
    for &action in actions {
        let Some((next, reports)) = model.step(&s, action) else { break };
        let said = model.step_text(&s, action).map(|(_, lines)| lines).unwrap_or_default();
        let said = said.lines().next().unwrap_or_default();
        out.push(StepRecord {
            action: crate::trace::action_text(&action),
            actor: Actor::of(&action),
            said: said.split_once("] ").map_or(said, |(_, what)| what).to_owned(),
            now: s.now,
            rules: reports.iter().flatten().map(|r| r.rule).collect(),
            store: crate::trace::store_text(&next),
            facts: crate::trace::facts_text(&next),
        });
        s = next;
    }
    out
}
