//! What the monitor's screen shows of the processes, told to the source that samples them: a
//! process off the screen needs no CPU time or resident memory read at every sample
//! ([`crate::source::procfs::ProcFs::identity_lean`]). Every consumer that keeps or shows
//! every process (`record`, `serve`, `snapshot`, a sort by CPU or host memory, a recording
//! made from the monitor) wants everything, which is also what a source assumes until told
//! otherwise.

use hashbrown::HashSet;
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
    /// Before the first frame: the pids of the `n` records (a process on a device) that hold
    /// the most GPU memory, the larger first and among equals the lower pid: what a table in
    /// its default order (used, largest first) shows first, `n` being the screen's lines.
    Largest(usize),
}

impl Wanted {
    /// Whether `pid`'s figures are wanted ([`Wanted::Largest`] first made [`Wanted::Pids`]
    /// by [`Wanted::resolve`]; unresolved, it wants none).
    pub fn wants(&self, pid: u32) -> bool {
        match self {
            Wanted::Everything => true,
            Wanted::Pids(pids) => pids.contains(&pid),
            Wanted::Largest(_) => false,
        }
    }

    /// [`Wanted::Largest`] made the pids it names among `listed`, a sample's records as
    /// (pid, GPU memory used, `None` where unknown: after every known figure); the others
    /// as they are.
    pub fn resolve(self, listed: impl Iterator<Item = (u32, Option<u64>)>) -> Wanted {
        let Wanted::Largest(n) = self else {
            return self;
        };
        let mut records: Vec<(u32, Option<u64>)> = listed.collect();
        let order = |a: &(u32, Option<u64>), b: &(u32, Option<u64>)| {
            // `None` sorts below every `Some`: descending puts it last.
            b.1.cmp(&a.1).then(a.0.cmp(&b.0))
        };
        if records.len() > n {
            records.select_nth_unstable_by(n, order);
            records.truncate(n);
        }
        Wanted::Pids(records.into_iter().map(|(pid, _)| pid).collect())
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

#[cfg(test)]
mod tests {
    use super::*;

    fn pids(wanted: Wanted) -> Vec<u32> {
        let Wanted::Pids(pids) = wanted else {
            panic!("not resolved to pids: {wanted:?}");
        };
        let mut pids: Vec<u32> = pids.into_iter().collect();
        pids.sort_unstable();
        pids
    }

    /// The first screen's rows are the largest holders, ties by the lower pid, unknown last.
    #[test]
    fn largest_names_the_biggest_holders_as_the_table_orders_them() {
        let listed = [
            (10, Some(5u64 << 30)),
            (11, None),
            (12, Some(1 << 30)),
            (13, Some(5 << 30)),
            (14, Some(2 << 30)),
            (9, Some(1 << 30)),
        ];
        let resolve = |n| pids(Wanted::Largest(n).resolve(listed.into_iter()));
        assert_eq!(resolve(2), [10, 13]);
        assert_eq!(resolve(3), [10, 13, 14]);
        assert_eq!(resolve(4), [9, 10, 13, 14]);
        assert_eq!(resolve(5), [9, 10, 12, 13, 14]);
        assert_eq!(resolve(6), [9, 10, 11, 12, 13, 14]);
        assert_eq!(resolve(60), [9, 10, 11, 12, 13, 14]);
        assert_eq!(resolve(0), Vec::<u32>::new());
        // A process on two devices is one pid.
        let twice = [(7, Some(3u64)), (7, Some(2)), (8, Some(1))];
        assert_eq!(pids(Wanted::Largest(2).resolve(twice.into_iter())), [7]);
    }

    /// What is not `Largest` stays as it was.
    #[test]
    fn resolving_leaves_everything_and_pids_alone() {
        let listed = || [(1, Some(1u64))].into_iter();
        assert_eq!(Wanted::Everything.resolve(listed()), Wanted::Everything);
        let some = Wanted::Pids(HashSet::from([4]));
        assert_eq!(some.clone().resolve(listed()), some);
    }
}
