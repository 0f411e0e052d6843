//! The PromQL of a windowed read (`model::Window`): Prometheus picks the device rows and the
//! jobs the screen shows (`topk` by the order in force, the filter as label matchers), and
//! the fleet pulls the series of those only. What it answers is sorted again by the client,
//! exactly, as a whole read is: the server's pick only decides which rows are read.

use super::build::{JOB_KINDS, JOB_LABELS};
use super::detail::promql_string;
use super::model::{Sort, Window};
use super::Series;

/// Series one a node, read for every node seen: what tells up from stale, and its name.
pub const NODE_SERIES: &str =
    "strata_node_info|strata_sample_age_seconds|strata_sample_interval_seconds";

/// Series of a device (labelled `instance` and `uuid`), read for the devices picked.
pub const DEVICE_SERIES: &str = "strata_gpu_memory_total_bytes|strata_gpu_layer_bytes|strata_mig_memory_total_bytes|strata_mig_layer_bytes|strata_device_findings|strata_oom_forecast_seconds|strata_climb_rate_bytes_per_second";

/// The names of the series a device has: its total or a layer, as the client makes a device
/// of either.
macro_rules! device_names {
    () => {
        "strata_gpu_memory_total_bytes|strata_gpu_layer_bytes|strata_mig_memory_total_bytes|strata_mig_layer_bytes"
    };
}

/// Every device, one series each labelled `instance` and `uuid` only: one that has a total
/// or a layer, as the client makes a device of either.
const DEVICES: &str = concat!(
    "group by (instance, uuid) ({__name__=~\"",
    device_names!(),
    "\"})"
);

/// The nodes seen in the last hour, evaluated once a minute (a sample stays visible for the
/// lookback after it, so every minute of the hour is covered) rather than every sample; and
/// every sample of the last five minutes, which holds a node scraped for less than a minute
/// before it went down (its staleness marker hides it from the minute steps, never from a
/// range).
pub const SEEN: &str =
    "(max_over_time(strata_node_info[1h:1m]) or max_over_time(strata_node_info[5m]))";

/// The recording rules of `assets/prometheus/strata-fleet-rules.yml` that answer what a
/// refresh asks of every node and device, and what each records. A refresh asks which of
/// them Prometheus has ([`recorded_now`]) and asks the expression itself of the others.
pub const NODE_RULES: [(&str, &str); 4] = [
    ("strata_node:info:seen_1h", "seen"),
    ("strata_node:devices:count", "count"),
    ("strata_device:fleet_urgency:score", "urgency"),
    ("strata_device:used:ratio", "used"),
];

/// The expression a rule of [`NODE_RULES`] records.
pub fn recorded_expr(what: &str) -> String {
    match what {
        "seen" => SEEN.to_string(),
        "count" => format!("count by (instance) ({DEVICES})"),
        "urgency" => urgency(),
        _ => used(),
    }
}

/// Which of [`NODE_RULES`] Prometheus has now: one series a rule's metric. The node rules
/// are asked of every node (a series a node); the device rules, of one node's devices
/// (`instance`: any node up), where every device's would be a series a device. `None` for
/// the device rules where no node is up. (Whether the jobs' spread is recorded is asked
/// apart, [`JOBS_RECORDED`].)
pub fn recorded_now(devices_of: Option<&str>) -> String {
    let (names, instance): (Vec<&str>, String) = match devices_of {
        None => (
            NODE_RULES
                .iter()
                .filter(|(name, _)| name.starts_with("strata_node:"))
                .map(|(name, _)| *name)
                .collect(),
            String::new(),
        ),
        Some(i) => (
            NODE_RULES
                .iter()
                .filter(|(name, _)| name.starts_with("strata_device:"))
                .map(|(name, _)| *name)
                .collect(),
            format!(",instance={}", promql_string(i)),
        ),
    };
    format!(
        "count by (__name__) ({{__name__=~\"{}\"{instance}}})",
        names.join("|")
    )
}

/// How many jobs the recorded spread holds (one `nodes` series a job): none where the rule
/// is not loaded. What a refresh asks to know whether to read the jobs from it, where
/// Prometheus has no [`FLEET_RULES`].
pub const JOBS_RECORDED: &str = "count(strata_job:figures:spread{stat=\"nodes\"})";

/// The fleet-wide rules of `assets/prometheus/strata-fleet-rules.yml`, a series each, and the
/// rule whose series each counts (what it answers: `seen`, `count`, `urgency`, `used`, or
/// `jobs` for the spread). They are evaluated after the rules they count, at the same
/// instant: one query of them ([`FLEET`]) tells which rules Prometheus has (a rule with no
/// series has no count) and the totals a windowed read shows, where asking the rules
/// themselves reads a series a node, device or job.
pub const FLEET_RULES: [(&str, &str); 5] = [
    ("strata_fleet:nodes:count", "seen"),
    ("strata_fleet:devices:count", "count"),
    ("strata_fleet:ranked_devices:count", "urgency"),
    ("strata_fleet:used_devices:count", "used"),
    ("strata_fleet:jobs:count", "jobs"),
];

/// How many devices and jobs each recorded top holds ([`TOP_RULES`]): a window of up to
/// this many rows, unfiltered, reads its rows from them.
pub const TOP_RECORDED: usize = 1000;

/// The recorded tops and bottoms of `assets/prometheus/strata-fleet-rules.yml`, in the file
/// with [`FLEET_RULES`]: the most and least urgent devices, the fullest and emptiest, the
/// largest and smallest jobs, each by what the rule it picks from answers (`urgency`,
/// `used`, `jobs`) and whether it is the bottom (the order reversed, `S`). A window's `topk`
/// (or `bottomk`) of one reads [`TOP_RECORDED`] series, where that of the rule itself reads
/// one a device or job.
pub const TOP_RULES: [(&str, &str, bool); 6] = [
    ("strata_device:fleet_urgency:topk", "urgency", false),
    ("strata_device:used:topk", "used", false),
    ("strata_job:processes:topk", "jobs", false),
    ("strata_device:fleet_urgency:bottomk", "urgency", true),
    ("strata_device:used:bottomk", "used", true),
    ("strata_job:processes:bottomk", "jobs", true),
];

