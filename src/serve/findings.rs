//! Finding metrics of `strata serve`: active findings by kind and severity, and each climb's
//! rate.

use super::labels::{device_labels, label_text, Floats, Ints, COMMAND_CHARS};
use crate::detect::{Evidence, FindingKind, Severity};
use crate::pipeline::Observed;
use prometheus_client::registry::Registry;

fn severity_name(severity: Severity) -> &'static str {
    match severity {
        Severity::Info => "info",
        Severity::Warning => "warning",
        Severity::Critical => "critical",
    }
}

pub(super) fn register(registry: &mut Registry, observed: &Observed) {
    let sample = &observed.sample;
    let counts = Ints::default();
    for kind in FindingKind::ALL {
        for severity in [Severity::Info, Severity::Warning, Severity::Critical] {
            let n = observed
                .findings
                .iter()
                .filter(|f| f.kind == kind && f.severity == severity)
                .count();
            counts
                .get_or_create(&vec![
                    ("kind", kind.name()),
                    ("severity", severity_name(severity).to_string()),
                ])
                .set(i64::try_from(n).unwrap_or(i64::MAX));
        }
    }
    registry.register(
        "strata_findings",
        "Active findings by kind and severity",
        counts,
    );

    // By device: the same counts where a finding names a device (a node's own findings, a
    // feed dir's, have none and are counted above only). Bounded by devices × kinds; the
    // fleet ranks devices by these without reading every process's series.
    let by_device = Ints::default();
    let mut counted: std::collections::BTreeMap<(&str, String, &'static str), i64> =
        std::collections::BTreeMap::new();
    for finding in &observed.findings {
        if let Some(uuid) = &finding.device_uuid {
            *counted
                .entry((
                    uuid.as_str(),
                    finding.kind.name(),
                    severity_name(finding.severity),
                ))
                .or_default() += 1;
        }
    }
    for ((uuid, kind, severity), n) in counted {
        let mut labels = device_labels(sample, uuid);
        labels.push(("kind", kind));
        labels.push(("severity", severity.to_string()));
        by_device.get_or_create(&labels).set(n);
    }
    registry.register(
        "strata_device_findings",
        "Active findings that name a device, by kind and severity (absent where none)",
        by_device,
    );

    // Each OOM forecast's time left: one series per forecast (a climbing process).
    let forecast = Floats::default();
    for finding in &observed.findings {
        let Evidence::OomForecast(evidence) = &finding.evidence else {
            continue;
        };
        let eta = evidence.eta_secs.0;
        if !eta.is_finite() {
            continue;
        }
        let mut labels = match &finding.device_uuid {
            Some(uuid) => device_labels(sample, uuid),
            None => Vec::new(),
        };
        labels.extend(process_names(sample, finding));
        forecast.get_or_create(&labels).set(eta);
    }
    registry.register(
        "strata_oom_forecast_seconds",
        "Time left before an OOM forecast runs out of memory at its climb's present rate",
        forecast,
    );

    let climb = Floats::default();
    for finding in &observed.findings {
        let Evidence::Climb(evidence) = &finding.evidence else {
            continue;
        };
        let rate = evidence.rate_mib_per_min.0;
        if !rate.is_finite() {
            continue;
        }
        let mut labels = match &finding.device_uuid {
            Some(uuid) => device_labels(sample, uuid),
            None => Vec::new(),
        };
        labels.extend(process_names(sample, finding));
        for (name, value) in [("series", &evidence.series), ("cause", &evidence.cause)] {
            labels.push((name, label_text(value, 32)));
        }
        climb
            .get_or_create(&labels)
            .set(rate * (1u64 << 20) as f64 / 60.0);
    }
    registry.register(
        "strata_climb_rate_bytes_per_second",
        "How fast a climbing series rises (a climb finding's rate), bytes a second; series: allocated, reserved, used...; cause: the layer that grows",
        climb,
    );
}

/// A finding's process as labels: `pid`, its `user` and `command` where known, and its
/// owner's labels (empty where nothing names one).
fn process_names(
    sample: &crate::sample::NodeSample,
    finding: &crate::detect::Finding,
) -> super::labels::Labels {
    let mut labels = Vec::new();
    if let Some(pid) = finding.pid {
        labels.push(("pid", pid.to_string()));
        let process = sample
            .processes
            .iter()
            .find(|p| p.pid == pid && finding.device_uuid.as_deref() == Some(&*p.device_uuid));
        if let Some(p) = process {
            if let Some(user) = &p.user {
                labels.push(("user", label_text(user, COMMAND_CHARS)));
            }
            if let Some(command) = &p.command {
                labels.push(("command", label_text(command, COMMAND_CHARS)));
            }
        }
        // Its owner, as on its per-process series: a fleet names the job and rank of a
        // climb or a forecast without a join.
        labels.extend(super::labels::owner_labels(
            process.and_then(|p| p.owner.as_deref()),
        ));
    }
    labels
}
