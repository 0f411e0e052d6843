//! The names a PromQL expression uses, read without a PromQL parser: the metric names
//! (`strata_*`, recording rules' `strata_*:*:*` included) and the label names it matches,
//! groups by or joins on. The dashboard's and the rule files' tests check them against what
//! `strata serve` exports.

use std::collections::BTreeSet;

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == ':'
}

/// The expression with string literals emptied (their contents are not names).
fn without_strings(expr: &str) -> String {
    let mut out = String::new();
    let mut quote = None;
    let mut escaped = false;
    for c in expr.chars() {
        match quote {
            Some(q) => {
                if escaped {
                    escaped = false;
                } else if c == '\\' {
                    escaped = true;
                } else if c == q {
                    quote = None;
                    out.push(c);
                }
            }
            None => {
                if c == '"' || c == '\'' || c == '`' {
                    quote = Some(c);
                }
                out.push(c);
            }
        }
    }
    out
}

/// Identifiers with where each starts.
fn idents(expr: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, c) in expr
        .char_indices()
        .chain(std::iter::once((expr.len(), ' ')))
    {
        match (start, is_ident(c)) {
            (None, true) if !c.is_ascii_digit() && c != '$' => start = Some(i),
            (Some(s), false) => {
                // A `$var` is a variable, not a name.
                if s == 0 || !expr[..s].ends_with('$') {
                    out.push((s, expr[s..i].to_string()));
                }
                start = None;
            }
            _ => {}
        }
    }
    out
}

/// Metric names, and label names (matched in `{}`, or listed after by/without/on/ignoring/
/// group_left/group_right, or label_values' second argument).
pub fn names(expr: &str) -> (BTreeSet<String>, BTreeSet<String>) {
    let stripped = without_strings(expr);
    let mut metrics = BTreeSet::new();
    let mut labels = BTreeSet::new();
    let tokens = idents(&stripped);
    for (i, (at, name)) in tokens.iter().enumerate() {
        let after = stripped[at + name.len()..].trim_start();
        if name.starts_with("strata_") && !after.starts_with(['=', '!']) {
            metrics.insert(name.clone());
            continue;
        }
        if ["=~", "!~", "!=", "="]
            .iter()
            .any(|op| after.starts_with(op))
            && !after.starts_with("==")
        {
            labels.insert(name.clone());
            continue;
        }
        let grouping = [
            "by",
            "without",
            "on",
            "ignoring",
            "group_left",
            "group_right",
        ];
        if grouping.contains(&name.as_str()) && after.starts_with('(') {
            let list = &after[1..after.find(')').expect("a closed list")];
            labels.extend(
                list.split(',')
                    .map(str::trim)
                    .filter(|l| !l.is_empty())
                    .map(str::to_string),
            );
        }
        if name == "label_values" {
            if let Some((_, label)) = tokens
                .get(i + 1..)
                .and_then(|rest| rest.iter().find(|(a, _)| stripped[..*a].ends_with(", ")))
            {
                labels.insert(label.clone());
            }
        }
    }
    (metrics, labels)
}
