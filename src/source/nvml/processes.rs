//! The process lists of one device (compute, graphics and MPS clients), merged per pid: one
//! holder per pid and device, never counted twice.

use super::api::{Api, ListKind, Listed};
use super::query::Handle;
use super::refusal::Refusal;
use crate::sample::ContextKind;
use std::collections::BTreeMap;

/// One process holding memory on one device, as NVML listed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Holding {
    pub(super) used: Option<u64>,
    pub(super) kind: ContextKind,
    /// Listed by the MPS call: a client of an MPS server.
    pub(super) mps: bool,
    /// The GPU and compute instance ids NVML gave with the entry (MIG mode).
    pub(super) instance: Option<(u32, u32)>,
}

/// What the lists of one device said.
#[derive(Debug, Default)]
pub(super) struct Lists {
    pub(super) by_pid: BTreeMap<u32, Holding>,
    /// The lists that could not be read (a `NotSupported` graphics or MPS list, or a driver
    /// without those calls at all, is no gap: not here).
    pub(super) refused: Vec<Refusal>,
    /// A list answered `GPU_IS_LOST`.
    pub(super) lost: bool,
}

impl Lists {
    /// Whether every list that matters was read.
    pub(super) fn known(&self) -> bool {
        self.refused.is_empty() && !self.lost
    }

    /// The refusals, one line each, joined: the `processes` problem of the device.
    pub(super) fn problem(&self) -> Option<String> {
        (!self.refused.is_empty()).then(|| {
            self.refused
                .iter()
                .map(Refusal::line)
                .collect::<Vec<_>>()
                .join("; ")
        })
    }

    fn add(&mut self, list: Vec<Listed>, kind: ListKind) {
        let context = match kind {
            ListKind::Graphics => ContextKind::Graphics,
            ListKind::Compute | ListKind::Mps => ContextKind::Compute,
        };
        for entry in list {
            let mps = kind == ListKind::Mps;
            self.by_pid
                .entry(entry.pid)
                .and_modify(|h| {
                    // The same context listed twice: one holder, never counted twice.
                    h.used = match (h.used, entry.used) {
                        (Some(a), Some(b)) => Some(a.max(b)),
                        (a, b) => a.or(b),
                    };
                    if h.kind != context {
                        h.kind = ContextKind::ComputeGraphics;
                    }
                    h.mps |= mps;
                    h.instance = h.instance.or(entry.instance);
                })
                .or_insert(Holding {
                    used: entry.used,
                    kind: context,
                    mps,
                    instance: entry.instance,
                });
        }
    }
}

/// Reads the three lists of the device behind `handle`.
pub(super) fn read(api: &Api, handle: Handle) -> Lists {
    let mut lists = Lists::default();
    for kind in ListKind::ALL {
        match api.processes(handle, kind) {
            Ok(list) => lists.add(list, kind),
            Err(refusal) if refusal.is_lost() => lists.lost = true,
            // Graphics and MPS lists are unsupported on many compute GPUs, and older drivers
            // lack the MPS call (the node's `driver` problem says so): not a gap in the
            // compute picture.
            Err(refusal)
                if kind != ListKind::Compute && (refusal.is_not_supported() || api.lacks(kind)) => {
            }
            Err(refusal) => lists.refused.push(refusal),
        }
    }
    lists
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listed(pid: u32, used: Option<u64>) -> Listed {
        Listed {
            pid,
            used,
            instance: None,
        }
    }

    #[test]
    fn one_holder_per_pid_whatever_lists_name_it() {
        let mut lists = Lists::default();
        lists.add(
            vec![listed(1, Some(10)), listed(2, None)],
            ListKind::Compute,
        );
        lists.add(
            vec![listed(1, Some(12)), listed(3, Some(5))],
            ListKind::Graphics,
        );
        lists.add(vec![listed(2, Some(7)), listed(4, None)], ListKind::Mps);
        let got: Vec<(u32, Option<u64>, ContextKind, bool)> = lists
            .by_pid
            .iter()
            .map(|(pid, h)| (*pid, h.used, h.kind, h.mps))
            .collect();
        assert_eq!(
            got,
            [
                (1, Some(12), ContextKind::ComputeGraphics, false),
                (2, Some(7), ContextKind::Compute, true),
                (3, Some(5), ContextKind::Graphics, false),
                (4, None, ContextKind::Compute, true),
            ]
        );
        assert!(lists.known());
        assert_eq!(lists.problem(), None);
    }

    #[test]
    fn refusals_make_the_lists_unknown_and_say_why() {
        let lists = Lists {
            refused: vec![
                Refusal::code("nvmlDeviceGetComputeRunningProcesses_v3", 999),
                Refusal::code("nvmlDeviceGetMPSComputeRunningProcesses_v3", 4),
            ],
            ..Lists::default()
        };
        assert!(!lists.known());
        let problem = lists.problem().unwrap_or_default();
        assert!(problem.starts_with("NVML_ERROR_UNKNOWN (nvmlDeviceGetComputeRunningProcesses_v3)"));
        assert!(problem
            .contains("; NVML_ERROR_NO_PERMISSION (nvmlDeviceGetMPSComputeRunningProcesses_v3)"));
    }
}
