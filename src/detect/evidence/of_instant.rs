//! The evidence of findings of one instant: processes, feeds, devices.

use super::units::{Bytes, Count, Figure, IfKnown, Index, Item, Pid, Secs, Ticks, Uid};
use crate::accounting::Gap;
use crate::sample::feed::{CutShort as CutShortEntry, FeedCounters, SuspiciousEntry};
use serde::{Deserialize, Deserializer};

evidence! {
    /// A holder of a device file (`/dev/nvidiaN`, `/dev/nvidia-uvm`) a zombie context is on.
    pub struct Holder {
        pub(crate) command: Option<String>,
        /// Whether NVML lists it: it has a context of its own.
        pub(crate) listed: bool,
        pub(crate) parent_command: Option<String>,
        pub(crate) pid: Pid,
        pub(crate) ppid: Option<Pid>,
        /// Who the pid named when it was found.
        pub(crate) start_time: Option<Ticks>,
        /// `/proc/PID/stat`'s state letter (`Z`: defunct).
        pub(crate) state: Option<String>,
        pub(crate) user: Option<String>,
    }

    /// What a process NVML lists holds: a zombie context (with who holds its device file
    /// open, where the files were searched), or a holder in another PID namespace.
    pub struct Holding {
        #[serde(default, skip_serializing_if = "IfKnown::is_none")]
        pub(crate) device_file: IfKnown<String>,
        /// Those without a context of their own first.
        #[serde(default, skip_serializing_if = "IfKnown::is_none")]
        pub(crate) holders: IfKnown<Vec<Holder>>,
        pub(crate) used: Option<Bytes>,
    }

    /// Many of one kind of holding, as one finding.
    pub struct HeldGroup {
        pub(crate) bytes: Bytes,
        pub(crate) devices: Vec<String>,
        /// The holders of the device files the group's findings name, each once.
        #[serde(default, skip_serializing_if = "IfKnown::is_none")]
        pub(crate) holders: IfKnown<Vec<Holder>>,
        pub(crate) pids: Vec<Pid>,
    }

    /// Python processes without a feed, and what they hold.
    pub struct Unattributed {
        pub(crate) bytes: Bytes,
        pub(crate) pids: Vec<Pid>,
    }

    /// Usage no listed process accounts for on one device.
    pub struct Unexplained {
        pub(crate) bytes: Bytes,
        /// The device as messages name it: `GPU 2`.
        pub(crate) device: String,
        /// The device's `other` layer.
        pub(crate) other: Option<Bytes>,
    }

    /// One device of grouped unexplained usage.
    pub(crate) struct UnexplainedDevice {
        pub(crate) bytes: Bytes,
        pub(crate) device: String,
        pub(crate) other: Option<Bytes>,
        pub(crate) uuid: Option<String>,
    }

    /// Unexplained usage on several devices.
    pub struct UnexplainedGroup {
        pub(crate) bytes: Bytes,
        pub(crate) devices: Vec<UnexplainedDevice>,
    }

    /// A feed too old to combine.
    pub struct Stale {
        pub(crate) age: Secs,
    }

    /// No figures.
    pub struct Nothing {}

    /// A refused or dropped feed.
    pub struct Refused {
        pub(crate) socket: String,
    }

    /// The lines of a feed, by what became of them.
    pub struct BadInput {
        pub(crate) floods: Count,
        pub(crate) invalid: Count,
        pub(crate) lines: Count,
        pub(crate) malformed: Count,
        pub(crate) oversized: Count,
        pub(crate) rate_limited: Count,
        pub(crate) samples: Count,
        pub(crate) unknown_type: Count,
        pub(crate) unknown_version: Count,
    }

    /// A feed's device NVML does not list its process on.
    pub struct Unlisted {
        pub(crate) index: Index,
        pub(crate) reason: String,
    }

    /// One device of a feed's grouped unlisted devices.
    pub(crate) struct UnlistedDevice {
        pub(crate) index: Index,
        pub(crate) reason: String,
        pub(crate) uuid: Option<String>,
    }

    /// Several devices of one feed that NVML does not list its process on.
    pub struct UnlistedGroup {
        pub(crate) devices: Vec<UnlistedDevice>,
    }

    /// A feed dir with more entries than a scan reads.
    pub struct CutShort {
        pub(crate) dir: String,
        /// Entries counted, at most a bound; `entries_capped`: there are more.
        pub(crate) entries: Count,
        pub(crate) entries_capped: bool,
        /// Entries read.
        pub(crate) read: Count,
    }

    /// Many feed dirs cut short: how many, and the first of them.
    pub struct CutShortGroup {
        pub(crate) dirs: Count,
        pub(crate) first: Vec<CutShort>,
    }

    /// An entry where a feed dir or an agent's socket belongs that is not one.
    pub struct Suspicious {
        /// What belongs there: `socket` or `feed_dir`.
        pub(crate) in_place_of: String,
        /// What it is: `symbolic link`, `FIFO`...
        pub(crate) kind: String,
        pub(crate) owner: Uid,
        pub(crate) path: String,
        pub(crate) pids: Vec<Pid>,
        /// Where a symbolic link points.
        pub(crate) target: Option<String>,
    }

    /// Many suspicious entries: how many, the first of them, their owners.
    pub struct SuspiciousGroup {
        pub(crate) entries: Count,
        pub(crate) first: Vec<Suspicious>,
        pub(crate) owners: Vec<Uid>,
    }

    /// What NVML answered.
    pub struct NvmlError {
        pub(crate) error: String,
    }

    /// NVML's counters contradicting each other ([`Gap`]): `reason` says how, with the figures
    /// of that reason.
    pub struct Contradiction {
        /// Bytes the processes hold (`processes_exceed_occupied`). Shown as a bare count, as
        /// before evidence was typed.
        #[serde(default, skip_serializing_if = "IfKnown::is_none")]
        pub(crate) attributed: IfKnown<Count>,
        #[serde(default, skip_serializing_if = "IfKnown::is_none")]
        pub(crate) free: IfKnown<Bytes>,
        /// Bytes NVML says are occupied (`processes_exceed_occupied`). Shown as a bare count,
        /// as before evidence was typed.
        #[serde(default, skip_serializing_if = "IfKnown::is_none")]
        pub(crate) occupied: IfKnown<Count>,
        #[serde(default, skip_serializing_if = "IfKnown::is_none")]
        pub(crate) pid: IfKnown<Pid>,
        pub(crate) reason: String,
        #[serde(default, skip_serializing_if = "IfKnown::is_none")]
        pub(crate) reserved: IfKnown<Bytes>,
        #[serde(default, skip_serializing_if = "IfKnown::is_none")]
        pub(crate) total: IfKnown<Bytes>,
        /// `null` where an implausible process's usage is not reported.
        #[serde(
            default,
            skip_serializing_if = "IfKnown::is_none",
            deserialize_with = "present"
        )]
        pub(crate) used: IfKnown<Option<Bytes>>,
    }
}

