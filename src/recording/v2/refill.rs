//! Decoding into a sample already read and given back ([`super::Decoder::recycle`]): each
//! thing's rest is copied into the one at its place with `clone_from`, which keeps the
//! strings' and vectors' buffers, so that a long read does not allocate and free every
//! command line, UUID and socket path at every sample.
//!
//! Each copy names every field of what it copies from, so that a field added to a sample
//! type does not compile here until it is copied too; the types declared through
//! `sample::fields::schema!` (a GPU's own figures, a process) are copied from their
//! declaration, so a field added there is copied with no change here. A part whose `clone_from` is a whole
//! new copy (a derived `Clone`: a feed's state, a feed scan) is compared first and copied only
//! where it differs: the thing at a place is almost always the one a sample before held
//! there, and comparing costs no allocation.

use crate::sample::feed::FeedRecord;
use crate::sample::{GpuSample, NodeSample};

pub(crate) use crate::sample::fields::Refill;

/// `to` made equal to `from`, copied only where they differ (for types whose `clone_from`
/// makes a whole new copy). Equal as values: a float zero kept would keep its sign (`-0.0`
/// equals `0.0`), which no figure of these parts means anything by.
pub(super) fn copy_if_changed<T: Clone + PartialEq>(to: &mut T, from: &T) {
    if to != from {
        to.clone_from(from);
    }
}

/// The thing at place `i` of `out`, made equal to `from`: the one already there refilled,
/// or a copy of `from` pushed (places are filled in order: `i` is at most `out.len()`).
pub(crate) fn at<'a, T: Refill + Clone>(out: &'a mut Vec<T>, i: usize, from: &T) -> &'a mut T {
    if i < out.len() {
        out[i].refill(from);
    } else {
        out.push(from.clone());
    }
    &mut out[i]
}

/// A GPU's own figures and a process are refilled field by field from their declaration
/// (`sample::fields::schema!`); a GPU's instances are few and copied whole.
impl Refill for GpuSample {
    fn refill(&mut self, from: &Self) {
        let GpuSample {
            info,
            mig,
            problems,
        } = from;
        self.info.refill(info);
        self.mig.clone_from(mig);
        self.problems.clone_from(problems);
    }
}

/// A feed's rest, all but its devices' readings (which the decoder fills in place).
impl Refill for FeedRecord {
    fn refill(&mut self, from: &Self) {
        let FeedRecord {
            socket,
            found_via,
            peer,
            nspid,
            state,
            hello,
            devices: _,
            ooms,
            counters,
            connected_at,
            last_heard,
            segments,
            sites,
        } = from;
        self.socket.clone_from(socket);
        self.found_via = *found_via;
        self.peer = *peer;
        self.nspid = *nspid;
        copy_if_changed(&mut self.state, state);
        self.hello.clone_from(hello);
        self.ooms.clone_from(ooms);
        self.counters = *counters;
        self.connected_at = *connected_at;
        self.last_heard = *last_heard;
        self.segments.clone_from(segments);
        self.sites.clone_from(sites);
    }
}

/// The node's rest, all but its GPUs, processes and feeds (which the decoder fills in place).
impl Refill for NodeSample {
    fn refill(&mut self, from: &Self) {
        let NodeSample {
            time,
            interval,
            host,
            demo,
            driver_version,
            cuda_driver_version,
            host_pid_namespace,
            gpus: _,
            processes: _,
            feeds: _,
            feed_scan,
            host_cpu_percent,
            host_memory,
            device_files,
            poll_secs,
            problems,
        } = from;
        self.time = *time;
        self.interval = *interval;
        self.host.clone_from(host);
        self.demo = *demo;
        self.driver_version.clone_from(driver_version);
        self.cuda_driver_version.clone_from(cuda_driver_version);
        self.host_pid_namespace = *host_pid_namespace;
        copy_if_changed(&mut self.feed_scan, feed_scan);
        self.host_cpu_percent = *host_cpu_percent;
        self.host_memory = *host_memory;
        self.device_files.clone_from(device_files);
        self.poll_secs = *poll_secs;
        self.problems.clone_from(problems);
    }
}
