//! Reading one format-2 record back into the sample it was written from, against the
//! [`State`] the records before it left (a keyframe against nothing). Every step mirrors
//! [`super::encode`].

use super::refill::{self, Refill};
use super::state::{
    self, col, FeedState, GpuLayout, GpuState, MemSlots, ProcState, State, StatsSlots,
};
use super::wire::{err, ColumnsIn, Reader, Result, WireError};
use crate::sample::feed::{AllocatorStats, DeviceFeed, FeedRecord};
use crate::sample::{DeviceMemory, GpuSample, HostMemory, NodeSample, ProcessSample};
use serde::de::DeserializeOwned;

struct In<'a> {
    control: Reader<'a>,
    cols: ColumnsIn<'a>,
    blobs: Reader<'a>,
}

/// Things a record may list at most: more is not a record strata wrote.
const MOST_THINGS: u64 = 1 << 20;

impl In<'_> {
    fn flag(&mut self) -> Result<bool> {
        match self.control.byte()? {
            0 => Ok(false),
            1 => Ok(true),
            other => err(format!("a flag said as {other}")),
        }
    }

    fn count(&mut self) -> Result<usize> {
        let n = self.control.varint()?;
        if n > MOST_THINGS {
            return err(format!("{n} things in one record"));
        }
        Ok(n as usize)
    }

    fn blob<T: DeserializeOwned>(&mut self) -> Result<T> {
        let bytes = self.blobs.chunk()?;
        serde_json::from_slice(bytes).map_err(|e| WireError(format!("a part of the sample: {e}")))
    }

    fn int(&mut self, slot: &mut super::slots::IntSlot, column: usize) -> Result<Option<u64>> {
        slot.get(column, &mut self.control, &mut self.cols)
    }

    fn known(&mut self, slot: &mut super::slots::IntSlot, column: usize) -> Result<u64> {
        slot.get_u64(column, &mut self.control, &mut self.cols)
    }

    fn float(&mut self, slot: &mut super::slots::FloatSlot, column: usize) -> Result<Option<f64>> {
        slot.get(column, &mut self.control, &mut self.cols)
    }

    fn u32(&mut self, slot: &mut super::slots::IntSlot, column: usize) -> Result<Option<u32>> {
        self.int(slot, column)?
            .map(|v| u32::try_from(v).map_err(|_| WireError("a 32-bit figure too large".into())))
            .transpose()
    }
}

/// The sample of a record payload, against `state`, which it then describes; decoded into
/// `spare` (a sample read before and given back), reusing what it holds, where there is one.
pub(crate) fn decode(
    state: &mut State,
    payload: &[u8],
    spare: Option<Box<NodeSample>>,
) -> Result<Box<NodeSample>> {
    let mut whole = Reader::new(payload);
    let mut table = Reader::new(whole.chunk()?);
    let control = Reader::new(whole.chunk()?);
    let packed = whole.chunk()?;
    let cols = ColumnsIn::read(col::COUNT_2_0, col::COUNT, &mut table, packed)?;
    let blobs = whole;
    let mut r = In {
        control,
        cols,
        blobs,
    };
    if r.flag()? {
        state.rest = Some(r.blob()?);
    }
    let rest = state
        .rest
        .as_ref()
        .ok_or_else(|| WireError("a sample before its node".into()))?;
    let mut out = match spare {
        Some(mut spare) => {
            spare.as_mut().refill(rest);
            spare
        }
        None => Box::new(rest.clone()),
    };
    out.time = state.time.get_f64(col::TIME, &mut r.control, &mut r.cols)?;
    out.poll_secs = r.float(&mut state.poll, col::POLL)?;
    out.host_cpu_percent = r.float(&mut state.host_cpu, col::HOST_CPU)?;
    out.host_memory = if r.flag()? {
        Some(HostMemory {
            total: r.known(&mut state.host_total, col::HOST_TOTAL)?,
            used: r.known(&mut state.host_used, col::HOST_USED)?,
        })
    } else {
        None
    };
    gpus(state, &mut r, &mut out.gpus)?;
    processes(state, &mut r, &mut out.processes)?;
    let time = out.time;
    feeds(state, &mut r, time, &mut out.feeds)?;
    if !r.control.is_empty() || !r.blobs.is_empty() {
        return err("the record holds more than its sample");
    }
    Ok(out)
}

