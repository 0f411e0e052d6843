//! Processes grouped by who owns them (the launcher of a job's workers, a pod or container,
//! a Slurm job, a user), summed per device: NVML used and each layer, exactly, over the
//! members whose share is known, marked partial where another member's is not. Devices are
//! never summed into each other, and peaks are never summed at all.

use super::device::unknown_shares;
use super::{Bounds, ProcessAccount};
use crate::layers::{Layer, Layers};
use crate::sample::owner::OwnerKind;
use crate::sample::{NodeSample, ProcessSample};
use serde::Serialize;
use std::collections::BTreeMap;

/// What processes are grouped by (`g` in the monitor, `snapshot --group-by`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GroupBy {
    /// No grouping: one row a process.
    #[default]
    None,
    /// The launcher that started them (a torchrun job's workers together).
    Launcher,
    /// Their pod, else their container.
    Pod,
    /// Their Slurm job.
    Slurm,
    /// Their user.
    User,
}

impl GroupBy {
    /// The order `g` cycles through.
    pub(crate) const CYCLE: [GroupBy; 5] = [
        GroupBy::None,
        GroupBy::Launcher,
        GroupBy::Pod,
        GroupBy::Slurm,
        GroupBy::User,
    ];

    pub(crate) fn next(self) -> GroupBy {
        let i = Self::CYCLE.iter().position(|&g| g == self).unwrap_or(0);
        Self::CYCLE[(i + 1) % Self::CYCLE.len()]
    }

    pub(crate) fn label(self) -> &'static str {
        match self {
            GroupBy::None => "none",
            GroupBy::Launcher => "launcher",
            GroupBy::Pod => "pod",
            GroupBy::Slurm => "slurm",
            GroupBy::User => "user",
        }
    }

    /// Parses `--group-by`'s value.
    pub(crate) fn parse(text: &str) -> Result<GroupBy, String> {
        Self::CYCLE
            .into_iter()
            .find(|g| g.label() == text)
            .ok_or_else(|| {
                format!("`{text}` is not a grouping: none, launcher, pod, slurm or user")
            })
    }

    /// The group a process falls in, in words (`torchrun 4242`, `pod train/llama-7b-0`,
    /// `slurm 81234`, `user ana`), or `None` when nothing of this kind names it: it then
    /// stands alone.
    pub(crate) fn key(self, process: &ProcessSample) -> Option<String> {
        let owner = process.owner.as_deref();
        match self {
            GroupBy::None => None,
            GroupBy::Launcher => owner.and_then(|o| {
                let pid = o.launcher_pid?;
                Some(format!(
                    "{} {pid}",
                    o.launcher.as_deref().unwrap_or("launcher")
                ))
            }),
            GroupBy::Pod => owner
                .filter(|o| matches!(o.kind, OwnerKind::Pod | OwnerKind::Container))
                .and_then(|o| o.short()),
            GroupBy::Slurm => owner
                .and_then(|o| o.slurm_job.as_ref())
                .map(|job| format!("slurm {job}")),
            GroupBy::User => process.user.as_ref().map(|u| format!("user {u}")),
        }
    }
}

/// The members of one group on one device, summed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct GroupRow {
    pub(crate) key: String,
    pub(crate) device_uuid: String,
    /// The members' positions in the sample's `processes`.
    #[serde(skip)]
    pub(crate) members: Vec<usize>,
    pub(crate) pids: Vec<u32>,
    /// NVML used, summed over the members that report it.
    pub(crate) used: Option<u64>,
    /// Whether some member's NVML used is unknown: `used` is then a lower bound.
    pub(crate) used_partial: bool,
    /// Each layer summed over the members that report it: `None` when none does (an unfed
    /// process reports only `unattributed`, a fed one the pool's layers and its context);
    /// `other` and `free` belong to the device, not to a group.
    pub(crate) layers: Layers,
    /// The layers only partly known: lower bounds.
    pub(crate) partial: Vec<Layer>,
    /// The layers summed from bounds rather than exact figures (an estimated context is an
    /// upper bound, the memory outside the pool beside it a lower one).
    pub(crate) bounds: Bounds,
}

fn layers_slot(layers: &mut Layers, layer: Layer) -> &mut Option<u64> {
    match layer {
        Layer::Live => &mut layers.live,
        Layer::Fragmented => &mut layers.fragmented,
        Layer::Cached => &mut layers.cached,
        Layer::OutsidePool => &mut layers.outside_pool,
        Layer::Context => &mut layers.context,
        Layer::Unattributed => &mut layers.unattributed,
        Layer::Other => &mut layers.other,
        Layer::Free => &mut layers.free,
    }
}

