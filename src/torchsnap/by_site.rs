//! Bytes by site: live blocks grouped by where they were allocated, and growth over the
//! trace (spec: "The site of a block or trace entry"). For a file the window is the whole
//! trace.

use super::shape::{Action, BlockState, Entry, Segment, Stacks};
use super::sites::{Site, SiteTable};
use crate::sample::pool::{DeviceSites, SiteGrowth, SiteLive, MAX_SITES};
use hashbrown::HashMap;
use std::collections::BTreeMap;
use std::rc::Rc;

/// The top `MAX_SITES` by bytes, ties by site text.
fn top<T>(mut all: Vec<T>, bytes: impl Fn(&T) -> u64, site: impl Fn(&T) -> &str) -> Vec<T> {
    all.sort_by(|a, b| bytes(b).cmp(&bytes(a)).then_with(|| site(a).cmp(site(b))));
    all.truncate(MAX_SITES);
    all
}

/// Where a site's `via` comes from when its blocks have several: the callers that hold the
/// most of its bytes (ties: the first in text order).
#[derive(Default)]
struct Via {
    by_callers: BTreeMap<Vec<String>, u64>,
}

impl Via {
    fn add(&mut self, site: &Site, bytes: u64) {
        if let Some(b) = self.by_callers.get_mut(&site.via) {
            *b += bytes;
        } else {
            self.by_callers.insert(site.via.clone(), bytes);
        }
    }

    fn most(&self) -> Vec<String> {
        self.by_callers
            .iter()
            .rev()
            .max_by_key(|(_, b)| **b)
            .map(|(v, _)| v.clone())
            .unwrap_or_default()
    }
}

/// Bytes summed by site: first by the site of each stack (no text copied per block), then
/// merged by the site's text.
#[derive(Default)]
struct Sums {
    by_stack: HashMap<*const Site, (Rc<Site>, Sum)>,
}

#[derive(Default, Clone, Copy)]
struct Sum {
    bytes: u64,
    count: u64,
    frees: u64,
}

impl Sums {
    fn at(&mut self, site: &Rc<Site>) -> &mut Sum {
        &mut self
            .by_stack
            .entry(Rc::as_ptr(site))
            .or_insert_with(|| (site.clone(), Sum::default()))
            .1
    }

    /// By the site's text: its figures summed, its `via` that of the most bytes.
    fn merged(self) -> Vec<(String, Vec<String>, Sum)> {
        let mut by_text: HashMap<String, (Sum, Via)> = HashMap::new();
        for (site, sum) in self.by_stack.into_values() {
            let (total, via) = by_text.entry(site.site.clone()).or_default();
            total.bytes += sum.bytes;
            total.count += sum.count;
            total.frees += sum.frees;
            via.add(&site, sum.bytes);
        }
        by_text
            .into_iter()
            .map(|(text, (sum, via))| (text, via.most(), sum))
            .collect()
    }
}

/// Live blocks of one device by site.
fn live(device: &mut DeviceSites, segs: &[&Segment], stacks: &Stacks, table: &mut SiteTable) {
    let mut sums = Sums::default();
    for b in segs
        .iter()
        .flat_map(|s| &s.blocks)
        .filter(|b| b.state == BlockState::Live)
    {
        device.live_bytes += b.size;
        device.live_blocks += 1;
        let Some(stack) = b.stack else {
            device.live_unattributed += b.size;
            continue;
        };
        let sum = sums.at(&table.get(stacks, stack));
        sum.bytes += b.size;
        sum.count += 1;
    }
    let all = sums
        .merged()
        .into_iter()
        .map(|(site, via, s)| SiteLive {
            site,
            via,
            bytes: s.bytes,
            count: s.count,
        })
        .collect();
    device.live = top(all, |s| s.bytes, |s| &s.site);
}

/// Growth over one device's trace: allocations not freed by its end, by site.
fn growth(device: &mut DeviceSites, entries: &[Entry], stacks: &Stacks, table: &mut SiteTable) {
    // Each address's allocation in the window, not yet freed: its size and site.
    let mut open: HashMap<u64, (u64, Rc<Site>)> = HashMap::new();
    let mut sums = Sums::default();
    for e in entries {
        match e.action {
            Action::Alloc => {
                let (Some(addr), Some(size), Some(stack)) = (e.addr, e.size, e.stack) else {
                    continue;
                };
                let site = table.get(stacks, stack);
                sums.at(&site).count += 1;
                // An address holds one allocation: a second one means the first was freed,
                // whatever the trace kept of it.
                if let Some((_, before)) = open.insert(addr, (size, site)) {
                    sums.at(&before).frees += 1;
                }
            }
            // A free completed without its request seen ends the allocation too; one whose
            // request was seen has already ended it.
            Action::FreeRequested | Action::FreeCompleted => {
                let Some(addr) = e.addr else { continue };
                if let Some((_, site)) = open.remove(&addr) {
                    sums.at(&site).frees += 1;
                }
            }
            _ => {}
        }
    }
    for (size, site) in open.into_values() {
        sums.at(&site).bytes += size;
    }
    let merged = sums.merged();
    device.growth_bytes = merged.iter().map(|(_, _, s)| s.bytes).sum();
    let all = merged
        .into_iter()
        .filter(|(_, _, s)| s.bytes > 0)
        .map(|(site, via, s)| SiteGrowth {
            site,
            via,
            bytes: s.bytes,
            allocs: s.count,
            frees: s.frees,
        })
        .collect();
    device.growth = top(all, |s| s.bytes, |s| &s.site);
}

/// The sites of every device that has segments or a trace, by index.
pub(crate) fn reduce(
    segments: &[Segment],
    traces: &[(u32, Vec<Entry>)],
    stacks: &Stacks,
) -> Vec<DeviceSites> {
    let mut table = SiteTable::new(stacks);
    let mut by_device: BTreeMap<u32, (Vec<&Segment>, Option<&[Entry]>)> = BTreeMap::new();
    for s in segments {
        by_device.entry(s.device).or_default().0.push(s);
    }
    for (device, entries) in traces {
        if !entries.is_empty() {
            by_device.entry(*device).or_default().1 = Some(entries);
        }
    }
    by_device
        .into_iter()
        .map(|(index, (segs, entries))| {
            let mut d = DeviceSites {
                index,
                ..DeviceSites::default()
            };
            live(&mut d, &segs, stacks, &mut table);
            if let Some(entries) = entries {
                growth(&mut d, entries, stacks, &mut table);
            }
            d
        })
        .collect()
}