fn memory(r: &mut In<'_>, slots: &mut MemSlots) -> Result<Option<DeviceMemory>> {
    if !r.flag()? {
        return Ok(None);
    }
    Ok(Some(DeviceMemory {
        total: r.known(&mut slots.total, col::MEM_TOTAL)?,
        used: r.known(&mut slots.used, col::MEM_USED)?,
        free: r.known(&mut slots.free, col::MEM_FREE)?,
        driver_reserved: r.int(&mut slots.driver_reserved, col::MEM_RESERVED)?,
    }))
}

fn gpus(state: &mut State, r: &mut In<'_>, out: &mut Vec<GpuSample>) -> Result<()> {
    let n = r.count()?;
    let mut old: Vec<Option<Box<GpuState>>> = std::mem::take(&mut state.gpus)
        .into_iter()
        .map(Some)
        .collect();
    out.truncate(n);
    for i in 0..n {
        let kept = old.get_mut(i).and_then(Option::take);
        let (layout, rest_follows) = gpu_layout(r)?;
        let mut gs = if rest_follows {
            let rest: GpuSample = r.blob()?;
            let mut gs = kept.unwrap_or_else(|| Box::new(GpuState::new(rest.clone())));
            gs.mig.resize_with(rest.mig.len(), MemSlots::default);
            gs.rest = rest;
            gs
        } else {
            kept.ok_or_else(|| WireError("a GPU continued from none".into()))?
        };
        let g = refill::at(out, i, &gs.rest);
        g.memory = memory(r, &mut gs.memory)?;
        g.utilization_gpu = r.u32(&mut gs.utilization, col::GPU_UTIL)?;
        if layout == GpuLayout::Vitals {
            let v = &mut gs.vitals;
            g.temperature = r.u32(&mut v.temperature, col::GPU_TEMPERATURE)?;
            g.power_mw = r.u32(&mut v.power, col::GPU_POWER)?;
            g.sm_clock_mhz = r.u32(&mut v.sm_clock, col::GPU_SM_CLOCK)?;
        }
        for (m, slots) in g.mig.iter_mut().zip(&mut gs.mig) {
            m.memory = memory(r, slots)?;
        }
        state.gpus.push(gs);
    }
    Ok(())
}

/// A GPU's layout, and whether its rest follows (see [`GpuLayout`]).
fn gpu_layout(r: &mut In<'_>) -> Result<(GpuLayout, bool)> {
    let byte = r.control.byte()?;
    GpuLayout::of_byte(byte).ok_or_else(|| {
        WireError(format!(
            "a GPU laid out as {byte}, which this build of strata does not know \
             (hint: read it with the build that wrote it, or a newer one)"
        ))
    })
}

/// The remembered thing a new one continues (see the encoder's `continued`).
fn continued<S>(r: &mut In<'_>, i: usize, old: &mut [Option<S>]) -> Result<Option<S>> {
    let at = match r.control.byte()? {
        0 => i,
        1 => usize::try_from(r.control.varint()?).unwrap_or(usize::MAX),
        2 => return Ok(None),
        other => return err(format!("a place said as {other}")),
    };
    old.get_mut(at)
        .and_then(Option::take)
        .map(Some)
        .ok_or_else(|| WireError("a thing continued from none".into()))
}

fn processes(state: &mut State, r: &mut In<'_>, out: &mut Vec<ProcessSample>) -> Result<()> {
    let n = r.count()?;
    let mut old: Vec<Option<Box<ProcState>>> = std::mem::take(&mut state.processes)
        .into_iter()
        .map(Some)
        .collect();
    out.truncate(n);
    for i in 0..n {
        let mut ps = match continued(r, i, &mut old)? {
            Some(mut ps) => {
                if r.flag()? {
                    ps.rest = r.blob()?;
                }
                ps
            }
            None => Box::new(ProcState::new(r.blob()?)),
        };
        let p = refill::at(out, i, &ps.rest);
        p.used = r.int(&mut ps.used, col::PROC_USED)?;
        p.sm_util = r.u32(&mut ps.sm_util, col::PROC_SM)?;
        p.cpu_percent = r.float(&mut ps.cpu_percent, col::PROC_CPU)?;
        p.host_memory = r.int(&mut ps.host_memory, col::PROC_HOST_MEMORY)?;
        p.elapsed = r.int(&mut ps.elapsed, col::PROC_ELAPSED)?;
        state.processes.push(ps);
    }
    Ok(())
}

