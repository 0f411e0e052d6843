//! What doctor says of NVML's refusals and hangs, for the driver's, the GPUs' and the MIG
//! instances' checks alike: a leaf, so that those three import it and not each other.

use crate::source::nvml::probe::{Refused, RefusedKind};

/// What to do when an NVML call hangs.
pub(super) const NVML_HUNG: &str = "the driver may be hung: check `nvidia-smi` and `dmesg` (Xid errors); the monitor shows such a poll as stale";

/// What to do about refusals, the most pressing first.
pub(super) fn fix_for(refusals: &[&Refused]) -> &'static str {
    let any = |kind| refusals.iter().any(|r| r.kind == kind);
    if any(RefusedKind::Lost) {
        "the GPU has fallen off the bus: see `dmesg` (Xid errors), then reset it (`nvidia-smi -r`) or reboot"
    } else if any(RefusedKind::NeedsRoot) {
        "run strata as root: NVML gives these to root only here"
    } else if any(RefusedKind::MissingCall) {
        "upgrade the driver to R510 or later"
    } else {
        "check the GPU with `nvidia-smi -q` and `dmesg`; strata asks again at every poll"
    }
}

/// The refusals' lines, those that differ only by their call said once:
/// `NVML_ERROR_NO_PERMISSION (nvmlA, nvmlB): needs root`.
pub(super) fn lines(refusals: &[&Refused]) -> String {
    let mut said: Vec<(String, Vec<&str>)> = Vec::new();
    for r in refusals {
        let key = r.line.replacen(&format!("({})", r.call), "()", 1);
        match said.iter_mut().find(|(k, _)| *k == key) {
            Some((_, calls)) => calls.push(r.call),
            None => said.push((key, vec![r.call])),
        }
    }
    said.iter()
        .map(|(key, calls)| key.replacen("()", &format!("({})", calls.join(", ")), 1))
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_that_differ_only_by_call_are_said_once() {
        let root = |call: &'static str| Refused {
            line: format!("NVML_ERROR_NO_PERMISSION ({call}): needs root"),
            call,
            kind: RefusedKind::NeedsRoot,
        };
        let other = Refused {
            line: "NVML_ERROR_UNKNOWN (c): no reason".into(),
            call: "c",
            kind: RefusedKind::Other,
        };
        let (a, b) = (root("nvmlA"), root("nvmlB"));
        assert_eq!(
            lines(&[&a, &other, &b]),
            "NVML_ERROR_NO_PERMISSION (nvmlA, nvmlB): needs root; NVML_ERROR_UNKNOWN (c): no reason"
        );
    }
}
