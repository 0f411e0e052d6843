//! Estimates of the heap bytes a sample holds: what the pause queue counts against its
//! budget. Capacities as allocated; the allocator's own slack is not counted. Structs are
//! taken apart field by field, so that a field added later must be counted (or waived) here;
//! the structs declared through `sample::fields::schema!` (a GPU's and an instance's own
//! figures, a process) are counted from their declaration.

use crate::sample::feed::{
    CutShort, DeviceFeed, FeedDevice, FeedScan, FeedState, Hello, OomReport, SuspiciousEntry,
};
pub(crate) use crate::sample::fields::Heap;
use crate::sample::pool::{
    DeviceSegments, DeviceSites, FreeBucket, PoolMap, RunState, SegmentStrip, SegmentsReport,
    SiteGrowth, SiteLive, SitesReport,
};
use crate::sample::{
    AllocatorStats, DeviceFileScan, DeviceHolder, FeedRecord, FeedSample, GpuSample, MigSample,
    NodeSample,
};

impl Heap for NodeSample {
    fn heap(&self) -> usize {
        let NodeSample {
            time: _,
            interval: _,
            host,
            demo: _,
            driver_version,
            cuda_driver_version,
            host_pid_namespace: _,
            gpus,
            processes,
            feeds,
            feed_scan,
            poll_secs: _,
            problems,
            host_cpu_percent: _,
            host_memory: _,
            device_files,
        } = self;
        host.heap()
            + device_files.heap()
            + driver_version.heap()
            + cuda_driver_version.heap()
            + gpus.heap()
            + processes.heap()
            + feeds.heap()
            + feed_scan.heap()
            + problems.heap()
    }
}

impl Heap for FeedScan {
    fn heap(&self) -> usize {
        let FeedScan {
            cut_short,
            suspicious,
        } = self;
        cut_short.heap() + suspicious.heap()
    }
}

impl Heap for CutShort {
    fn heap(&self) -> usize {
        let CutShort {
            dir,
            read: _,
            entries: _,
            entries_capped: _,
        } = self;
        dir.heap()
    }
}

impl Heap for SuspiciousEntry {
    fn heap(&self) -> usize {
        let SuspiciousEntry {
            path,
            kind,
            in_place_of,
            owner: _,
            pids,
            target,
        } = self;
        path.heap()
            + kind.heap()
            + in_place_of.heap()
            + pids.capacity() * size_of::<u32>()
            + target.heap()
    }
}

impl Heap for GpuSample {
    fn heap(&self) -> usize {
        let GpuSample {
            info,
            mig,
            problems,
        } = self;
        info.heap() + mig.heap() + problems.heap()
    }
}

impl Heap for MigSample {
    fn heap(&self) -> usize {
        let MigSample { info, problems } = self;
        info.heap() + problems.heap()
    }
}

/// An owner is shared by the entries of its process: counted whole at each (an upper bound,
/// by `Arc`'s count).
impl Heap for crate::sample::owner::Owner {
    fn heap(&self) -> usize {
        let crate::sample::owner::Owner {
            kind: _,
            namespace,
            pod,
            pod_uid,
            container,
            container_id,
            runtime,
            slurm_job,
            slurm_step,
            slurm_task,
            slurm_user,
            rank,
            local_rank,
            world_size,
            run_id,
            unit,
            launcher_pid: _,
            launcher,
            source,
            unreadable,
        } = self;
        [
            namespace,
            pod,
            pod_uid,
            container,
            container_id,
            runtime,
            slurm_job,
            slurm_step,
            slurm_task,
            slurm_user,
            rank,
            local_rank,
            world_size,
            run_id,
            unit,
            launcher,
        ]
        .iter()
        .map(|field| field.heap())
        .sum::<usize>()
            + source.heap()
            + unreadable.heap()
    }
}

impl Heap for DeviceFileScan {
    fn heap(&self) -> usize {
        let DeviceFileScan {
            holders,
            unreadable: _,
        } = self;
        holders.heap()
    }
}

impl Heap for DeviceHolder {
    fn heap(&self) -> usize {
        let DeviceHolder {
            pid: _,
            start_time: _,
            state,
            ppid: _,
            uid: _,
            user,
            command,
            parent_command,
            minors,
            uvm: _,
        } = self;
        state.heap() + user.heap() + command.heap() + parent_command.heap() + minors.heap()
    }
}

