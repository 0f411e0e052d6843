//! Writing one sample as a format-2 record, against what the previous record left in the
//! [`State`]: a keyframe is written against nothing, so it holds the whole sample.

use super::slots::{FloatSlot, IntSlot};
use super::state::{
    self, col, FeedState, GpuLayout, GpuState, MemSlots, ProcState, State, StatsSlots,
};
use super::wire::{put_varint, ColumnsOut};
use crate::sample::feed::AllocatorStats;
use crate::sample::{DeviceMemory, NodeSample};
use serde::Serialize;
use std::collections::HashMap;

/// What a record is being written into.
struct Out {
    control: Vec<u8>,
    cols: ColumnsOut,
    blobs: Vec<u8>,
}

impl Out {
    fn flag(&mut self, yes: bool) {
        self.control.push(u8::from(yes));
    }

    fn count(&mut self, n: usize) {
        put_varint(&mut self.control, n as u64);
    }

    fn blob(&mut self, value: &impl Serialize) {
        // The schema's types serialise to JSON without fail (string keys, no custom code).
        let text = serde_json::to_vec(value).unwrap_or_default();
        put_varint(&mut self.blobs, text.len() as u64);
        self.blobs.extend(text);
    }

    fn int(&mut self, slot: &mut IntSlot, column: usize, v: Option<u64>) {
        slot.put(v, column, &mut self.control, &mut self.cols);
    }

    fn float(&mut self, slot: &mut FloatSlot, column: usize, v: Option<f64>) {
        slot.put(v, column, &mut self.control, &mut self.cols);
    }
}

/// A float JSON would write as `null` is recorded unknown, as format 1 reads it.
fn finite(v: Option<f64>) -> Option<f64> {
    v.filter(|x| x.is_finite())
}

/// The sample's record payload (table, control, columns, blobs), against `state`, which it
/// then describes.
pub(crate) fn encode(state: &mut State, s: &NodeSample) -> Vec<u8> {
    // Format 2 keeps the raw feeds only (a process's matched feed is derived from them). A
    // sample of the snapshot's older derived form, whose allocator figures are only in
    // `processes[].feed`, has its feeds rebuilt from those first, as the pipeline reads it.
    if s.feeds.is_empty() && s.processes.iter().any(|p| p.feed.is_some()) {
        let mut raw = s.clone();
        crate::sample::derived::make_raw(&mut raw);
        return encode(state, &raw);
    }
    let mut out = Out {
        control: Vec::with_capacity(4096),
        cols: ColumnsOut::new(col::COUNT),
        blobs: Vec::new(),
    };
    let rest = state::node_rest(s);
    if state.rest.as_ref() == Some(&rest) {
        out.flag(false);
    } else {
        out.flag(true);
        out.blob(&rest);
        state.rest = Some(rest);
    }
    out.float(&mut state.time, col::TIME, Some(s.time));
    out.float(&mut state.poll, col::POLL, finite(s.poll_secs));
    out.float(
        &mut state.host_cpu,
        col::HOST_CPU,
        finite(s.host_cpu_percent),
    );
    out.flag(s.host_memory.is_some());
    if let Some(m) = s.host_memory {
        out.int(&mut state.host_total, col::HOST_TOTAL, Some(m.total));
        out.int(&mut state.host_used, col::HOST_USED, Some(m.used));
    }
    gpus(state, s, &mut out);
    processes(state, s, &mut out);
    feeds(state, s, &mut out);
    let mut table = Vec::new();
    let mut packed = Vec::new();
    out.cols.finish(&mut table, &mut packed);
    let mut payload =
        Vec::with_capacity(table.len() + out.control.len() + packed.len() + out.blobs.len() + 12);
    for part in [&table, &out.control, &packed] {
        put_varint(&mut payload, part.len() as u64);
        payload.extend_from_slice(part);
    }
    payload.extend_from_slice(&out.blobs);
    payload
}

fn memory(out: &mut Out, slots: &mut MemSlots, m: Option<DeviceMemory>) {
    out.flag(m.is_some());
    if let Some(m) = m {
        out.int(&mut slots.total, col::MEM_TOTAL, Some(m.total));
        out.int(&mut slots.used, col::MEM_USED, Some(m.used));
        out.int(&mut slots.free, col::MEM_FREE, Some(m.free));
        out.int(
            &mut slots.driver_reserved,
            col::MEM_RESERVED,
            m.driver_reserved,
        );
    }
}