/// The groups of a sample: one row per (group, device), ordered by key then device. A
/// process that `by` does not name is in no group.
pub(crate) fn groups(
    sample: &NodeSample,
    accounts: &[ProcessAccount],
    by: GroupBy,
) -> Vec<GroupRow> {
    let mut buckets: BTreeMap<(String, String), Vec<usize>> = BTreeMap::new();
    for (i, process) in sample.processes.iter().enumerate() {
        if let Some(key) = by.key(process) {
            buckets
                .entry((key, process.device_uuid.to_string()))
                .or_default()
                .push(i);
        }
    }
    buckets
        .into_iter()
        .map(|((key, device_uuid), members)| {
            let mut layers = Layers::default();
            let mut unknown = Vec::new();
            let mut used: Option<u64> = None;
            let mut used_partial = false;
            for &i in &members {
                let (process, account) = (&sample.processes[i], &accounts[i]);
                match process.used {
                    Some(bytes) => used = Some(used.unwrap_or(0).saturating_add(bytes)),
                    None => used_partial = true,
                }
                layers.absorb(&account.layers.as_device_share());
                unknown.extend(unknown_shares(process, account));
            }
            // A sum of bounds is a bound of the same side; of both sides, nothing is known.
            let mut bounds = Bounds::new();
            let mut conflicting = Vec::new();
            for &i in &members {
                for (layer, bound) in accounts[i].bounds() {
                    match bounds.insert(layer, bound) {
                        Some(other) if other != bound => conflicting.push(layer),
                        _ => {}
                    }
                }
            }
            for layer in conflicting {
                bounds.remove(&layer);
                *layers_slot(&mut layers, layer) = None;
            }
            let mut partial: Vec<Layer> = Layer::ALL
                .into_iter()
                .filter(|&l| unknown.contains(&l) && layers.get(l).is_some())
                .collect();
            partial.dedup();
            GroupRow {
                key,
                device_uuid,
                bounds,
                pids: members.iter().map(|&i| sample.processes[i].pid).collect(),
                members,
                used,
                used_partial: used_partial && used.is_some(),
                layers,
                partial,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::accounting::ProcessLayers;
    use crate::fixtures::process;
    use crate::sample::owner::{from, Owner};
    use std::sync::Arc;

    fn owned(
        mut p: ProcessSample,
        fields: &[(&str, &str)],
        launcher: Option<u32>,
    ) -> ProcessSample {
        let mut owner = Owner::default();
        for (f, v) in fields {
            owner.set(f, v.to_string(), from::CGROUP);
        }
        owner.launcher_pid = launcher;
        owner.settle_kind();
        p.owner = Some(Arc::new(owner));
        p
    }

    fn unfed(used: Option<u64>) -> ProcessAccount {
        ProcessAccount {
            layers: ProcessLayers {
                unattributed: used,
                ..ProcessLayers::default()
            },
            feed_status: crate::accounting::FeedStatus::Absent,
            context_source: None,
        }
    }

    #[test]
    fn a_group_sums_its_members_per_device_and_never_across_devices() {
        let mut sample = crate::fixtures::node();
        sample.processes = vec![
            owned(process(10, "GPU-a", Some(100)), &[("slurm_job", "7")], None),
            owned(process(11, "GPU-a", Some(50)), &[("slurm_job", "7")], None),
            owned(process(12, "GPU-b", Some(30)), &[("slurm_job", "7")], None),
            owned(process(13, "GPU-a", None), &[("slurm_job", "8")], None),
            process(14, "GPU-a", Some(9)),
        ];
        let accounts: Vec<ProcessAccount> =
            sample.processes.iter().map(|p| unfed(p.used)).collect();
        let rows = groups(&sample, &accounts, GroupBy::Slurm);
        type Summary<'a> = (&'a str, &'a str, Option<u64>, bool, Vec<u32>);
        let summary: Vec<Summary> = rows
            .iter()
            .map(|r| {
                (
                    r.key.as_str(),
                    r.device_uuid.as_str(),
                    r.used,
                    r.used_partial,
                    r.pids.clone(),
                )
            })
            .collect();
        assert_eq!(
            summary,
            vec![
                ("slurm 7", "GPU-a", Some(150), false, vec![10, 11]),
                ("slurm 7", "GPU-b", Some(30), false, vec![12]),
                ("slurm 8", "GPU-a", None, false, vec![13]),
            ]
        );
        assert_eq!(rows[0].layers.unattributed, Some(150));
        assert_eq!(
            rows[0].layers.live, None,
            "no member reports tensors: n/a, not 0"
        );
        assert_eq!(rows[0].layers.other, None, "the device's, not the group's");
        // A member whose NVML figure is unknown makes its layer unknown, never 0.
        assert_eq!(rows[2].layers.unattributed, None);
    }

    #[test]
    fn an_unknown_member_marks_the_sum_partial() {
        let mut sample = crate::fixtures::node();
        sample.processes = vec![
            owned(process(20, "GPU-a", Some(100)), &[], Some(5)),
            owned(process(21, "GPU-a", None), &[], Some(5)),
        ];
        let accounts: Vec<ProcessAccount> =
            sample.processes.iter().map(|p| unfed(p.used)).collect();
        let rows = groups(&sample, &accounts, GroupBy::Launcher);
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].key, "launcher 5");
        assert_eq!((rows[0].used, rows[0].used_partial), (Some(100), true));
        assert_eq!(rows[0].partial, vec![Layer::Unattributed]);
    }

    #[test]
    fn groupings_cycle_and_parse() {
        let mut by = GroupBy::None;
        let mut seen = Vec::new();
        for _ in 0..5 {
            by = by.next();
            seen.push(by.label());
        }
        assert_eq!(seen, ["launcher", "pod", "slurm", "user", "none"]);
        assert_eq!(GroupBy::parse("pod"), Ok(GroupBy::Pod));
        assert!(GroupBy::parse("rack").is_err());
    }
}