/// The expression a rule of [`TOP_RULES`] records.
pub fn top_expr(what: &str, bottom: bool) -> String {
    let of = match what {
        "jobs" => job_sizes(""),
        _ => rule_of(what).to_string(),
    };
    let k = if bottom { "bottomk" } else { "topk" };
    format!("{k}({TOP_RECORDED}, {of})")
}

/// The recorded top (or bottom, the order reversed) of `what` for this window: where
/// Prometheus has them and the window takes no more rows than they hold, unfiltered.
fn recorded_top(window: &Window, recorded: &Recorded, what: &str) -> Option<&'static str> {
    let fits = window.rows.is_some_and(|r| r <= TOP_RECORDED) && window.filter.is_empty();
    let has = recorded.0.contains(&"top") && (what == "jobs" || recorded.0.contains(&what));
    (fits && has)
        .then(|| {
            TOP_RULES
                .iter()
                .find(|(_, w, bottom)| *w == what && *bottom == window.reversed)
                .map(|(n, _, _)| *n)
        })
        .flatten()
}

/// The query of [`FLEET_RULES`]: their series, by name.
pub fn fleet() -> String {
    let names: Vec<&str> = FLEET_RULES.iter().map(|(name, _)| *name).collect();
    format!("{{__name__=~\"{}\"}}", names.join("|"))
}

/// The expression a rule of [`FLEET_RULES`] records, from the rule it counts: the nodes
/// seen in the hour, the devices of every node, the devices ranked and with a used share,
/// the jobs of the spread.
pub fn fleet_expr(what: &str) -> String {
    match what {
        "seen" => format!("count(group by (instance) ({}))", rule_of(what)),
        "count" => format!("sum({})", rule_of(what)),
        "jobs" => JOBS_RECORDED.into(),
        _ => format!("count({})", rule_of(what)),
    }
}

/// The rule that answers `what`: one of [`NODE_RULES`], else (`jobs`) the jobs' spread.
pub fn rule_of(what: &str) -> &'static str {
    NODE_RULES
        .iter()
        .find(|(_, w)| *w == what)
        .map_or("strata_job:figures:spread", |(name, _)| name)
}

/// What an answer of [`fleet`] says: the totals, each where its rule has series.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Fleetwide {
    /// The nodes seen in the hour, as of the rules' evaluation.
    pub nodes: Option<u64>,
    /// The devices of every node, as of the rules' evaluation.
    pub devices: Option<u64>,
    /// The jobs of the recorded spread.
    pub jobs: Option<u64>,
}

/// The nodes of these that the recorded `strata_node:info:seen_1h` holds, by name.
pub fn seen_of(instances: &[String]) -> String {
    format!(
        "group by (instance) (strata_node:info:seen_1h{{instance=~{}}})",
        promql_string(&one_of(instances))
    )
}