fn gpus(state: &mut State, s: &NodeSample, out: &mut Out) {
    out.count(s.gpus.len());
    let mut old: Vec<Option<Box<GpuState>>> = std::mem::take(&mut state.gpus)
        .into_iter()
        .map(Some)
        .collect();
    for (i, g) in s.gpus.iter().enumerate() {
        let rest = state::gpu_rest(g);
        let mut gs = match old.get_mut(i).and_then(Option::take) {
            Some(gs) if gs.rest == rest => {
                out.control.push(GpuLayout::Vitals.byte(false));
                gs
            }
            kept => {
                out.control.push(GpuLayout::Vitals.byte(true));
                out.blob(&rest);
                let mut gs = kept.unwrap_or_else(|| Box::new(GpuState::new(rest.clone())));
                gs.mig.resize_with(rest.mig.len(), MemSlots::default);
                gs.rest = rest;
                gs
            }
        };
        memory(out, &mut gs.memory, g.memory);
        out.int(
            &mut gs.utilization,
            col::GPU_UTIL,
            g.utilization_gpu.map(u64::from),
        );
        let v = &mut gs.vitals;
        out.int(
            &mut v.temperature,
            col::GPU_TEMPERATURE,
            g.temperature.map(u64::from),
        );
        out.int(&mut v.power, col::GPU_POWER, g.power_mw.map(u64::from));
        out.int(
            &mut v.sm_clock,
            col::GPU_SM_CLOCK,
            g.sm_clock_mhz.map(u64::from),
        );
        for (m, slots) in g.mig.iter().zip(&mut gs.mig) {
            memory(out, slots, m.memory);
        }
        state.gpus.push(gs);
    }
}

/// The remembered thing a new one continues, said as `0` (the one at the same place), `1`
/// and its place, or `2`: none (a new thing, whose rest is then written whole).
fn continued<S, K: Eq + std::hash::Hash>(
    out: &mut Out,
    i: usize,
    old: &mut [Option<S>],
    is_it: impl Fn(&S) -> bool,
    key_of: impl Fn(&S) -> K,
    key: impl FnOnce() -> K,
    by_key: &mut Option<HashMap<K, usize>>,
) -> Option<S> {
    if old.get(i).and_then(Option::as_ref).is_some_and(&is_it) {
        out.control.push(0);
        return old[i].take();
    }
    let map = by_key.get_or_insert_with(|| {
        old.iter()
            .enumerate()
            .filter_map(|(j, s)| Some((key_of(s.as_ref()?), j)))
            .collect()
    });
    match map.get(&key()).copied() {
        Some(j) if old.get(j).is_some_and(Option::is_some) => {
            out.control.push(1);
            put_varint(&mut out.control, j as u64);
            old[j].take()
        }
        _ => {
            out.control.push(2);
            None
        }
    }
}

fn processes(state: &mut State, s: &NodeSample, out: &mut Out) {
    out.count(s.processes.len());
    let mut old: Vec<Option<Box<ProcState>>> = std::mem::take(&mut state.processes)
        .into_iter()
        .map(Some)
        .collect();
    let mut by_key = None;
    for (i, p) in s.processes.iter().enumerate() {
        let found = continued(
            out,
            i,
            &mut old,
            |o| o.rest.pid == p.pid && o.rest.device_uuid == p.device_uuid,
            |o| (o.rest.pid, o.rest.device_uuid.clone()),
            || (p.pid, p.device_uuid.clone()),
            &mut by_key,
        );
        let rest = state::process_rest(p);
        let mut ps = match found {
            Some(ps) if ps.rest == rest => {
                out.flag(false);
                ps
            }
            Some(mut ps) => {
                out.flag(true);
                out.blob(&rest);
                ps.rest = rest;
                ps
            }
            None => {
                out.blob(&rest);
                Box::new(ProcState::new(rest))
            }
        };
        out.int(&mut ps.used, col::PROC_USED, p.used);
        out.int(&mut ps.sm_util, col::PROC_SM, p.sm_util.map(u64::from));
        out.float(&mut ps.cpu_percent, col::PROC_CPU, finite(p.cpu_percent));
        out.int(&mut ps.host_memory, col::PROC_HOST_MEMORY, p.host_memory);
        out.int(&mut ps.elapsed, col::PROC_ELAPSED, p.elapsed);
        state.processes.push(ps);
    }
}