records!(UnexplainedDevice, UnlistedDevice, CutShort, Suspicious);

/// Holders are one line each, written as a holder.
impl Item for Holder {
    fn list(items: &[Self]) -> Figure<'_> {
        Figure::Holders(items)
    }
}

/// How a gap is named in its JSON (`reason`).
fn reason(gap: &Gap) -> &'static str {
    match gap {
        Gap::Lost => "lost",
        Gap::MemoryUnknown => "memory_unknown",
        Gap::FreeExceedsTotal { .. } => "free_exceeds_total",
        Gap::UsedExceedsTotal { .. } => "used_exceeds_total",
        Gap::ReservedExceedsTotal { .. } => "reserved_exceeds_total",
        Gap::MemoryDoesNotAddUp { .. } => "memory_does_not_add_up",
        Gap::ImplausibleProcess { .. } => "implausible_process",
        Gap::ProcessesExceedOccupied { .. } => "processes_exceed_occupied",
    }
}

/// A field that is present, `null` or not.
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> Result<IfKnown<Option<T>>, D::Error> {
    Option::<T>::deserialize(d).map(|v| IfKnown(Some(v)))
}

impl From<&FeedCounters> for BadInput {
    fn from(c: &FeedCounters) -> Self {
        BadInput {
            floods: Count(c.floods),
            invalid: Count(c.invalid),
            lines: Count(c.lines),
            malformed: Count(c.malformed),
            oversized: Count(c.oversized),
            rate_limited: Count(c.rate_limited),
            samples: Count(c.samples),
            unknown_type: Count(c.unknown_type),
            unknown_version: Count(c.unknown_version),
        }
    }
}

impl From<&CutShortEntry> for CutShort {
    fn from(c: &CutShortEntry) -> Self {
        CutShort {
            dir: c.dir.clone(),
            entries: Count(c.entries),
            entries_capped: c.entries_capped,
            read: Count(c.read),
        }
    }
}

impl From<&SuspiciousEntry> for Suspicious {
    fn from(s: &SuspiciousEntry) -> Self {
        Suspicious {
            in_place_of: s.in_place_of.clone(),
            kind: s.kind.clone(),
            owner: Uid(s.owner),
            path: s.path.clone(),
            pids: s.pids.iter().copied().map(Pid).collect(),
            target: s.target.clone(),
        }
    }
}

impl From<&Gap> for Contradiction {
    fn from(gap: &Gap) -> Self {
        let bytes = |b: u64| IfKnown(Some(Bytes(b)));
        let mut c = Contradiction {
            attributed: IfKnown(None),
            free: IfKnown(None),
            occupied: IfKnown(None),
            pid: IfKnown(None),
            reason: reason(gap).to_string(),
            reserved: IfKnown(None),
            total: IfKnown(None),
            used: IfKnown(None),
        };
        match *gap {
            Gap::Lost | Gap::MemoryUnknown => {}
            Gap::FreeExceedsTotal { total, free } => {
                c.total = bytes(total);
                c.free = bytes(free);
            }
            Gap::UsedExceedsTotal { total, used } => {
                c.total = bytes(total);
                c.used = IfKnown(Some(Some(Bytes(used))));
            }
            Gap::ReservedExceedsTotal { total, reserved } => {
                c.total = bytes(total);
                c.reserved = bytes(reserved);
            }
            Gap::MemoryDoesNotAddUp {
                total,
                reserved,
                used,
                free,
            } => {
                c.total = bytes(total);
                c.reserved = bytes(reserved);
                c.used = IfKnown(Some(Some(Bytes(used))));
                c.free = bytes(free);
            }
            Gap::ImplausibleProcess { pid, used } => {
                c.pid = IfKnown(Some(Pid(pid)));
                c.used = IfKnown(Some(used.map(Bytes)));
            }
            Gap::ProcessesExceedOccupied {
                attributed,
                occupied,
            } => {
                c.attributed = IfKnown(Some(Count(attributed)));
                c.occupied = IfKnown(Some(Count(occupied)));
            }
        }
        c
    }
}