impl Heap for FeedSample {
    fn heap(&self) -> usize {
        let FeedSample {
            framework,
            framework_version,
            backend,
            feed: _,
            stats,
        } = self;
        framework.heap() + framework_version.heap() + backend.heap() + stats.heap()
    }
}

impl Heap for AllocatorStats {
    fn heap(&self) -> usize {
        self.unreported.heap()
    }
}

impl Heap for FeedRecord {
    fn heap(&self) -> usize {
        let FeedRecord {
            socket,
            found_via: _,
            peer: _,
            nspid: _,
            state,
            hello,
            devices,
            ooms,
            counters: _,
            connected_at: _,
            last_heard: _,
            segments,
            sites,
        } = self;
        socket.heap()
            + state.heap()
            + hello.heap()
            + devices.heap()
            + ooms.heap()
            + segments.heap()
            + sites.heap()
    }
}

impl Heap for SegmentsReport {
    fn heap(&self) -> usize {
        let SegmentsReport {
            time: _,
            took: _,
            devices,
        } = self;
        devices.heap()
    }
}

impl Heap for DeviceSegments {
    fn heap(&self) -> usize {
        let DeviceSegments {
            index: _,
            pools,
            strips,
            strips_left_out: _,
        } = self;
        pools.heap() + strips.heap()
    }
}

impl Heap for PoolMap {
    fn heap(&self) -> usize {
        self.pool.heap() + self.free_blocks.capacity() * size_of::<FreeBucket>()
    }
}

impl Heap for SegmentStrip {
    fn heap(&self) -> usize {
        self.pool.heap() + self.runs.capacity() * size_of::<(u64, RunState)>()
    }
}

impl Heap for SitesReport {
    fn heap(&self) -> usize {
        let SitesReport {
            time: _,
            id: _,
            state: _,
            reason,
            started: _,
            seconds: _,
            window: _,
            history,
            entries: _,
            dropped: _,
            cost: _,
            stopped,
            devices,
        } = self;
        reason.heap() + history.heap() + stopped.heap() + devices.heap()
    }
}

impl Heap for DeviceSites {
    fn heap(&self) -> usize {
        let DeviceSites {
            index: _,
            live,
            live_bytes: _,
            live_blocks: _,
            live_unattributed: _,
            growth,
            growth_bytes: _,
        } = self;
        live.heap() + growth.heap()
    }
}

impl Heap for SiteLive {
    fn heap(&self) -> usize {
        self.site.heap() + self.via.heap()
    }
}

impl Heap for SiteGrowth {
    fn heap(&self) -> usize {
        self.site.heap() + self.via.heap()
    }
}

impl Heap for FeedState {
    fn heap(&self) -> usize {
        match self {
            FeedState::Connected => 0,
            FeedState::Refused { reason }
            | FeedState::Dropped { reason }
            | FeedState::Closed { reason } => reason.heap(),
        }
    }
}

impl Heap for Hello {
    fn heap(&self) -> usize {
        let Hello {
            pid: _,
            time: _,
            agent_version,
            python,
            executable,
            started: _,
            interval: _,
            framework,
            framework_version,
            backend,
            settings,
            devices,
            note,
            protocol: _,
            state,
            error,
            agent_copy,
            agent_path,
            requests,
        } = self;
        requests.heap()
            + state.heap()
            + error.heap()
            + agent_copy.heap()
            + agent_path.heap()
            + agent_version.heap()
            + python.heap()
            + executable.heap()
            + framework.heap()
            + framework_version.heap()
            + backend.heap()
            + settings.heap()
            + devices.heap()
            + note.heap()
    }
}

impl Heap for FeedDevice {
    fn heap(&self) -> usize {
        let FeedDevice {
            index: _,
            uuid,
            pci_bus_id,
            name,
            context,
        } = self;
        uuid.heap()
            + pci_bus_id.heap()
            + name.heap()
            + context.as_ref().map_or(0, |c| c.method.heap())
    }
}

impl Heap for DeviceFeed {
    fn heap(&self) -> usize {
        self.latest.heap() + self.earlier.heap()
    }
}

impl Heap for OomReport {
    fn heap(&self) -> usize {
        self.stats.heap()
    }
}
