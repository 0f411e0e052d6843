//! The library's global state: the loaded scenario, the init reference count, device handles
//! and each GPU's poll clock.

use std::collections::HashMap;
use std::ffi::c_void;
use std::io::Write;
use std::path::Path;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use crate::codes::{
    ERROR_GPU_IS_LOST, ERROR_INVALID_ARGUMENT, ERROR_UNINITIALIZED, ERROR_UNKNOWN, SUCCESS,
};
use crate::faults::{self, Outcome};
use crate::scenario::{self, Device, MigInstance, Scenario, MAX_DEVICES, MAX_MIG_SLOTS};

/// The environment variable naming the scenario file.
pub const SCENARIO_ENV: &str = "STRATA_FAKE_NVML_SCENARIO";

/// Handle table: one byte per (GPU, sub-device); sub 0 is the GPU, sub 1 + s is MIG slot s.
/// Handles are addresses inside it, so they are stable, distinct and never dangling.
const SUBS_PER_GPU: usize = MAX_MIG_SLOTS as usize + 1;
const HANDLE_TABLE_LEN: usize = MAX_DEVICES * SUBS_PER_GPU;
static HANDLE_TABLE: [u8; HANDLE_TABLE_LEN] = [0; HANDLE_TABLE_LEN];

/// The handle of GPU `gpu`, or of its MIG slot `slot`.
pub fn handle_for(gpu: usize, slot: Option<u32>) -> *mut c_void {
    let sub = slot.map_or(0, |s| s as usize + 1);
    HANDLE_TABLE
        .as_ptr()
        .wrapping_add(gpu * SUBS_PER_GPU + sub)
        .cast_mut()
        .cast()
}

/// `(gpu, sub)` of a handle inside the table, whether or not the scenario has that device.
pub fn decode_handle(handle: *mut c_void) -> Option<(usize, usize)> {
    let offset = (handle as usize).wrapping_sub(HANDLE_TABLE.as_ptr() as usize);
    (offset < HANDLE_TABLE_LEN).then_some((offset / SUBS_PER_GPU, offset % SUBS_PER_GPU))
}

/// Counts the polls of one physical GPU. A poll starts with a memory-info call on the GPU or
/// on one of its MIG devices whose memory was already read during the current poll; so a
/// client that reads each handle's memory once per tick advances one poll per tick.
#[derive(Debug, Default, Clone)]
pub struct PollClock {
    poll: usize,
    seen: u32,
}

impl PollClock {
    /// Records a memory read of `sub`; returns the poll the read belongs to.
    pub fn on_memory_read(&mut self, sub: usize) -> usize {
        let bit = 1u32 << (sub % 32);
        if self.seen & bit != 0 {
            self.poll = self.poll.saturating_add(1);
            self.seen = 0;
        }
        self.seen |= bit;
        self.poll
    }

    pub fn poll(&self) -> usize {
        self.poll
    }
}

/// Which device a counted call named: `(gpu, sub)` as in the handle table, or the system.
type CallSite = Option<(usize, usize)>;

struct Loaded {
    scenario: Scenario,
    clocks: Vec<PollClock>,
    /// Calls made since init, per call site and function: what `calls` windows count.
    calls: HashMap<(CallSite, &'static str), usize>,
}

impl Loaded {
    /// Counts one call of `call` at `site`; returns how many came before it.
    fn count_call(&mut self, site: CallSite, call: &'static str) -> usize {
        let seen = self.calls.entry((site, call)).or_insert(0);
        let nth = *seen;
        *seen = seen.saturating_add(1);
        nth
    }