fn feeds(state: &mut State, s: &NodeSample, out: &mut Out) {
    out.count(s.feeds.len());
    let mut old: Vec<Option<Box<FeedState>>> = std::mem::take(&mut state.feeds)
        .into_iter()
        .map(Some)
        .collect();
    let mut by_key = None;
    for (i, f) in s.feeds.iter().enumerate() {
        let found = continued(
            out,
            i,
            &mut old,
            |o| o.rest.socket == f.socket,
            |o| o.rest.socket.clone(),
            || f.socket.clone(),
            &mut by_key,
        );
        let rest = state::feed_rest(f);
        let mut fs = match found {
            Some(fs) if fs.rest == rest => {
                out.flag(false);
                fs
            }
            Some(mut fs) => {
                out.flag(true);
                out.blob(&rest);
                fs.rest = rest;
                fs
            }
            None => {
                out.blob(&rest);
                Box::new(FeedState::new(rest))
            }
        };
        if f.ooms == fs.ooms {
            out.flag(false);
        } else {
            out.flag(true);
            out.blob(&f.ooms);
            fs.ooms = f.ooms.clone();
        }
        for (k, v) in state::counters(&f.counters).into_iter().enumerate() {
            out.int(&mut fs.counters[k], col::COUNTERS + k, Some(v));
        }
        fs.last_heard.put_near(
            finite(f.last_heard),
            Some(s.time),
            col::LAST_HEARD,
            &mut out.control,
            &mut out.cols,
        );
        out.count(f.devices.len());
        fs.devices.resize_with(f.devices.len(), StatsSlots::default);
        for (d, slots) in f.devices.iter().zip(&mut fs.devices) {
            out.count(d.earlier.len());
            let readings = d.earlier.iter().chain(std::iter::once(&d.latest));
            for (place, reading) in (0..=d.earlier.len()).rev().zip(readings) {
                stats(out, slots, reading, s.time, place);
            }
        }
        state.feeds.push(fs);
    }
}

/// One reading of a feed device, at `place` among its readings (0: the latest).
fn stats(
    out: &mut Out,
    slots: &mut StatsSlots,
    s: &AllocatorStats,
    sample_time: f64,
    place: usize,
) {
    let (ints, floats) = state::stats_fields(s);
    // The figures the peaks are peaks of, as they are (not as written).
    let real = [
        Some(s.allocated),
        s.reserved,
        s.active,
        s.inactive_split,
        s.requested,
    ];
    // Each figure's last known value before this reading: what a ratio is taken from.
    let mut before = [0u64; state::STATS_INTS];
    for (k, v) in ints.into_iter().enumerate() {
        before[k] = slots.ints[k].last();
        let column = col::STATS + k;
        if let Some(&(_, r)) = state::RATIOS.iter().find(|&&(of, _)| of == k) {
            let reference = ints[r].map(|now| (before[r], now));
            slots.ints[k].put_ratio(v, reference, column, &mut out.control, &mut out.cols);
            continue;
        }
        let of = state::PEAKS
            .iter()
            .position(|&(peak, _)| peak == k)
            .and_then(|i| real[i]);
        slots.ints[k].put_peak(v, of, column, &mut out.control, &mut out.cols);
    }
    let [time, largest_free_block_time, reserved_since] = floats;
    let base = col::STATS + state::STATS_INTS;
    slots.floats[0].put_near_place(
        time,
        Some(sample_time),
        slots.place(place),
        base,
        &mut out.control,
        &mut out.cols,
    );
    if let Some(time) = time {
        slots.remember_place(place, time, sample_time);
    }
    out.float(
        &mut slots.floats[1],
        base + 1,
        finite(largest_free_block_time),
    );
    out.float(&mut slots.floats[2], base + 2, finite(reserved_since));
    if s.unreported == slots.unreported {
        out.flag(false);
    } else {
        out.flag(true);
        out.blob(&s.unreported);
        slots.unreported = s.unreported.clone();
    }
}
