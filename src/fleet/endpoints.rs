//! `strata fleet --endpoints`: a handful of `strata serve` endpoints read directly, at most
//! `concurrency` at once, each within its timeout. For a few nodes: past that, Prometheus.

use super::build::Target;
use super::http::Client;
use super::{Read, Series};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// The most endpoints one fleet reads directly.
pub const MAX_ENDPOINTS: usize = 256;

/// Endpoints from `HOST:PORT,...` or a file of them (one a line or comma-separated; `#`
/// starts a comment). Each becomes `http://HOST:PORT/metrics` unless it names its scheme
/// and path.
pub fn parse_list(text: &str) -> Result<Vec<String>, String> {
    let mut out: Vec<String> = Vec::new();
    for line in text.lines() {
        let line = line.split('#').next().unwrap_or_default();
        for item in line
            .split([',', ' ', '\t'])
            .map(str::trim)
            .filter(|s| !s.is_empty())
        {
            if item.chars().any(char::is_control) {
                return Err(format!(
                    "endpoint {:?}: a control character in it",
                    crate::text::clean(item)
                ));
            }
            if !out.iter().any(|e| e == item) {
                out.push(item.to_string());
            }
        }
    }
    if out.is_empty() {
        return Err("no endpoint given (hint: --endpoints node1:9842,node2:9842)".into());
    }
    if out.len() > MAX_ENDPOINTS {
        return Err(format!(
            "{} endpoints; at most {MAX_ENDPOINTS} are read directly (hint: scrape them with Prometheus and use --prometheus URL)",
            out.len()
        ));
    }
    Ok(out)
}

/// The URL an endpoint is read at.
pub fn url_of(endpoint: &str) -> String {
    let with_scheme = if endpoint.contains("://") {
        endpoint.to_string()
    } else {
        format!("http://{endpoint}")
    };
    let after_scheme = with_scheme.split_once("://").map_or("", |(_, r)| r);
    if after_scheme.contains('/') {
        with_scheme
    } else {
        format!("{with_scheme}/metrics")
    }
}

/// Reads every endpoint: each one's target (up, or down and why) and its series.
pub fn read(client: &Client, endpoints: &[String], concurrency: usize) -> Read {
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Answer>>> = Mutex::new(vec![None; endpoints.len()]);
    std::thread::scope(|scope| {
        for _ in 0..concurrency.clamp(1, endpoints.len().max(1)) {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(endpoint) = endpoints.get(i) else {
                    break;
                };
                let got = one(client, endpoint);
                if let Ok(mut r) = results.lock() {
                    r[i] = Some(got);
                }
            });
        }
    });
    let mut read = Read::default();
    let answers = results.into_inner().unwrap_or_default();
    for (target, series) in answers.into_iter().flatten() {
        read.targets.push(target);
        read.series.extend(series);
    }
    read
}

/// One endpoint's answer: its target, and its series where it gave them.
type Answer = (Target, Vec<Series>);

fn one(client: &Client, endpoint: &str) -> Answer {
    let down = |why: String| {
        (
            Target {
                instance: endpoint.to_string(),
                up: false,
                why: Some(why),
                since_scrape: 0.0,
            },
            Vec::new(),
        )
    };
    match client.get(&url_of(endpoint)) {
        Err(why) => down(why),
        Ok((status, _)) if status != 200 => down(format!("HTTP {status}")),
        Ok((_, body)) => match super::expo::parse(&body, endpoint) {
            Err(why) => down(format!("not a metrics page: {why}")),
            Ok(series) => (
                Target {
                    instance: endpoint.to_string(),
                    up: true,
                    why: None,
                    since_scrape: 0.0,
                },
                series,
            ),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_from_a_list_or_a_file() {
        let got =
            parse_list("n1:9842, n2:9842\n# a comment\nn3:9842 # the third\nn1:9842\n").unwrap();
        assert_eq!(got, ["n1:9842", "n2:9842", "n3:9842"]);
        assert!(parse_list("# nothing\n")
            .unwrap_err()
            .contains("no endpoint"));
        let many: Vec<String> = (0..300).map(|i| format!("n{i}:1")).collect();
        assert!(parse_list(&many.join(","))
            .unwrap_err()
            .contains("--prometheus"));
        assert!(parse_list("n1:1\u{1b}[2J").unwrap_err().contains("control"));
        assert_eq!(url_of("n1:9842"), "http://n1:9842/metrics");
        assert_eq!(url_of("https://n1:9842"), "https://n1:9842/metrics");
        assert_eq!(
            url_of("http://n1/strata/metrics"),
            "http://n1/strata/metrics"
        );
        assert_eq!(url_of("10.0.0.7:9842"), "http://10.0.0.7:9842/metrics");
    }
}