/// The rules Prometheus has, by what each answers (`seen`, `count`, `urgency`, `used`).
#[derive(Debug, Clone, Default)]
pub struct Recorded(pub Vec<&'static str>);

impl Recorded {
    /// Adds the rules an answer of [`recorded_now`] names (one series a metric).
    pub fn add(&mut self, answer: &[Series]) {
        for (name, what) in NODE_RULES {
            let named = answer
                .iter()
                .any(|s| s.labels.get("__name__").is_some_and(|n| n == name));
            if named && !self.0.contains(&what) {
                self.0.push(what);
            }
        }
    }
}

impl Recorded {
    /// Adds the rules an answer of [`fleet`] counts, and says its totals: `None` where
    /// Prometheus has none of [`FLEET_RULES`] (their file is older, or not loaded).
    pub fn add_fleet(&mut self, answer: &[Series]) -> Option<Fleetwide> {
        let mut out = None;
        for s in answer {
            let Some((_, what)) = FLEET_RULES
                .iter()
                .find(|(name, _)| s.labels.get("__name__").is_some_and(|n| n == name))
            else {
                continue;
            };
            let total = (s.value.is_finite() && s.value >= 0.0).then_some(s.value as u64);
            let fleet: &mut Fleetwide = out.get_or_insert_with(Fleetwide::default);
            match *what {
                "seen" => fleet.nodes = total,
                "count" => fleet.devices = total,
                "jobs" => fleet.jobs = total,
                _ => {}
            }
            if *what != "jobs" && !self.0.contains(what) {
                self.0.push(what);
            }
        }
        // The tops came in the file with them: they pick from the rules counted.
        if out.is_some() && !self.0.contains(&"top") {
            self.0.push("top");
        }
        out
    }

    /// The recorded metric where Prometheus has it, else the expression it records.
    pub fn of(&self, what: &str) -> String {
        match NODE_RULES.iter().find(|(_, w)| *w == what) {
            Some((name, w)) if self.0.contains(w) => name.to_string(),
            _ => recorded_expr(what),
        }
    }

    /// The nodes seen in the last hour: from the rule, with the nodes current now (the rule
    /// is as old as its last evaluation).
    pub fn seen(&self) -> String {
        if self.0.contains(&"seen") {
            format!("({} or strata_node_info)", self.of("seen"))
        } else {
            SEEN.to_string()
        }
    }
}

/// A literal text within an RE2 regular expression.
pub fn regex_literal(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if "\\.+*?()|[]{}^$".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// A matcher's regex (as a PromQL string) for a label whose value contains `text`, in any
/// case, as the client's filter matches. Prometheus anchors it.
fn containing(text: &str) -> String {
    promql_string(&format!("(?i).*{}.*", regex_literal(text)))
}

/// The devices that match the filter, as the client's filter matches a device row: its
/// node's host name or address, its GPU's name or MIG profile, a finding's kind, or an owner
/// of one of its processes (its job's key, pod, namespace or user).
pub fn matching(filter: &str) -> String {
    if filter.is_empty() {
        return DEVICES.to_string();
    }
    let r = containing(filter);
    let mut owners: Vec<String> = job_matchers(filter).unwrap_or_default();
    owners.extend(["pod", "namespace", "user"].map(|k| format!("{k}=~{r}")));
    let processes = owners
        .iter()
        .map(|m| format!("strata_process_used_bytes{{{m}}}"))
        .collect::<Vec<_>>()
        .join(" or ");
    format!(
        "({DEVICES} and on(instance) (strata_node_info{{host=~{r}}} or strata_node_info{{instance=~{r}}})) or ({DEVICES} and on(instance, uuid) ({{__name__=~\"strata_gpu_memory_total_bytes|strata_gpu_layer_bytes\",name=~{r}}} or {{__name__=~\"strata_mig_memory_total_bytes|strata_mig_layer_bytes\",profile=~{r}}} or strata_device_findings{{kind=~{r}}} >= 1 or {processes}))"
    )
}

/// Each device's used share (every layer but free over its total), as the client works it.
fn share() -> String {
    "(sum by (instance, uuid) ({__name__=~\"strata_gpu_layer_bytes|strata_mig_layer_bytes\",layer!=\"free\"}) / on(instance, uuid) (sum by (instance, uuid) ({__name__=~\"strata_gpu_memory_total_bytes|strata_mig_memory_total_bytes\"}) > 0))".to_string()
}

/// `expr`, or 0 for a device it has no value for.
fn or_zero(expr: &str) -> String {
    format!("({expr} or on(instance, uuid) {DEVICES} * 0)")
}

/// A device's place in the urgency order (`model::Urgency`: critical findings, then the
/// soonest OOM, then climbs, then fragmentation, then the fullest) as one number, in bands
/// that the ones below cannot reach: critical findings (up to 9) by 1e10, a forecast by 1e6
/// (1000 less the power of two of its seconds, so the soonest is the highest), climbs (up to
/// 9) by 1e4, fragmentation (up to 9) by 10, the used share (up to 1) as it is. Counts above
/// 9 and forecasts within one power of two tie here; the client orders what it reads
/// exactly, so a tie matters only for which of two such devices is read at the window's edge.
pub fn urgency() -> String {
    let count = |matcher: &str| {
        or_zero(&format!(
            "clamp_max(sum by (instance, uuid) (strata_device_findings{{{matcher}}} >= 1), 9)"
        ))
    };
    let oom = or_zero("(1000 - clamp(floor(log2(1 + clamp_min(min by (instance, uuid) (strata_oom_forecast_seconds > -9e307 < 9e307), 0))), 0, 998))");
    format!(
        "(1e10 * {} + 1e6 * {oom} + 1e4 * {} + 10 * {} + {})",
        count("severity=\"critical\""),
        count("kind=\"climb\""),
        count("kind=\"fragmentation\""),
        or_zero(&format!("clamp_max({}, 1)", share()))
    )
}

/// The used share, -1 where it is not known (the client's order puts those last).
pub fn used() -> String {
    format!("({} or on(instance, uuid) ({DEVICES} * 0 - 1))", share())
}

/// How a read finds its device rows.
#[derive(Debug, Clone, PartialEq)]
pub enum Pick {
    /// Every device (that matches: the expression), in one query of their series.
    All(Option<String>),
    /// These nodes' devices, all of them (the node order, unfiltered).
    Nodes(Vec<String>),
    /// The devices this query answers (one series each, labelled `instance` and `uuid`):
    /// asked first, then their series by name.
    Devices(String),
}

/// How to find the devices to read: every one where the window takes every device, else
/// the first `rows` by the order asked among those that match. `Sort::Node` cannot be asked
/// of Prometheus (it orders numbers): its devices are those of `nodes`, which the caller
/// picked by name.
pub fn pick(window: &Window, nodes: &[String], recorded: &Recorded) -> Pick {
    let matching = (!window.filter.is_empty()).then(|| matching(&window.filter));
    let Some(rows) = window.rows else {
        return Pick::All(matching);
    };
    let k = if window.reversed { "bottomk" } else { "topk" };
    let among = |score: String| match &matching {
        None => format!("{k}({rows}, {score})"),
        Some(m) => format!("{k}({rows}, {score} and on(instance, uuid) ({m}))"),
    };
    let score = |what: &str| match recorded_top(window, recorded, what) {
        Some(top) => top.to_string(),
        None => recorded.of(what),
    };
    match window.sort {
        Sort::Urgency => Pick::Devices(among(score("urgency"))),
        Sort::Used => Pick::Devices(among(score("used"))),
        Sort::Node => match matching {
            None => Pick::Nodes(nodes.to_vec()),
            Some(m) => Pick::Devices(format!(
                "({m}) and on(instance) {{__name__=\"strata_node_info\",instance=~{}}}",
                promql_string(&one_of(nodes))
            )),
        },
    }
}

/// A regex that matches exactly these values (none: nothing).
pub fn one_of<S: AsRef<str>>(values: &[S]) -> String {
    if values.is_empty() {
        return "$^".into();
    }
    let alternatives: Vec<String> = values.iter().map(|v| regex_literal(v.as_ref())).collect();
    format!("(?:{})", alternatives.join("|"))
}

/// The query of the device rows: every device series of every device (that matches).
pub fn rows(matching: Option<&str>) -> String {
    match matching {
        None => format!("{{__name__=~\"{DEVICE_SERIES}\"}}"),
        Some(m) => format!("{{__name__=~\"{DEVICE_SERIES}\"}} and on(instance, uuid) ({m})"),
    }
}

/// The query of the device series of these nodes.
pub fn rows_of_nodes(instances: &[String]) -> String {
    format!(
        "{{__name__=~\"{DEVICE_SERIES}\",instance=~{}}}",
        promql_string(&one_of(instances))
    )
}

/// The query of the device series of these devices (`instance`, `uuid`), by name: found
/// through the index, not by a join over every device's series. It may answer another
/// node's device of one of these UUIDs (a demo's, a copy's); the caller keeps the pairs.
pub fn rows_of(devices: &[(String, String)]) -> String {
    let mut instances: Vec<&str> = devices.iter().map(|d| d.0.as_str()).collect();
    let mut uuids: Vec<&str> = devices.iter().map(|d| d.1.as_str()).collect();
    instances.sort_unstable();
    instances.dedup();
    uuids.sort_unstable();
    uuids.dedup();
    format!(
        "{{__name__=~\"{DEVICE_SERIES}\",instance=~{},uuid=~{}}}",
        promql_string(&one_of(&instances)),
        promql_string(&one_of(&uuids))
    )
}

/// The node-level queries of a windowed read: what is answered is the nodes it needs (every
/// node down or stale, and those of the rows read) and counts, not a series a node, as the
/// screen shows a few hundred rows of a fleet of any size. A node's state is judged in the
/// query as the client judges it (`build::node`: down where Prometheus's `up` is 0 or its
/// series are gone, stale where its sample is older than `STALE_INTERVALS` intervals of its
/// own or of the viewer's scrape, whichever is longer), with a little slack: a node listed
/// that the client then finds up is only read, where one missed would be counted up.
pub struct NodeQueries {
    seen: String,
    /// Each node's devices, `count by (instance)`: the recorded count where Prometheus has it.
    count: String,
    /// The nodes current and stale, or whose sample's age is unknown.
    stale: String,
}

/// How much sooner than the client the query calls a node stale.
const STALE_SLACK: f64 = 0.9;

impl NodeQueries {
    /// The queries at `time` (unix seconds, the read's instant) for a viewer whose scrape
    /// interval is `scrape_interval`.
    pub fn new(recorded: &Recorded, scrape_interval: f64, time: f64) -> NodeQueries {
        let times = super::model::STALE_INTERVALS * STALE_SLACK;
        let scrape = if scrape_interval.is_finite() && scrape_interval > 0.0 {
            scrape_interval
        } else {
            0.0
        };
        // Its own interval where it says one, else a second; the viewer's where longer.
        let limit = format!(
            "(min by (instance) ({times} * clamp_min(strata_sample_interval_seconds > 0 < 1e308, {scrape})) or on(instance) (0 * group by (instance) (strata_node_info) + {}))",
            times * scrape.max(1.0)
        );
        let age = format!(
            "max by (instance) ((strata_sample_age_seconds >= 0 < 1e308) + ({time:.3} - timestamp(strata_sample_age_seconds)))"
        );
        let stale = format!(
            "(group by (instance) ({age} > on(instance) {limit}) or group by (instance) (strata_node_info unless on(instance) (strata_sample_age_seconds >= 0 < 1e308)))"
        );
        NodeQueries {
            seen: recorded.seen(),
            count: recorded.of("count"),
            stale,
        }
    }

    /// How many nodes were seen in the hour: one series.
    pub fn total(&self) -> String {
        format!("count(group by (instance) ({}))", self.seen)
    }

    /// The nodes not up: each node down with what it last said (its `host`, `version`), and
    /// one series a stale node.
    pub fn not_up(&self) -> String {
        format!(
            "(({}) unless on(instance) (strata_node_info unless on(instance) (up < 1))) or {}",
            self.seen, self.stale
        )
    }

    /// The nodes current with no device at all (a row each: NVML failing on a node shows
    /// so).
    pub fn no_devices(&self) -> String {
        format!(
            "group by (instance) (strata_node_info) unless on(instance) ({})",
            self.count
        )
    }

    /// One node with devices, whose devices tell which device rules Prometheus has (one
    /// whose sample is stale may lack them, and the read then asks the expressions).
    pub fn one_node(&self) -> String {
        format!("topk(1, {})", self.count)
    }

    /// How many devices match the filter: one series. Those of a node down are gone with
    /// it; those of a stale node are among them, and the read takes them out
    /// ([`devices_on`]).
    pub fn devices(&self, filter: &str) -> String {
        if filter.is_empty() {
            return format!("sum({})", self.count);
        }
        format!("count({})", matching(filter))
    }
}

/// The node-level series of the nodes named, by name: their info, sample age and interval;
/// when each was scraped; their targets' `up`.
pub fn of_nodes(instances: &[String]) -> [(&'static str, String); 3] {
    let list = promql_string(&one_of(instances));
    [
        (
            "series",
            format!("{{__name__=~\"{NODE_SERIES}\",instance=~{list}}}"),
        ),
        (
            "scraped",
            format!("timestamp(strata_sample_age_seconds{{instance=~{list}}})"),
        ),
        ("up", format!("up{{instance=~{list}}}")),
    ]
}

/// These nodes' devices now, `count by (instance)`, their series found by name: what tells a
/// node that came after the count rule's last evaluation (the rule knows it not yet) from one
/// with no device.
pub fn devices_of_nodes(instances: &[String]) -> String {
    format!(
        "count by (instance) (group by (instance, uuid) ({{__name__=~\"{}\",instance=~{}}}))",
        device_names!(),
        promql_string(&one_of(instances))
    )
}

/// How many devices match the filter on these nodes (stale ones, whose devices the count
/// of those that match holds but the fleet does not show): one series.
pub fn devices_on(filter: &str, recorded: &Recorded, instances: &[String]) -> String {
    let list = promql_string(&one_of(instances));
    if filter.is_empty() && recorded.0.contains(&"count") {
        return format!("sum({}{{instance=~{list}}})", recorded.of("count"));
    }
    format!(
        "sum(({}) and on(instance) strata_node_info{{instance=~{list}}})",
        counts(filter, recorded)
    )
}

/// Each node's devices that match the filter: `count by (instance)`.
pub fn counts(filter: &str, recorded: &Recorded) -> String {
    if filter.is_empty() {
        return recorded.of("count");
    }
    format!("count by (instance) ({})", matching(filter))
}

/// Nodes in the order of the node sort, until they hold `rows` devices: `(instance, name,
/// devices)` in, the instances picked out.
pub fn nodes_for(mut nodes: Vec<(String, String, u64)>, window: &Window) -> Vec<String> {
    nodes.retain(|n| n.2 > 0);
    nodes.sort_by(|a, b| a.1.cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
    if window.reversed {
        nodes.reverse();
    }
    let want = window.rows.unwrap_or(usize::MAX) as u64;
    let mut held = 0u64;
    let mut out = Vec::new();
    for (instance, _, devices) in nodes {
        if held >= want {
            break;
        }
        held += devices;
        out.push(instance);
    }
    out
}

/// The matchers that pick the processes (or the recorded spread's jobs) whose job key
/// (`slurm N`, `run X`, `pod NS/NAME`) contains the filter, as the client's filter matches
/// a job row: `None` for every job. The key is the word and the labels' values, so a filter
/// that runs over the word's end ("rm 90") asks for values that begin with the rest, and
/// one that runs over a pod key's `/` for a namespace that ends, and a pod that begins,
/// with its two sides.
pub fn job_matchers(filter: &str) -> Option<Vec<String>> {
    let f = filter.to_lowercase();
    if f.is_empty() {
        return None;
    }
    let any_case =
        |alternatives: &[String]| promql_string(&format!("(?i)(?:{})", alternatives.join("|")));
    let mut out = Vec::new();
    for kind in &JOB_KINDS {
        let word = format!("{} ", kind.word);
        if word.contains(&f) {
            out.push(kind.picks.to_string());
            continue;
        }
        // What follows the word in `text` where `text` starts within the word: the rest a
        // value must begin with.
        let rests_of = |text: &'_ str| -> Vec<String> {
            (0..word.len())
                .filter_map(|cut| text.strip_prefix(&word[cut..]))
                .map(String::from)
                .collect()
        };
        let rests = rests_of(&f);
        let within = |text: &str| {
            let mut alternatives = vec![format!(".*{}.*", regex_literal(text))];
            alternatives.extend(rests.iter().map(|r| format!("{}.*", regex_literal(r))));
            any_case(&alternatives)
        };
        let picks = kind.picks;
        match kind.labels {
            [label] => out.push(format!("{picks},{label}=~{}", within(&f))),
            [namespace, name] => {
                // `pod NS/NAME`, or `pod NAME` where no namespace is known.
                out.push(format!("{picks},{namespace}=\"\",{name}=~{}", within(&f)));
                match f.split_once('/') {
                    None => {
                        out.push(format!("{picks},{namespace}=~{}", within(&f)));
                        out.push(format!(
                            "{picks},{namespace}!=\"\",{name}=~{}",
                            any_case(&[format!(".*{}.*", regex_literal(&f))])
                        ));
                    }
                    Some((before, after)) if !after.contains('/') => {
                        let mut ends = vec![format!(".*{}", regex_literal(before))];
                        ends.extend(
                            rests_of(before)
                                .iter()
                                .filter(|r| !r.is_empty())
                                .map(|r| regex_literal(r)),
                        );
                        out.push(format!(
                            "{picks},{namespace}!=\"\",{namespace}=~{},{name}=~{}",
                            any_case(&ends),
                            any_case(&[format!("{}.*", regex_literal(after))])
                        ));
                    }
                    Some(_) => {}
                }
            }
            _ => unreachable!("a job kind has one label or two"),
        }
    }
    Some(out)
}

/// Each job's size (its processes) from the recorded spread, of the jobs that match.
pub fn job_sizes(filter: &str) -> String {
    format!("sum by ({JOB_LABELS}) ({})", spread_of(filter, "processes"))
}

/// The recorded spread's `stat` series of the jobs that match the filter: one selector, or
/// one a set of matchers joined by `or`.
fn spread_of(filter: &str, stat: &str) -> String {
    let spread = |m: &str| format!("strata_job:figures:spread{{stat=\"{stat}\"{m}}}");
    match job_matchers(filter) {
        None => spread(""),
        Some(ms) => ms
            .iter()
            .map(|m| spread(&format!(",{m}")))
            .collect::<Vec<_>>()
            .join(" or "),
    }
}

/// The jobs with a climbing rank, keyed as the spread is (by the labels of the kind that
/// names it): always read, so that every rank_outlier is found whatever the window.
fn climbing_jobs() -> String {
    JOB_KINDS
        .iter()
        .map(|kind| {
            format!(
                "group by ({}) (strata_job:live_climb_bytes_per_second:max{{{}}})",
                kind.labels.join(", "),
                kind.picks
            )
        })
        .collect::<Vec<_>>()
        .join(" or ")
}

/// The jobs to read (`rows`: the largest that match, the smallest reversed) and every job
/// with a climbing rank: one series a job, labelled as its kind names it. `None`: every job.
pub fn job_pick(window: &Window, recorded: &Recorded) -> Option<String> {
    let rows = window.rows?;
    let k = if window.reversed { "bottomk" } else { "topk" };
    let sizes = match recorded_top(window, recorded, "jobs") {
        Some(top) => top.to_string(),
        None => job_sizes(&window.filter),
    };
    Some(format!(
        "{k}({rows}, {sizes}) or on({JOB_LABELS}) ({})",
        climbing_jobs()
    ))
}

/// The recorded spread of the jobs [`job_pick`] answered, by name (their `slurm_job`
/// values, the `run` values of jobs with none, and the pods of jobs with neither, a
/// selector a namespace); of every job where `None`.
pub fn jobs(picked: Option<&[Series]>) -> String {
    let spread = "strata_job:figures:spread";
    match picked {
        None => spread.to_string(),
        Some(picked) => of_jobs(picked, spread, ""),
    }
}

/// The series of the processes of these jobs (as [`jobs`] names them), each used and layer
/// series: what the client joins itself of a job with a process on a stale node.
pub fn processes_of_jobs(picked: &[Series]) -> String {
    of_jobs(
        picked,
        "",
        "__name__=~\"strata_process_used_bytes|strata_process_layer_bytes\",pid!=\"other\",",
    )
}

/// The jobs with a process on these nodes: one series a job, labelled as the spread is.
pub fn jobs_on_nodes(instances: &[String]) -> String {
    format!(
        "group by ({JOB_LABELS}) (strata_process_used_bytes{{pid!=\"other\",instance=~{}}})",
        promql_string(&one_of(instances))
    )
}

/// The live climbs of processes on these nodes.
pub fn live_climbs_on(instances: &[String]) -> String {
    format!(
        "strata_climb_rate_bytes_per_second{{cause=\"live\",instance=~{}}} > 0",
        promql_string(&one_of(instances))
    )
}

/// `name{extra...}` of the jobs `picked` names, by their key's labels, joined by `or`.
fn of_jobs(picked: &[Series], name: &str, extra: &str) -> String {
    use std::collections::{BTreeMap, BTreeSet};
    let mut slurm = BTreeSet::new();
    let mut runs = BTreeSet::new();
    let mut pods: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for s in picked {
        let label = |k: &str| s.labels.get(k).filter(|x| !x.is_empty());
        match (label("slurm_job"), label("run"), label("pod")) {
            (Some(j), _, _) => {
                slurm.insert(j.as_str());
            }
            (None, Some(r), _) => {
                runs.insert(r.as_str());
            }
            (None, None, Some(pod)) => {
                let namespace = label("namespace").map_or("", String::as_str);
                pods.entry(namespace).or_default().insert(pod.as_str());
            }
            _ => {}
        }
    }
    let list = |set: BTreeSet<&str>| promql_string(&one_of(&set.into_iter().collect::<Vec<_>>()));
    let mut parts = Vec::new();
    if !slurm.is_empty() {
        parts.push(format!("{name}{{{extra}slurm_job=~{}}}", list(slurm)));
    }
    if !runs.is_empty() {
        parts.push(format!(
            "{name}{{{extra}slurm_job=\"\",run=~{}}}",
            list(runs)
        ));
    }
    for (namespace, names) in pods {
        parts.push(format!(
            "{name}{{{extra}slurm_job=\"\",run=\"\",namespace={},pod=~{}}}",
            promql_string(namespace),
            list(names)
        ));
    }
    if parts.is_empty() {
        return format!("{name}{{{extra}slurm_job=~\"$^\"}}");
    }
    parts.join(" or ")
}

/// How many jobs match the filter (one `nodes` series a job in the recorded spread).
pub fn job_count(filter: &str) -> String {
    format!("count({})", spread_of(filter, "nodes"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(rows: Option<usize>, sort: Sort, reversed: bool, filter: &str) -> Window {
        Window {
            rows,
            sort,
            reversed,
            filter: filter.into(),
        }
    }

    #[test]
    fn a_typed_filter_is_a_literal_in_the_regex_and_the_string() {
        assert_eq!(regex_literal("a.b*(c)|d"), "a\\.b\\*\\(c\\)\\|d");
        // A quote and a backslash cannot end the string or escape out of it.
        assert_eq!(containing("x\"y\\"), "\"(?i).*x\\\"y\\\\\\\\.*\"");
        let m = matching("node-1\"} or up{");
        assert!(
            m.contains("host=~\"(?i).*node-1\\\"\\\\} or up\\\\{.*\""),
            "{m}"
        );
    }

    #[test]
    fn a_filter_matches_a_device_by_its_processes_owners_too() {
        let m = matching("alice");
        for owner in ["user", "pod", "namespace"] {
            assert!(
                m.contains(&format!(
                    "strata_process_used_bytes{{{owner}=~\"(?i).*alice.*\"}}"
                )),
                "{owner}: {m}"
            );
        }
        for kind in JOB_KINDS {
            assert!(
                m.contains(&format!("strata_process_used_bytes{{{},", kind.picks)),
                "{}: {m}",
                kind.word
            );
        }
    }

    #[test]
    fn the_window_picks_by_the_order_asked() {
        let none = Recorded::default();
        let all = window(None, Sort::Urgency, false, "");
        assert_eq!(pick(&all, &[], &none), Pick::All(None));
        let some = window(None, Sort::Urgency, false, "h100");
        assert_eq!(pick(&some, &[], &none), Pick::All(Some(matching("h100"))));
        assert_eq!(rows(None), format!("{{__name__=~\"{DEVICE_SERIES}\"}}"));
        let devices = |p: Pick| match p {
            Pick::Devices(q) => q,
            p => panic!("{p:?}"),
        };
        let top = devices(pick(
            &window(Some(50), Sort::Urgency, false, ""),
            &[],
            &none,
        ));
        assert!(top.starts_with("topk(50, (1e10 * "), "{top}");
        // From the rule where Prometheus records it.
        let ruled = Recorded(vec!["urgency", "used"]);
        let top = devices(pick(
            &window(Some(50), Sort::Urgency, false, ""),
            &[],
            &ruled,
        ));
        assert_eq!(top, "topk(50, strata_device:fleet_urgency:score)");
        let least = devices(pick(&window(Some(50), Sort::Used, true, "x"), &[], &ruled));
        assert!(
            least.starts_with("bottomk(50, strata_device:used:ratio and on(instance, uuid) ("),
            "{least}"
        );
        let least = devices(pick(&window(Some(50), Sort::Used, true, ""), &[], &none));
        assert!(
            least.starts_with("bottomk(50, ((sum by (instance, uuid)"),
            "{least}"
        );
        let nodes: Vec<String> = vec!["10.0.0.1:9842".into(), "b:1".into()];
        let by_node = pick(&window(Some(50), Sort::Node, false, ""), &nodes, &none);
        assert_eq!(by_node, Pick::Nodes(nodes.clone()));
        assert!(
            rows_of_nodes(&nodes).ends_with("instance=~\"(?:10\\\\.0\\\\.0\\\\.1:9842|b:1)\"}"),
            "{}",
            rows_of_nodes(&nodes)
        );
        let filtered = devices(pick(
            &window(Some(50), Sort::Node, false, "gpu"),
            &[],
            &none,
        ));
        assert!(filtered.contains("instance=~\"$^\""), "{filtered}");
        // The rows of the devices picked: by name, each node and UUID once.
        let q = rows_of(&[
            ("a:1".into(), "GPU-1".into()),
            ("b:1".into(), "GPU-1".into()),
            ("a:1".into(), "MIG-2".into()),
        ]);
        assert!(
            q.ends_with(",instance=~\"(?:a:1|b:1)\",uuid=~\"(?:GPU-1|MIG-2)\"}"),
            "{q}"
        );
    }

    #[test]
    fn the_node_order_takes_nodes_until_they_hold_the_rows() {
        let nodes = vec![
            ("c:1".to_string(), "node-c".to_string(), 8),
            ("a:1".to_string(), "node-a".to_string(), 8),
            ("e:1".to_string(), "node-e".to_string(), 0),
            ("b:1".to_string(), "node-b".to_string(), 8),
        ];
        let w = |rows, reversed| window(Some(rows), Sort::Node, reversed, "");
        assert_eq!(nodes_for(nodes.clone(), &w(8, false)), ["a:1"]);
        assert_eq!(nodes_for(nodes.clone(), &w(9, false)), ["a:1", "b:1"]);
        assert_eq!(nodes_for(nodes.clone(), &w(9, true)), ["c:1", "b:1"]);
        assert_eq!(nodes_for(nodes, &w(100, false)), ["a:1", "b:1", "c:1"]);
    }

    /// Whether a set of PromQL label matchers (`a="x",b!="",c=~"re"`) holds for a series
    /// with these labels (an absent label is empty, as Prometheus takes it).
    fn holds(matchers: &str, labels: &[(&str, &str)]) -> bool {
        let mut rest = matchers;
        while !rest.is_empty() {
            let at = rest.find(['=', '!']).expect("an operator");
            let name = &rest[..at];
            let op_len = rest[at..].find('"').expect("a string");
            let op = &rest[at..at + op_len];
            // The string, unescaped, to its closing quote.
            let mut value = String::new();
            let mut chars = rest[at + op_len + 1..].char_indices();
            let end = loop {
                match chars.next().expect("a closing quote") {
                    (_, '\\') => value.push(chars.next().expect("an escape").1),
                    (i, '"') => break at + op_len + 1 + i + 1,
                    (_, c) => value.push(c),
                }
            };
            rest = rest[end..].strip_prefix(',').unwrap_or(&rest[end..]);
            let actual = labels
                .iter()
                .find(|(k, _)| *k == name)
                .map_or("", |(_, v)| v);
            let re = || regex::Regex::new(&format!("^(?:{value})$")).unwrap();
            let ok = match op {
                "=" => actual == value,
                "!=" => actual != value,
                "=~" => re().is_match(actual),
                "!~" => !re().is_match(actual),
                _ => panic!("operator {op}"),
            };
            if !ok {
                return false;
            }
        }
        true
    }

    /// What the client's filter keeps of a job key, and what the matchers ask of a process's
    /// labels: the same, for keys of every kind and filters that run over the word's end or a
    /// pod key's `/`, and never a process that an earlier kind names.
    #[test]
    fn a_job_filter_asks_for_the_jobs_the_client_keeps() {
        let processes: [&[(&str, &str)]; 6] = [
            &[("slurm_job", "9001"), ("namespace", "ml"), ("pod", "llm-0")],
            &[("run", "llm-a.7"), ("namespace", "ml"), ("pod", "w-1")],
            &[("namespace", "train"), ("pod", "llama-7b-0")],
            &[("pod", "llama-7b-0")],
            &[("namespace", "ml"), ("user", "llm")],
            &[
                ("slurm_job", ""),
                ("run", ""),
                ("namespace", "a.b"),
                ("pod", "c"),
            ],
        ];
        let filters = [
            "9",
            "900",
            "slurm 9",
            "rm 90",
            "m 9001",
            "slurm",
            "urm",
            " ",
            "LLM",
            "run l",
            "n llm-a.",
            "a.7",
            "x",
            "9001 ",
            "run 9",
            "pod",
            "d ",
            "d t",
            "pod train/",
            "train",
            "ain/lla",
            "n/l",
            "/",
            "/llama",
            "d train/llama-7b-0",
            "d llama",
            "pod llama",
            "7b-0",
            "ml/",
            "a.b/c",
            "a/b/c",
            "ml",
            "pod ml",
            ".",
            "a.b",
        ];
        for labels in processes {
            let get = |k: &str| labels.iter().find(|(l, _)| *l == k).map_or("", |(_, v)| v);
            let key = super::super::build::job_key_of(get);
            for f in filters {
                let keeps = key
                    .as_ref()
                    .is_some_and(|k| k.to_lowercase().contains(&f.to_lowercase()));
                let matchers = job_matchers(f).unwrap();
                let asks = matchers.iter().any(|m| holds(m, labels));
                assert_eq!(asks, keeps, "key {key:?}, filter {f:?}: {matchers:?}");
            }
        }
        assert_eq!(job_matchers(""), None);
    }

    #[test]
    fn the_jobs_read_are_the_largest_and_every_climbing_one() {
        let q = job_pick(
            &window(Some(30), Sort::Urgency, false, ""),
            &Recorded::default(),
        )
        .unwrap();
        assert!(q.starts_with("topk(30, sum by (slurm_job, run, namespace, pod) (strata_job:figures:spread{stat=\"processes\"})) or on(slurm_job, run, namespace, pod) (group by (slurm_job) (strata_job:live_climb_bytes_per_second:max{slurm_job!=\"\"}) or group by (run) ("), "{q}");
        assert_eq!(
            job_pick(
                &window(None, Sort::Urgency, false, ""),
                &Recorded::default()
            ),
            None
        );
        assert_eq!(jobs(None), "strata_job:figures:spread");
        let picked = [
            Series::of("", &[("slurm_job", "9001")], 1.0),
            Series::of("", &[("slurm_job", "7.1"), ("run", "x")], 1.0),
            Series::of("", &[("slurm_job", ""), ("run", "llm-a")], 1.0),
            Series::of("", &[("slurm_job", "9001")], 1.0),
            Series::of("", &[("namespace", "ml"), ("pod", "w-1")], 1.0),
            Series::of("", &[("namespace", "ml"), ("pod", "w-0")], 1.0),
            Series::of("", &[("namespace", "a\"b"), ("pod", "w-0")], 1.0),
            Series::of("", &[("run", "r"), ("pod", "w-9")], 1.0),
        ];
        assert_eq!(
            jobs(Some(&picked)),
            "strata_job:figures:spread{slurm_job=~\"(?:7\\\\.1|9001)\"} or strata_job:figures:spread{slurm_job=\"\",run=~\"(?:llm-a|r)\"} or strata_job:figures:spread{slurm_job=\"\",run=\"\",namespace=\"a\\\"b\",pod=~\"(?:w-0)\"} or strata_job:figures:spread{slurm_job=\"\",run=\"\",namespace=\"ml\",pod=~\"(?:w-0|w-1)\"}"
        );
        assert_eq!(
            jobs(Some(&[])),
            "strata_job:figures:spread{slurm_job=~\"$^\"}"
        );
    }

    #[test]
    fn the_jobs_on_stale_nodes_are_asked_by_name() {
        let nodes = ["10.0.0.7:9842".to_string()];
        assert_eq!(
            jobs_on_nodes(&nodes),
            "group by (slurm_job, run, namespace, pod) (strata_process_used_bytes{pid!=\"other\",instance=~\"(?:10\\\\.0\\\\.0\\\\.7:9842)\"})"
        );
        let picked = [
            Series::of("", &[("slurm_job", "9001")], 1.0),
            Series::of("", &[("namespace", "ml"), ("pod", "w-0")], 1.0),
        ];
        assert_eq!(
            processes_of_jobs(&picked),
            "{__name__=~\"strata_process_used_bytes|strata_process_layer_bytes\",pid!=\"other\",slurm_job=~\"(?:9001)\"} or {__name__=~\"strata_process_used_bytes|strata_process_layer_bytes\",pid!=\"other\",slurm_job=\"\",run=\"\",namespace=\"ml\",pod=~\"(?:w-0)\"}"
        );
        assert!(live_climbs_on(&nodes).ends_with("} > 0"));
        // A stale node's devices: from the recorded count by name, else the count asked.
        let mut recorded = Recorded::default();
        assert!(devices_on("", &recorded, &nodes).starts_with("sum((count by (instance) ("));
        recorded.0.push("count");
        assert_eq!(
            devices_on("", &recorded, &nodes),
            "sum(strata_node:devices:count{instance=~\"(?:10\\\\.0\\\\.0\\\\.7:9842)\"})"
        );
        assert!(devices_on("h100", &recorded, &nodes).starts_with("sum((count by (instance) ("));
    }

    #[test]
    fn a_window_within_the_recorded_tops_reads_them() {
        let mut recorded = Recorded::default();
        let named = |name: &str| Series::of(name, &[("__name__", name)], 1.0);
        recorded.add_fleet(&[
            named("strata_fleet:nodes:count"),
            named("strata_fleet:ranked_devices:count"),
            named("strata_fleet:jobs:count"),
        ]);
        let devices = |w: &Window| match pick(w, &[], &recorded) {
            Pick::Devices(q) => q,
            other => panic!("{other:?}"),
        };
        let w = |rows, sort, reversed, filter| window(Some(rows), sort, reversed, filter);
        assert_eq!(
            devices(&w(200, Sort::Urgency, false, "")),
            "topk(200, strata_device:fleet_urgency:topk)"
        );
        assert_eq!(
            devices(&w(TOP_RECORDED, Sort::Urgency, false, "")),
            format!("topk({TOP_RECORDED}, strata_device:fleet_urgency:topk)")
        );
        // Past the top, or filtered: from the rule itself; reversed, from the bottom.
        assert_eq!(
            devices(&w(TOP_RECORDED + 1, Sort::Urgency, false, "")),
            format!(
                "topk({}, strata_device:fleet_urgency:score)",
                TOP_RECORDED + 1
            )
        );
        assert_eq!(
            devices(&w(200, Sort::Urgency, true, "")),
            "bottomk(200, strata_device:fleet_urgency:bottomk)"
        );
        assert_eq!(
            devices(&w(TOP_RECORDED + 1, Sort::Urgency, true, "")),
            format!(
                "bottomk({}, strata_device:fleet_urgency:score)",
                TOP_RECORDED + 1
            )
        );
        assert!(devices(&w(200, Sort::Urgency, false, "gpu"))
            .starts_with("topk(200, strata_device:fleet_urgency:score and on(instance, uuid) ("));
        // The used share's rule has no count here: its expression, never its top.
        assert_eq!(
            devices(&w(200, Sort::Used, false, "")),
            format!("topk(200, {})", used())
        );
        let jobs = job_pick(&w(200, Sort::Urgency, false, ""), &recorded).unwrap();
        assert!(
            jobs.starts_with("topk(200, strata_job:processes:topk) or on("),
            "{jobs}"
        );
        let jobs = job_pick(&w(200, Sort::Urgency, true, ""), &recorded).unwrap();
        assert!(
            jobs.starts_with("bottomk(200, strata_job:processes:bottomk) or on("),
            "{jobs}"
        );
        let jobs = job_pick(&w(200, Sort::Urgency, false, "llm"), &recorded).unwrap();
        assert!(jobs.starts_with("topk(200, sum by ("), "{jobs}");
        // No fleet-wide rules (an older file): no tops.
        let mut older = Recorded::default();
        older.add(&[named("strata_device:fleet_urgency:score")]);
        assert!(matches!(
            pick(&w(200, Sort::Urgency, false, ""), &[], &older),
            Pick::Devices(q) if q == "topk(200, strata_device:fleet_urgency:score)"
        ));
    }

    #[test]
    fn the_rules_prometheus_has_are_read_from_their_names() {
        let mut r = Recorded::default();
        let answer: Vec<Series> = [
            "strata_device:fleet_urgency:score",
            "strata_job:figures:spread",
            "other",
        ]
        .iter()
        .map(|n| Series::of("", &[("__name__", n)], 1.0))
        .collect();
        r.add(&answer);
        assert_eq!(r.0, ["urgency"]);
        // The node rules of every node; the device rules of one node's devices.
        assert_eq!(
            recorded_now(None),
            "count by (__name__) ({__name__=~\"strata_node:info:seen_1h|strata_node:devices:count\"})"
        );
        assert_eq!(
            recorded_now(Some("a\"b:1")),
            "count by (__name__) ({__name__=~\"strata_device:fleet_urgency:score|strata_device:used:ratio\",instance=\"a\\\"b:1\"})"
        );
        assert_eq!(job_count(""), JOBS_RECORDED);
        assert_eq!(
            job_count("9001"),
            "count(strata_job:figures:spread{stat=\"nodes\",slurm_job!=\"\",slurm_job=~\"(?i)(?:.*9001.*)\"} or strata_job:figures:spread{stat=\"nodes\",slurm_job=\"\",run!=\"\",run=~\"(?i)(?:.*9001.*)\"} or strata_job:figures:spread{stat=\"nodes\",slurm_job=\"\",run=\"\",pod!=\"\",namespace=\"\",pod=~\"(?i)(?:.*9001.*)\"} or strata_job:figures:spread{stat=\"nodes\",slurm_job=\"\",run=\"\",pod!=\"\",namespace=~\"(?i)(?:.*9001.*)\"} or strata_job:figures:spread{stat=\"nodes\",slurm_job=\"\",run=\"\",pod!=\"\",namespace!=\"\",pod=~\"(?i)(?:.*9001.*)\"})"
        );
        assert_eq!(r.of("urgency"), "strata_device:fleet_urgency:score");
        assert_eq!(r.of("used"), used());
        assert_eq!(r.seen(), SEEN);
        let seen = Recorded(vec!["seen"]);
        assert_eq!(
            seen.seen(),
            "(strata_node:info:seen_1h or strata_node_info)"
        );
    }
}