    /// The poll a call that names no device belongs to: the furthest any GPU has got.
    fn system_poll(&self) -> usize {
        self.clocks.iter().map(PollClock::poll).max().unwrap_or(0)
    }
}

struct State {
    init_count: u32,
    loaded: Option<Loaded>,
}

static STATE: Mutex<State> = Mutex::new(State {
    init_count: 0,
    loaded: None,
});

fn lock() -> MutexGuard<'static, State> {
    STATE.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One line on stderr; never panics, even with stderr closed.
pub fn report(why: &str) {
    let _ = writeln!(std::io::stderr(), "strata-fake-nvml: {why}");
}

/// `nvmlInit*`: (re)reads the scenario file; on success the library is initialized once more.
pub fn init() -> u32 {
    let path = match std::env::var_os(SCENARIO_ENV) {
        Some(path) if !path.is_empty() => path,
        _ => {
            report(&format!(
                "{SCENARIO_ENV} is not set: point it at a scenario JSON file"
            ));
            return ERROR_UNKNOWN;
        }
    };
    match scenario::load(Path::new(&path)) {
        Ok(scenario) => {
            let mut state = lock();
            let clocks = vec![PollClock::default(); scenario.devices.len()];
            state.loaded = Some(Loaded {
                scenario,
                clocks,
                calls: HashMap::new(),
            });
            state.init_count = state.init_count.saturating_add(1);
            SUCCESS
        }
        Err(why) => {
            report(&why);
            ERROR_UNKNOWN
        }
    }
}

/// `nvmlShutdown`: one init fewer; the scenario is dropped with the last one.
pub fn shutdown() -> u32 {
    let mut state = lock();
    if state.init_count == 0 {
        return ERROR_UNINITIALIZED;
    }
    state.init_count -= 1;
    if state.init_count == 0 {
        state.loaded = None;
    }
    SUCCESS
}

/// Runs `f` on the loaded scenario, or answers `NVML_ERROR_UNINITIALIZED`.
pub fn with_scenario<R>(f: impl FnOnce(&Scenario) -> Result<R, u32>) -> Result<R, u32> {
    let state = lock();
    match (&state.loaded, state.init_count) {
        (Some(loaded), 1..) => f(&loaded.scenario),
        _ => Err(ERROR_UNINITIALIZED),
    }
}

/// Runs `f` for `call`, a function that names no device, after `system.faults`: a fault that
/// holds answers its error instead, and its delay is slept (outside the lock) either way.
pub fn with_system<R>(
    call: &'static str,
    f: impl FnOnce(&Scenario) -> Result<R, u32>,
) -> Result<R, u32> {
    let (result, delay_ms) = {
        let mut state = lock();
        if state.init_count == 0 {
            return Err(ERROR_UNINITIALIZED);
        }
        let loaded = state.loaded.as_mut().ok_or(ERROR_UNINITIALIZED)?;
        let nth = loaded.count_call(None, call);
        let fault = faults::outcome(
            &loaded.scenario.system.faults,
            call,
            loaded.system_poll(),
            nth,
        );
        let result = match fault.error {
            Some(code) => Err(code),
            None => f(&loaded.scenario),
        };
        (result, fault.delay_ms)
    };
    pause(delay_ms);
    result
}

/// Sleeps an injected delay; called with the lock released, so other calls go on.
fn pause(delay_ms: u64) {
    if delay_ms > 0 {
        std::thread::sleep(Duration::from_millis(delay_ms));
    }
}

/// What a device handle names, at the poll a call belongs to.
pub struct Ctx<'a> {
    pub gpu_index: usize,
    pub device: &'a Device,
    /// The MIG device, when the handle is a MIG device handle.
    pub instance: Option<&'a MigInstance>,
    pub poll: usize,
}

/// Whether a GPU or MIG device is lost at `poll`.
pub fn is_lost(lost_at_poll: Option<usize>, poll: usize) -> bool {
    lost_at_poll.is_some_and(|lost| poll >= lost)
}

