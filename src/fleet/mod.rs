//! `strata fleet`: every node's devices, layers and findings in one view, read from Prometheus
//! (which scrapes `strata serve` on each node) or from a few `strata serve` endpoints
//! directly, and the finding no node can make alone: a job's rank that stands apart.
//!
//! A source ([`prometheus`], [`endpoints`]) gives targets and series; [`build`] turns them
//! into the [`model::Fleet`] the same way for both; [`view`] draws it; [`screen`] runs the
//! terminal. Nothing here scrapes on a schedule of its own or stores anything: each refresh
//! is one read.

pub mod build;
pub mod detail;
pub mod endpoints;
pub mod expo;
pub mod http;
pub mod model;
pub mod prometheus;
mod screen;
pub mod view;
pub mod window;

use crate::cli::FleetArgs;
use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::Duration;

/// One sample of one series: its metric's name, its labels (`instance` among them) and value.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

#[cfg(test)]
impl Series {
    /// A series for a test, from its name, labels and value.
    pub fn of(name: &str, labels: &[(&str, &str)], value: f64) -> Series {
        Series {
            name: name.into(),
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            value,
        }
    }
}

/// What one read of a source gives: its targets, their series, and what went wrong that is
/// not one target's (a partial answer, a query refused).
#[derive(Debug, Default)]
pub struct Read {
    pub targets: Vec<build::Target>,
    pub series: Vec<Series>,
    pub problems: Vec<String>,
    /// The jobs, where the source aggregated them itself (Prometheus answers a job's
    /// spread, not its processes); `None`: built from the per-process series.
    pub jobs: Option<Vec<model::Job>>,
    /// A windowed read's devices that match the filter, by node (`instance`); `None` where
    /// every device was read.
    pub counts: Option<BTreeMap<String, u64>>,
    /// A windowed read's jobs that match the filter, where the jobs were counted.
    pub jobs_total: Option<u64>,
    /// Where a read listed only the nodes it needs (a windowed read from Prometheus): how
    /// many nodes there are, how many devices match on nodes up, and the nodes up with no
    /// device at all (a row each).
    pub nodes_total: Option<u64>,
    pub devices_total: Option<u64>,
    pub no_devices: Option<std::collections::BTreeSet<String>>,
    /// The host names of nodes not listed whose ranks climb, by instance.
    pub names: BTreeMap<String, String>,
}

/// The most a response may hold: a Prometheus answer for a large fleet runs to tens of MB.
const RESPONSE_LIMIT: u64 = 256 << 20;
/// The most one endpoint's `/metrics` may hold.
const ENDPOINT_LIMIT: u64 = 16 << 20;

/// Where the fleet is read from.
pub enum Source {
    Prometheus {
        client: http::Client,
        base: String,
    },
    Endpoints {
        client: http::Client,
        endpoints: Vec<String>,
        concurrency: usize,
    },
}

impl Source {
    pub fn from_args(args: &FleetArgs) -> Result<Source, String> {
        let timeout = Duration::from_secs_f64(args.timeout);
        if let Some(base) = &args.prometheus {
            if !(base.starts_with("http://") || base.starts_with("https://")) {
                return Err(format!(
                    "--prometheus {}: not an http:// or https:// URL (hint: http://prometheus:9090)",
                    crate::text::clean(base)
                ));
            }
            let auth = http::Auth::from(
                args.basic_auth_file.as_deref(),
                args.bearer_token_file.as_deref(),
            )?;
            let client = http::Client::new(timeout, RESPONSE_LIMIT, args.ca.as_deref(), auth)?;
            return Ok(Source::Prometheus {
                client,
                base: base.clone(),
            });
        }
        let list = match (&args.endpoints, &args.endpoints_file) {
            (Some(list), _) => list.clone(),
            (None, Some(file)) => std::fs::read_to_string(file)
                .map_err(|e| format!("cannot read --endpoints-file {}: {e}", file.display()))?,
            (None, None) => {
                return Err(
                    "no source (hint: --prometheus URL, or --endpoints HOST:PORT,...)".into(),
                )
            }
        };
        let endpoints = endpoints::parse_list(&list)?;
        // strata serve's endpoints carry no credentials; a CA is still honoured for https.
        let client = http::Client::new(
            timeout,
            ENDPOINT_LIMIT,
            args.ca.as_deref(),
            http::Auth::None,
        )?;
        Ok(Source::Endpoints {
            client,
            endpoints,
            concurrency: args.concurrency as usize,
        })
    }

    fn describe(&self) -> String {
        match self {
            Source::Prometheus { base, .. } => format!("prometheus {}", crate::text::clean(base)),
            Source::Endpoints { endpoints, .. } => format!("{} endpoints", endpoints.len()),
        }
    }