fn feeds(state: &mut State, r: &mut In<'_>, time: f64, out: &mut Vec<FeedRecord>) -> Result<()> {
    let n = r.count()?;
    let mut old: Vec<Option<Box<FeedState>>> = std::mem::take(&mut state.feeds)
        .into_iter()
        .map(Some)
        .collect();
    out.truncate(n);
    for i in 0..n {
        let mut fs = match continued(r, i, &mut old)? {
            Some(mut fs) => {
                if r.flag()? {
                    fs.rest = r.blob()?;
                }
                fs
            }
            None => Box::new(FeedState::new(r.blob()?)),
        };
        if r.flag()? {
            fs.ooms = r.blob()?;
        }
        let mut counters = [0u64; 9];
        // Their codes are the next control bytes, as a reading's figures' are (see `stats`).
        let codes = r.control.array::<9>();
        for (k, c) in counters.iter_mut().enumerate() {
            *c = match codes {
                Some(codes) => fs.counters[k]
                    .get_code(codes[k], None, None, col::COUNTERS + k, &mut r.cols)?
                    .ok_or_else(|| WireError("a known number said as unknown".into()))?,
                None => r.known(&mut fs.counters[k], col::COUNTERS + k)?,
            };
        }
        let last_heard =
            fs.last_heard
                .get_near(Some(time), col::LAST_HEARD, &mut r.control, &mut r.cols)?;
        let devices = r.count()?;
        fs.devices.resize_with(devices, StatsSlots::default);
        let f = refill::at(out, i, &fs.rest);
        f.ooms.clone_from(&fs.ooms);
        f.counters = state::counters_from(counters);
        f.last_heard = last_heard;
        f.devices.resize_with(devices, DeviceFeed::default);
        // Each device's readings into the one already there.
        for (device, slots) in f.devices.iter_mut().zip(&mut fs.devices) {
            let earlier_count = r.count()?;
            device
                .earlier
                .resize_with(earlier_count, AllocatorStats::default);
            for (reading, place) in device.earlier.iter_mut().zip((1..=earlier_count).rev()) {
                stats(r, slots, time, place, reading)?;
            }
            stats(r, slots, time, 0, &mut device.latest)?;
        }
        state.feeds.push(fs);
    }
    Ok(())
}

/// A reading's integer figures as they are read, in order.
struct Figures {
    ints: [Option<u64>; state::STATS_INTS],
    /// The figures as they are, once read: what the peaks are peaks of.
    real: [Option<u64>; 5],
    /// Each figure's last known value before this reading: what a ratio is taken from.
    before: [u64; state::STATS_INTS],
}

impl Figures {
    /// Reads figure `K`: after every figure before it, as a peak is of one of them and a
    /// ratio to one. Its code is the `K`th of `codes` (the reading's codes, read in one go)
    /// where those were there, or read now.
    #[inline(always)]
    fn read<const K: usize>(
        &mut self,
        r: &mut In<'_>,
        codes: Option<&[u8; state::STATS_INTS]>,
        slots: &mut StatsSlots,
    ) -> Result<()> {
        self.before[K] = slots.ints[K].last();
        let of = PEAK_OF[K].and_then(|i| self.real[i]);
        let reference = RATIO_TO[K].and_then(|f| self.ints[f].map(|now| (self.before[f], now)));
        let code = match codes {
            Some(codes) => codes[K],
            None => r.control.byte()?,
        };
        self.ints[K] = slots.ints[K].get_code(code, of, reference, col::STATS + K, &mut r.cols)?;
        let allocated = self.ints[2].unwrap_or(0);
        match K {
            2 => self.real[0] = self.ints[2],
            3 => self.real[1] = self.ints[3],
            4 => self.real[2] = self.ints[4].map(|d| allocated.wrapping_add(d)),
            5 => self.real[3] = self.ints[5],
            6 => self.real[4] = self.ints[6].map(|d| allocated.wrapping_sub(d)),
            _ => {}
        }
        Ok(())
    }
}