/// Resolves `handle` and runs `f` on it for `call` (the exported function's name).
/// `memory_read` marks a memory-info call (which may start a new poll). Unknown handles answer
/// `NVML_ERROR_INVALID_ARGUMENT`; then the handle's `faults` apply (an error that holds is
/// answered instead; delays are slept after the lock is released); then a lost GPU or MIG
/// device answers `NVML_ERROR_GPU_IS_LOST`.
pub fn with_device<R>(
    handle: *mut c_void,
    call: &'static str,
    memory_read: bool,
    f: impl FnOnce(&Ctx) -> Result<R, u32>,
) -> Result<R, u32> {
    let (result, delay_ms) = {
        let mut state = lock();
        if state.init_count == 0 {
            return Err(ERROR_UNINITIALIZED);
        }
        let loaded = state.loaded.as_mut().ok_or(ERROR_UNINITIALIZED)?;
        let (gpu_index, sub) = decode_handle(handle).ok_or(ERROR_INVALID_ARGUMENT)?;
        let nth = loaded.count_call(Some((gpu_index, sub)), call);
        let Loaded {
            scenario, clocks, ..
        } = loaded;
        let device = scenario
            .devices
            .get(gpu_index)
            .ok_or(ERROR_INVALID_ARGUMENT)?;
        let instance = match sub {
            0 => None,
            _ => Some(
                device
                    .mig
                    .iter()
                    .find(|instance| instance.slot as usize + 1 == sub)
                    .ok_or(ERROR_INVALID_ARGUMENT)?,
            ),
        };
        let clock = clocks.get_mut(gpu_index).ok_or(ERROR_UNKNOWN)?;
        let poll = if memory_read {
            clock.on_memory_read(sub)
        } else {
            clock.poll()
        };
        let faults = instance.map_or(&device.faults, |instance| &instance.faults);
        let fault: Outcome = faults::outcome(faults, call, poll, nth);
        let lost = is_lost(device.lost_at_poll, poll)
            || instance.is_some_and(|instance| is_lost(instance.lost_at_poll, poll));
        let result = match (fault.error, lost) {
            (Some(code), _) => Err(code),
            (None, true) => Err(ERROR_GPU_IS_LOST),
            (None, false) => f(&Ctx {
                gpu_index,
                device,
                instance,
                poll,
            }),
        };
        (result, fault.delay_ms)
    };
    pause(delay_ms);
    result
}

/// The handle of GPU `index`, checked against the scenario, its faults on `call` and its
/// lost state.
pub fn handle_by_index(index: u32, call: &'static str) -> Result<*mut c_void, u32> {
    let handle = handle_for(index as usize, None);
    if index as usize >= MAX_DEVICES {
        return Err(ERROR_INVALID_ARGUMENT);
    }
    with_device(handle, call, false, |_| Ok(handle))
}

/// The handle of the GPU or MIG device with this UUID.
pub fn handle_by_uuid(uuid: &str) -> Result<*mut c_void, u32> {
    let found = with_scenario(|scenario| {
        for (gpu_index, device) in scenario.devices.iter().enumerate() {
            if matches!(&device.uuid, scenario::Answer::Value(u) if u == uuid) {
                return Ok(Some(handle_for(gpu_index, None)));
            }
            for instance in &device.mig {
                if matches!(&instance.uuid, scenario::Answer::Value(u) if u == uuid) {
                    return Ok(Some(handle_for(gpu_index, Some(instance.slot))));
                }
            }
        }
        Ok(None)
    })?;
    let handle = found.ok_or(crate::codes::ERROR_NOT_FOUND)?;
    with_device(handle, "nvmlDeviceGetHandleByUUID", false, |_| Ok(handle))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_round_trip_and_mig_handles_differ_from_their_parent() {
        let gpu = handle_for(3, None);
        let mig = handle_for(3, Some(6));
        assert_ne!(gpu, mig);
        assert_eq!(decode_handle(gpu), Some((3, 0)));
        assert_eq!(decode_handle(mig), Some((3, 7)));
        assert_eq!(decode_handle(std::ptr::null_mut()), None);
        assert_eq!(decode_handle(handle_for(MAX_DEVICES, None)), None);
    }

    #[test]
    fn a_poll_advances_when_a_handle_is_read_twice() {
        let mut clock = PollClock::default();
        // Tick 1: the GPU, then two MIG devices.
        assert_eq!(clock.on_memory_read(0), 0);
        assert_eq!(clock.on_memory_read(1), 0);
        assert_eq!(clock.on_memory_read(2), 0);
        // Tick 2, in another order: the first repeated read starts poll 1.
        assert_eq!(clock.on_memory_read(2), 1);
        assert_eq!(clock.on_memory_read(0), 1);
        assert_eq!(clock.on_memory_read(1), 1);
        // A client reading only the GPU advances once per read.
        let mut gpu_only = PollClock::default();
        let polls: Vec<usize> = (0..4).map(|_| gpu_only.on_memory_read(0)).collect();
        assert_eq!(polls, [0, 1, 2, 3]);
    }

    #[test]
    fn lost_from_the_named_poll_on() {
        assert!(!is_lost(None, 100));
        assert!(!is_lost(Some(3), 2));
        assert!(is_lost(Some(3), 3));
        assert!(is_lost(Some(3), 4));
    }
}
