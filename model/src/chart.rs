//! A counterexample as a sequence chart, one SVG document (`reservation check --report DIR`):
//! each owner and each owner's subscription a lifeline, the store the last; every step of the
//! counterexample a row, numbered as its trace numbers it: a step that calls the store an arrow
//! from its actor to the store, labelled with the operation, its outcome and the rule that
//! decided it; a step that does not (an append, a crash, a fact that gives a key up, a restart) a
//! note on its actor's lifeline; a tick of the store's clock a note on the store's. Beside each
//! step, where they change, the store after it and each owner's latest fact; at the end, the
//! property the last state breaks.

use std::fmt::Write as _;

use crate::action::Actor;
use crate::check::{StepRecord, Verdict};
use crate::config::ModelConfig;

/// The width of a lifeline's column.
const COLUMN: usize = 150;
/// The left margin, where the steps' numbers go.
const LEFT: usize = 44;
/// The top of the first step's row.
const TOP: usize = 96;
/// The height of a step's row.
const ROW: usize = 46;
/// The width of the column of states, right of the store.
const STATES: usize = 620;

/// `text` made safe for XML's text and attributes.
fn xml(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            c if (c as u32) < 0x20 && c != '\n' && c != '\t' => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// The lifelines of a chart of `owners` owners: each owner, then its subscription; the store.
fn lifelines(owners: u8) -> Vec<String> {
    let mut names: Vec<String> =
        (0..owners).flat_map(|o| [format!("owner {o}"), format!("subscription {o}")]).collect();
    names.push("store".to_owned());
    names
}

/// The middle of column `column`.
fn middle(column: usize) -> usize {
    LEFT + column * COLUMN + COLUMN / 2
}

/// The column of `actor`'s lifeline, for a chart of `owners` owners.
fn column(actor: Actor, owners: u8) -> usize {
    match actor {
        Actor::Clock => usize::from(owners) * 2,
        Actor::Owner(o) => usize::from(o) * 2,
        Actor::Subscription(o) => usize::from(o) * 2 + 1,
    }
}

/// The sequence chart of `verdict`'s counterexample in the model of `config`, as one SVG
/// document; `None` when the property holds.
pub fn sequence_chart(config: &ModelConfig, verdict: &Verdict) -> Option<String> {
    verdict.fails.then(|| chart(config, verdict.name, &verdict.path))
}

/// The sequence chart of the counterexample `steps` to `property` in the model of `config`
/// (a check's [`Verdict::path`], a swarm's walk's [`crate::Violation::steps`]), as one SVG
/// document.
pub fn chart(config: &ModelConfig, property: &str, steps: &[StepRecord]) -> String {
    let names = lifelines(config.owners);
    let store = middle(names.len() - 1);
    let states = LEFT + names.len() * COLUMN + 12;
    let width = states + STATES;
    let end = TOP + steps.len() * ROW;
    let height = end + 70;
    let mut svg = String::new();
    let _ = write!(
        svg,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" \
         viewBox=\"0 0 {width} {height}\" font-family=\"ui-monospace, monospace\" font-size=\"11\">\n\
         <title>{title}</title>\n\
         <defs><marker id=\"arrow\" viewBox=\"0 0 10 10\" refX=\"10\" refY=\"5\" markerWidth=\"7\" markerHeight=\"7\" \
         orient=\"auto-start-reverse\"><path d=\"M 0 0 L 10 5 L 0 10 z\" fill=\"#2d3748\"/></marker></defs>\n\
         <rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n\
         <text x=\"{LEFT}\" y=\"22\" font-size=\"14\" font-weight=\"bold\" fill=\"#9b1c1c\">counterexample to \
         \"{property}\" ({n} steps)</text>\n<text x=\"{LEFT}\" y=\"40\" fill=\"#4a5568\">{config}</text>\n",
        title = xml(&format!("counterexample to \"{property}\"")),
        property = xml(property),
        n = steps.len(),
        config = xml(&config.to_string()),
    );
    for (i, name) in names.iter().enumerate() {
        let x = middle(i);
        let _ = writeln!(
            svg,
            "<g class=\"lifeline\"><rect x=\"{}\" y=\"52\" width=\"{}\" height=\"24\" rx=\"4\" fill=\"#edf2f7\" \
             stroke=\"#4a5568\"/><text x=\"{x}\" y=\"68\" text-anchor=\"middle\" font-weight=\"bold\">{}</text>\
             <line x1=\"{x}\" y1=\"76\" x2=\"{x}\" y2=\"{end}\" stroke=\"#a0aec0\" stroke-dasharray=\"4 3\"/></g>",
            x - COLUMN / 2 + 8,
            COLUMN - 16,
            xml(name)
        );
    }
    let _ = writeln!(
        svg,
        "<text x=\"{states}\" y=\"68\" font-weight=\"bold\" fill=\"#4a5568\">the store, and each owner's latest fact, \
         where they change</text>"
    );
    let (mut store_before, mut facts_before) = (String::new(), String::new());
    for (i, step) in steps.iter().enumerate() {
        let y = TOP + i * ROW + ROW / 2;
        let _ = write!(svg, "<g class=\"step\" data-step=\"{}\">", i + 1);
        let _ = write!(svg, "<text x=\"6\" y=\"{}\" fill=\"#718096\">{:>3}. t={}</text>", y + 4, i + 1, step.now);
        let x = middle(column(step.actor, config.owners));
        // The lifeline names the actor: the label leaves it out.
        let said = match step.actor {
            Actor::Owner(o) => step.said.strip_prefix(&format!("owner {o} ")),
            Actor::Subscription(o) => step.said.strip_prefix(&format!("subscription of owner {o}: ")),
            Actor::Clock => None,
        };
        let said = xml(said.unwrap_or(&step.said));
        if step.actor != Actor::Clock && !step.rules.is_empty() {
            let _ = write!(
                svg,
                "<line class=\"call\" x1=\"{x}\" y1=\"{y}\" x2=\"{store}\" y2=\"{y}\" stroke=\"#2d3748\" \
                 stroke-width=\"1.5\" marker-end=\"url(#arrow)\"/><text x=\"{}\" y=\"{}\">{said}</text>",
                x + 6,
                y - 5
            );
        } else {
            let crash = step.said.contains("crashes");
            let fill = if crash { "#fed7d7" } else { "#fefcbf" };
            let _ = write!(
                svg,
                "<rect class=\"note\" x=\"{}\" y=\"{}\" width=\"12\" height=\"12\" fill=\"{fill}\" stroke=\"#744210\"/>\
                 <text x=\"{}\" y=\"{}\">{said}</text>",
                x - 6,
                y - 6,
                x + 10,
                y - 5
            );
        }
        if step.store != store_before {
            let _ =
                write!(svg, "<text x=\"{states}\" y=\"{}\" fill=\"#2c5282\">store: {}</text>", y + 9, xml(&step.store));
            store_before.clone_from(&step.store);
        }
        if step.facts != facts_before {
            let _ = write!(
                svg,
                "<text x=\"{states}\" y=\"{}\" fill=\"#276749\">facts: {}</text>",
                y + 21,
                xml(&step.facts)
            );
            facts_before.clone_from(&step.facts);
        }
        svg.push_str("</g>\n");
    }
    let _ = write!(
        svg,
        "<g class=\"violation\"><rect x=\"{LEFT}\" y=\"{}\" width=\"{}\" height=\"30\" rx=\"4\" fill=\"#fff5f5\" \
         stroke=\"#9b1c1c\"/><text x=\"{}\" y=\"{}\" font-size=\"13\" font-weight=\"bold\" fill=\"#9b1c1c\">after step \
         {}, the state breaks: {}</text></g>\n</svg>\n",
        end + 14,
        width - LEFT - 12,
        LEFT + 10,
        end + 34,
        steps.len(),
        xml(property)
    );
    svg
}

/// A file name for the chart of `property`: its first words, in lower case, joined by `-`.
pub fn file_name(property: &str) -> String {
    let words: Vec<String> = property
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .take(8)
        .map(str::to_ascii_lowercase)
        .collect();
    format!("{}.svg", words.join("-"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::{CheckOptions, check};
    use crate::config::Assumption;

    /// A counterexample of the model without `dropped`, two owners: its verdict.
    fn counterexample(dropped: Assumption) -> (ModelConfig, Verdict) {
        let config = ModelConfig { owners: 2, ..ModelConfig::default() }.dropping(dropped);
        let report = check(config, CheckOptions::default());
        let verdict = report.failures().first().map(|v| (*v).clone()).expect("a counterexample");
        (config, verdict)
    }

    /// A number attribute of `node`.
    fn at(node: roxmltree::Node<'_, '_>, name: &str) -> f64 {
        node.attribute(name).and_then(|v| v.parse().ok()).unwrap_or_else(|| panic!("{name} of {node:?}"))
    }

    /// Every step is drawn from its actor's lifeline: a call an arrow to the store's, in its row;
    /// anything else a note on the actor's lifeline; the store and the facts beside it where they
    /// change, right of the store; the property broken below the last step; all within the
    /// document.
    #[test]
    fn each_step_is_drawn_from_its_actors_lifeline() {
        for dropped in [Assumption::H2, Assumption::H7, Assumption::H8] {
            let (config, verdict) = counterexample(dropped);
            // The path is the counterexample's, step by step, as its trace numbers them.
            assert_eq!(Some(verdict.path.len()), verdict.steps, "{dropped:?}");
            let numbered =
                verdict.trace.as_deref().unwrap_or_default().lines().filter(|l| l.contains(". [store t=")).count();
            assert_eq!(verdict.path.len(), numbered, "{dropped:?}");
            charted(&config, verdict.name, &verdict.path);
        }
        // Three owners, a step of every actor: each owner's, each subscription's, the clock's.
        let config = ModelConfig { owners: 3, ..ModelConfig::default() };
        let step = |actor: Actor, said: &str, calls: bool, now: u8| StepRecord {
            action: said.to_owned(),
            actor,
            said: said.to_owned(),
            now,
            rules: if calls { vec![reservation_store::rules::Rule::R1] } else { Vec::new() },
            store: format!("A=free t={now}"),
            facts: if calls { "o0: no fact".to_owned() } else { format!("o0: v{now}") },
        };
        let mut steps = Vec::new();
        for o in 0..3 {
            steps.push(step(
                Actor::Owner(o),
                &format!("owner {o} attempt 0 (hold h0): reserve(A) -> Taken (R1)"),
                true,
                o,
            ));
            steps.push(step(Actor::Owner(o), &format!("owner {o} attempt 0: crashes before appending"), false, o));
            steps.push(step(Actor::Subscription(o), &format!("subscription of owner {o}: applies fact v1"), true, o));
            steps.push(step(Actor::Subscription(o), &format!("subscription of owner {o}: restarts"), false, o));
        }
        steps.push(step(Actor::Clock, "the store clock ticks to t=4", false, 3));
        charted(&config, "a property", &steps);
    }

    /// The chart of `steps`, a counterexample to `property` in the model of `config`, checked.
    fn charted(config: &ModelConfig, property: &str, steps: &[StepRecord]) {
        {
            let svg = chart(config, property, steps);
            let doc = roxmltree::Document::parse(&svg).expect("an SVG document");
            let root = doc.root_element();
            let (width, height) = (at(root, "width"), at(root, "height"));
            let class = |c: &'static str| doc.descendants().filter(move |n| n.attribute("class") == Some(c));
            let lifelines: Vec<(String, f64)> = class("lifeline")
                .map(|g| {
                    let text = g.descendants().find(|n| n.has_tag_name("text")).expect("a name");
                    let line = g.descendants().find(|n| n.has_tag_name("line")).expect("a line");
                    assert_eq!(at(line, "x1"), at(line, "x2"));
                    assert_eq!(at(text, "x"), at(line, "x1"), "the name over its line");
                    (text.text().unwrap_or_default().to_owned(), at(line, "x1"))
                })
                .collect();
            // Each lifeline's box is centred on its line, within the document, and the boxes
            // stand apart, left to right, right of the steps' numbers.
            let boxes: Vec<(f64, f64)> = class("lifeline")
                .map(|g| {
                    let rect = g.descendants().find(|n| n.has_tag_name("rect")).expect("a box");
                    (at(rect, "x"), at(rect, "width"))
                })
                .collect();
            for (i, ((x, w), (_, line))) in boxes.iter().zip(&lifelines).enumerate() {
                assert_eq!(x + w / 2.0, *line, "lifeline {i}'s box");
                assert!(*x >= 36.0 && x + w <= width, "lifeline {i}'s box within the document");
                if let Some((next, _)) = boxes.get(i + 1) {
                    assert!(x + w < *next, "lifeline {i}'s box overlaps the next");
                }
            }
            let names: Vec<&str> = lifelines.iter().map(|(n, _)| n.as_str()).collect();
            let mut expected: Vec<String> =
                (0..config.owners).flat_map(|o| [format!("owner {o}"), format!("subscription {o}")]).collect();
            expected.push("store".to_owned());
            assert_eq!(names, expected);
            let store_at = usize::from(config.owners) * 2;
            let x_of = |actor: Actor| match actor {
                Actor::Clock => lifelines[store_at].1,
                Actor::Owner(o) => lifelines[usize::from(o) * 2].1,
                Actor::Subscription(o) => lifelines[usize::from(o) * 2 + 1].1,
            };
            let store = lifelines[store_at].1;
            let store_right = boxes[store_at].0 + boxes[store_at].1;
            let rows: Vec<roxmltree::Node<'_, '_>> = class("step").collect();
            assert_eq!(rows.len(), steps.len(), "{property}");
            let mut last_y = 0.0;
            let (mut store_before, mut facts_before) = (String::new(), String::new());
            for (i, (g, step)) in rows.iter().zip(steps).enumerate() {
                assert_eq!(g.attribute("data-step"), Some((i + 1).to_string().as_str()));
                let texts: Vec<(f64, f64, String)> = g
                    .descendants()
                    .filter(|n| n.has_tag_name("text"))
                    .map(|n| (at(n, "x"), at(n, "y"), n.text().unwrap_or_default().to_owned()))
                    .collect();
                assert!(texts[0].2.ends_with(&format!("{}. t={}", i + 1, step.now)), "{texts:?}");
                let call = g.descendants().find(|n| n.attribute("class") == Some("call"));
                let y = match call {
                    Some(line) => {
                        assert!(!step.rules.is_empty() && step.actor != Actor::Clock, "{step:?}");
                        assert_eq!((at(line, "x1"), at(line, "x2")), (x_of(step.actor), store), "{step:?}");
                        assert_eq!(at(line, "y1"), at(line, "y2"));
                        at(line, "y1")
                    }
                    None => {
                        let note = g.descendants().find(|n| n.attribute("class") == Some("note")).expect("a note");
                        assert_eq!(at(note, "x") + at(note, "width") / 2.0, x_of(step.actor), "{step:?}");
                        at(note, "y") + at(note, "height") / 2.0
                    }
                };
                assert!(y > last_y && y < height, "row {i} at {y}");
                // The number, on its row, at the left.
                assert!((texts[0].1 - y).abs() <= 6.0 && texts[0].0 < lifelines[0].1, "{texts:?}");
                // The label, just above the arrow or beside the note, right of the actor.
                let label = &texts[1];
                assert!(label.0 > x_of(step.actor) && (y - label.1) > 0.0 && (y - label.1) < 12.0, "{texts:?}");
                let beside: Vec<&(f64, f64, String)> = texts.iter().filter(|t| t.0 > store + 40.0).collect();
                for (x, _, text) in &beside {
                    // The states' column starts just right of the store's box.
                    if text.starts_with("store: ") || text.starts_with("facts: ") {
                        assert!(*x > store_right && *x < store_right + 30.0, "{text} at {x}");
                    }
                }
                let says = |prefix: &str| beside.iter().find(|t| t.2.starts_with(prefix)).map(|t| (t.1, t.2.clone()));
                match says("store: ") {
                    Some((at_y, text)) => {
                        assert_ne!(step.store, store_before, "step {i}: the store drawn again unchanged");
                        assert_eq!(text, format!("store: {}", step.store));
                        assert!(at_y > y && at_y < y + 23.0);
                    }
                    None => assert_eq!(step.store, store_before, "step {i}: a change of the store not drawn"),
                }
                match says("facts: ") {
                    Some((at_y, text)) => {
                        assert_ne!(step.facts, facts_before, "step {i}: the facts drawn again unchanged");
                        assert_eq!(text, format!("facts: {}", step.facts));
                        assert!(at_y > y && at_y < y + 23.0);
                    }
                    None => assert_eq!(step.facts, facts_before, "step {i}: a change of the facts not drawn"),
                }
                store_before.clone_from(&step.store);
                facts_before.clone_from(&step.facts);
                for (x, y, _) in &texts {
                    assert!(*x >= 0.0 && *x < width && *y > 0.0 && *y < height);
                }
                last_y = y;
            }
            let end = class("violation").next().expect("the property broken");
            let rect = end.descendants().find(|n| n.has_tag_name("rect")).expect("a box");
            let said: String = end.descendants().filter(|n| n.is_text()).filter_map(|n| n.text()).collect();
            assert!(at(rect, "y") > last_y && at(rect, "y") + at(rect, "height") < height, "below the last step");
            assert!(at(rect, "x") + at(rect, "width") <= width);
            assert_eq!(said, format!("after step {}, the state breaks: {}", steps.len(), property));
            let title: String =
                doc.descendants().filter(|n| n.has_tag_name("title")).filter_map(|n| n.text()).collect();
            assert_eq!(title, format!("counterexample to \"{}\"", property));
        }
    }

    #[test]
    fn a_property_that_holds_has_no_chart_and_text_is_escaped() {
        let (config, mut verdict) = counterexample(Assumption::H8);
        verdict.fails = false;
        assert_eq!(sequence_chart(&config, &verdict), None);
        verdict.fails = true;
        verdict.name = "a <property> & \"its\" quotes\u{1}";
        let svg = sequence_chart(&config, &verdict).expect("a chart");
        let doc = roxmltree::Document::parse(&svg).expect("escaped");
        assert!(doc.descendants().filter_map(|n| n.text()).any(|t| t.contains("a <property> & \"its\" quotes ")));
        assert_eq!(xml("<a & \"b\">\t\n"), "&lt;a &amp; &quot;b&quot;&gt;\t\n");
    }

    #[test]
    fn a_charts_file_is_named_by_the_first_words_of_its_property() {
        assert_eq!(
            file_name("no two owners' latest committed facts hold the same key"),
            "no-two-owners-latest-committed-facts-hold-the.svg"
        );
        assert_eq!(file_name("A B"), "a-b.svg");
    }
}