/// Per figure of a reading, where it is a peak, the place in [`state::PEAKS`] of the figure
/// it is the peak of (the first, as a search of it would find): looked up, not searched,
/// for each figure of each reading.
const PEAK_OF: [Option<usize>; state::STATS_INTS] = {
    let mut table = [None; state::STATS_INTS];
    let mut i = state::PEAKS.len();
    while i > 0 {
        i -= 1;
        table[state::PEAKS[i].0] = Some(i);
    }
    table
};

/// Per figure of a reading, where it is said against a reference ([`state::RATIOS`], the
/// first that names it), the reference figure.
const RATIO_TO: [Option<usize>; state::STATS_INTS] = {
    let mut table = [None; state::STATS_INTS];
    let mut i = state::RATIOS.len();
    while i > 0 {
        i -= 1;
        table[state::RATIOS[i].0] = Some(state::RATIOS[i].1);
    }
    table
};

/// One reading of a feed device, at `place` among its readings (0: the latest), into `out`
/// (a reading decoded before, whose buffers are reused).
fn stats(
    r: &mut In<'_>,
    slots: &mut StatsSlots,
    sample_time: f64,
    place: usize,
    out: &mut AllocatorStats,
) -> Result<()> {
    let known =
        |v: Option<u64>| v.ok_or_else(|| WireError("a known statistic said as unknown".into()));
    let mut figures = Figures {
        ints: [None; state::STATS_INTS],
        real: [None; 5],
        before: [0u64; state::STATS_INTS],
    };
    // The figures' codes are the next control bytes, one a figure and nothing between
    // them (a figure's payload is in its column): read in one go where the record holds
    // them all, or each as its figure is read where it ends early (as it then fails, where
    // it fails).
    let codes = r.control.array::<{ state::STATS_INTS }>();
    // Each figure read by a copy of its own, its peak, ratio and place in the figures known
    // as it is compiled: the figures of every reading of every feed are most of a read.
    macro_rules! read_figures {
        ($($k:literal)*) => {
            $(figures.read::<$k>(r, codes.as_ref(), slots)?;)*
        };
    }
    const _: () = assert!(state::STATS_INTS == 20, "one read_figures! entry a figure");
    read_figures!(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19);
    let Figures { ints, real, .. } = figures;
    let base = col::STATS + state::STATS_INTS;
    let time = slots.floats[0]
        .get_near_place(
            Some(sample_time),
            slots.place(place),
            base,
            &mut r.control,
            &mut r.cols,
        )?
        .ok_or_else(|| WireError("a reading without its time".into()))?;
    slots.remember_place(place, time, sample_time);
    let largest_free_block_time = r.float(&mut slots.floats[1], base + 1)?;
    let reserved_since = r.float(&mut slots.floats[2], base + 2)?;
    if r.flag()? {
        slots.unreported = r.blob()?;
    }
    let [index, seq, allocated, reserved, _, inactive_split, _, peak_allocated, peak_reserved, peak_active, peak_inactive_split, peak_requested, alloc_retries, ooms, device_allocs, device_frees, largest_free_block, limit, step, at_step_end] =
        ints;
    // The reasons figures go unreported: copied only where they changed (a map's copy is a
    // new one).
    refill::copy_if_changed(&mut out.unreported, &slots.unreported);
    let unreported = std::mem::take(&mut out.unreported);
    *out = AllocatorStats {
        index: u32::try_from(known(index)?)
            .map_err(|_| WireError("a device index too large".into()))?,
        seq: known(seq)?,
        time,
        allocated: known(allocated)?,
        reserved,
        active: real[2],
        inactive_split,
        requested: real[4],
        peak_allocated,
        peak_reserved,
        peak_active,
        peak_inactive_split,
        peak_requested,
        alloc_retries,
        ooms,
        device_allocs,
        device_frees,
        largest_free_block,
        largest_free_block_time,
        limit,
        reserved_since,
        unreported,
        step,
        at_step_end: known(at_step_end)? != 0,
    };
    Ok(())
}
