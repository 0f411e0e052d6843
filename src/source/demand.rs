//! What the monitor's screen shows of the processes, told to the source that samples them: a
//! process off the screen needs no CPU time or resident memory read at every sample
//! ([`crate::source::procfs::ProcFs::identity_lean`]). Every consumer that keeps or shows
//! every process (`record`, `serve`, `snapshot`, a sort by CPU or host memory, a recording
//! made from the monitor) wants everything, which is also what a source assumes until told
//! otherwise.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

/// The processes whose figures are wanted at the next sample, shared by the screen (which
/// sets it after each draw) and the sampling thread (which reads it at each sample).
#[derive(Debug, Clone, Default)]
pub struct Demand(Arc<Mutex<Wanted>>);

/// Which processes' figures a sample must read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Wanted {
    /// Every process's.
    #[default]
    Everything,
    /// Those of these pids only.
    Pids(HashSet<u32>),
}

impl Wanted {
    /// Whether `pid`'s figures are wanted.
    pub fn wants(&self, pid: u32) -> bool {
        match self {
            Wanted::Everything => true,
            Wanted::Pids(pids) => pids.contains(&pid),
        }
    }
}

impl Demand {
    /// Sets what the next samples must read.
    pub fn set(&self, wanted: Wanted) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = wanted;
    }

    /// What a sample starting now must read.
    pub fn wanted(&self) -> Wanted {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}