    /// One read of the fleet, the rows `window` asks for where the source can pick them.
    /// `Err` when the source could not be read at all.
    pub fn read(
        &self,
        scrape_interval: f64,
        window: &model::Window,
    ) -> Result<model::Fleet, String> {
        let now = now();
        let read = match self {
            Source::Prometheus { client, base } => {
                prometheus::read(client, base, now, scrape_interval, window)?
            }
            Source::Endpoints {
                client,
                endpoints,
                concurrency,
            } => endpoints::read(client, endpoints, *concurrency),
        };
        let mut built = build::build(&read.targets, &read.series, scrape_interval);
        let from_rules = read.jobs.is_some();
        if let Some(jobs) = read.jobs {
            built.jobs = build::named(jobs, &built.nodes, &read.names);
        }
        // A read that listed only the nodes it needs: an up node listed with none of its
        // devices read and some device (the query's slack on staleness lists a few) is not
        // a row.
        if let Some(no_devices) = &read.no_devices {
            built.nodes.retain(|n| {
                n.state != model::NodeState::Up
                    || !n.devices.is_empty()
                    || no_devices.contains(&n.instance)
            });
        }
        let listed = read.no_devices.is_some();
        let part = (read.counts.is_some() || listed).then(|| {
            let mut part = model::Part {
                nodes: read.nodes_total,
                devices_read: 0,
                devices: 0,
                jobs_read: built.jobs.len() as u64,
                jobs: read.jobs_total.filter(|_| from_rules),
                sort: window.sort,
                reversed: window.reversed,
                filter: window.filter.clone(),
            };
            for node in built
                .nodes
                .iter_mut()
                .filter(|n| n.state == model::NodeState::Up)
            {
                let read_here = node.devices.len() as u64;
                let count = match (&read.counts, &read.no_devices) {
                    // The count covers every node: one it does not name has none.
                    (Some(counts), _) => Some(counts.get(&node.instance).copied().unwrap_or(0)),
                    (None, Some(none)) if none.contains(&node.instance) => Some(0),
                    _ => None,
                };
                // A device read that the count missed (it came between the two queries)
                // still counts.
                node.device_count = count.map(|c| c.max(read_here));
                part.devices_read += read_here;
                part.devices += node.device_count.unwrap_or(0);
            }
            if let Some(devices) = read.devices_total {
                part.devices = devices.max(part.devices_read);
            }
            part
        });
        let mut fleet = build::fleet(self.describe(), now, built, read.problems);
        fleet.part = part;
        Ok(fleet)
    }
}

impl Source {
    /// The node open (`instance`): its processes and, from Prometheus, its devices' history.
    pub fn detail(&self, instance: &str) -> Result<detail::Detail, String> {
        match self {
            Source::Prometheus { client, base } => {
                detail::from_prometheus(client, base, instance, now())
            }
            Source::Endpoints { client, .. } => {
                let (status, body) = client.get(&endpoints::url_of(instance))?;
                if status != 200 {
                    return Err(format!("HTTP {status}"));
                }
                let series = expo::parse(&body, instance)?;
                Ok(detail::Detail {
                    instance: instance.to_string(),
                    processes: detail::processes(&series),
                    evidence: detail::evidence(&series),
                    history: BTreeMap::new(),
                    no_history: Some(
                        "no history: endpoints are read without one (Prometheus keeps it: --prometheus)"
                            .into(),
                    ),
                    problems: Vec::new(),
                })
            }
        }
    }
}

fn sort_of(sort: crate::cli::FleetSort) -> model::Sort {
    match sort {
        crate::cli::FleetSort::Urgency => model::Sort::Urgency,
        crate::cli::FleetSort::Node => model::Sort::Node,
        crate::cli::FleetSort::Used => model::Sort::Used,
    }
}

fn now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// `strata fleet`: exit status 0 when the fleet was read, 1 when it could not be (one line on
/// stderr, with a hint).
pub fn run(args: &FleetArgs) -> ExitCode {
    let source = match Source::from_args(args) {
        Ok(s) => s,
        Err(why) => {
            eprintln!("strata fleet: {why}");
            return ExitCode::from(1);
        }
    };
    let scrape_interval = args.scrape_interval.unwrap_or(match source {
        Source::Prometheus { .. } => 15.0,
        Source::Endpoints { .. } => args.refresh,
    });
    if args.json {
        let window = model::Window {
            rows: args.rows.map(|r| r as usize),
            sort: sort_of(args.sort),
            reversed: args.reversed,
            filter: args.filter.clone().unwrap_or_default(),
        };
        return match source.read(scrape_interval, &window) {
            Ok(mut fleet) => {
                fleet.keep_matching(&window.filter);
                println!("{}", serde_json::to_string(&fleet).unwrap_or_default());
                ExitCode::SUCCESS
            }
            Err(why) => {
                let out = serde_json::json!({"schema": "strata.fleet/1", "error": why});
                println!("{out}");
                eprintln!("strata fleet: {why}");
                ExitCode::from(1)
            }
        };
    }
    let mut view = view::FleetView::new(args.ssh_command.clone());
    view.sort = sort_of(args.sort);
    view.reversed = args.reversed;
    if let Some(filter) = &args.filter {
        view.filter = filter
            .chars()
            .filter(|c| !c.is_control())
            .take(64)
            .collect();
        view.kept_filter = view.filter.clone();
    }
    if let Some(rows) = args.rows {
        view.window_rows = rows as usize;
    }
    match screen::run(source, scrape_interval, args.refresh, view) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("strata fleet: {e}");
            ExitCode::from(1)
        }
    }
}
