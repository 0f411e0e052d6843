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
        if let Some(pid) = finding.pid {
            labels.push(("pid", pid.to_string()));
            let process = sample.processes.iter().find(|p| {
                p.pid == pid && finding.device_uuid.as_deref() == Some(p.device_uuid.as_str())
            });
            if let Some(p) = process {
                if let Some(user) = &p.user {
                    labels.push(("user", label_text(user, COMMAND_CHARS)));
                }
                if let Some(command) = &p.command {
                    labels.push(("command", label_text(command, COMMAND_CHARS)));
                }
            }
        }
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
