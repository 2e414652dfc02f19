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

/// The chart of the counterexample `steps` to `property`.
fn chart(config: &ModelConfig, property: &str, steps: &[StepRecord]) -> String {
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
