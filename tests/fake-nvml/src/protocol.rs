//! NVML's two-call count protocol, as pure functions: the caller asks with a null or too-small
//! buffer, learns the count from `NVML_ERROR_INSUFFICIENT_SIZE`, then asks again.

use crate::codes::{ERROR_INSUFFICIENT_SIZE, ERROR_NOT_FOUND, SUCCESS};

/// What a count-protocol call answers: the return code, the count written back, and how many
/// entries to copy into the caller's buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListAnswer {
    pub code: u32,
    pub count: u32,
    pub write: usize,
}

/// The running-process calls (`nvmlDeviceGet*RunningProcesses_v3`).
///
/// With a null buffer (a size query) the count answered is `real + jitter`, floored at 0: a
/// count of 0 answers `NVML_SUCCESS` (no processes), anything else
/// `NVML_ERROR_INSUFFICIENT_SIZE`. With a buffer, jitter plays no part: a buffer smaller than
/// the real list answers `NVML_ERROR_INSUFFICIENT_SIZE` with the real count, as NVML does.
pub fn running_processes(
    real: usize,
    jitter: i64,
    buffer_is_null: bool,
    capacity: u32,
) -> ListAnswer {
    let real = u32::try_from(real).unwrap_or(u32::MAX);
    if buffer_is_null {
        let answered = (i64::from(real).saturating_add(jitter)).clamp(0, i64::from(u32::MAX));
        let answered = u32::try_from(answered).unwrap_or(u32::MAX);
        let code = if answered == 0 {
            SUCCESS
        } else {
            ERROR_INSUFFICIENT_SIZE
        };
        return ListAnswer {
            code,
            count: answered,
            write: 0,
        };
    }
    if capacity < real {
        return ListAnswer {
            code: ERROR_INSUFFICIENT_SIZE,
            count: real,
            write: 0,
        };
    }
    ListAnswer {
        code: SUCCESS,
        count: real,
        write: real as usize,
    }
}

/// `nvmlDeviceGetProcessUtilization`: like the process calls, except that no samples at all
/// answers `NVML_ERROR_NOT_FOUND`, as real NVML does on an idle GPU.
pub fn process_samples(real: usize, buffer_is_null: bool, capacity: u32) -> ListAnswer {
    let real = u32::try_from(real).unwrap_or(u32::MAX);
    if real == 0 {
        return ListAnswer {
            code: ERROR_NOT_FOUND,
            count: 0,
            write: 0,
        };
    }
    if buffer_is_null || capacity < real {
        return ListAnswer {
            code: ERROR_INSUFFICIENT_SIZE,
            count: real,
            write: 0,
        };
    }
    ListAnswer {
        code: SUCCESS,
        count: real,
        write: real as usize,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(code: u32, count: u32, write: usize) -> ListAnswer {
        ListAnswer { code, count, write }
    }

    #[test]
    fn size_query_then_fetch() {
        assert_eq!(
            running_processes(3, 0, true, 0),
            answer(ERROR_INSUFFICIENT_SIZE, 3, 0)
        );
        assert_eq!(running_processes(3, 0, false, 8), answer(SUCCESS, 3, 3));
        assert_eq!(running_processes(3, 0, false, 3), answer(SUCCESS, 3, 3));
    }

    #[test]
    fn no_processes_is_success_with_zero() {
        assert_eq!(running_processes(0, 0, true, 0), answer(SUCCESS, 0, 0));
        assert_eq!(running_processes(0, 0, false, 0), answer(SUCCESS, 0, 0));
        assert_eq!(running_processes(0, 0, false, 5), answer(SUCCESS, 0, 0));
    }

    #[test]
    fn a_small_buffer_gets_the_real_count_whatever_the_jitter() {
        assert_eq!(
            running_processes(4, 0, false, 2),
            answer(ERROR_INSUFFICIENT_SIZE, 4, 0)
        );
        assert_eq!(
            running_processes(4, -3, false, 2),
            answer(ERROR_INSUFFICIENT_SIZE, 4, 0)
        );
        // A zero-sized non-null buffer is also too small.
        assert_eq!(
            running_processes(1, 0, false, 0),
            answer(ERROR_INSUFFICIENT_SIZE, 1, 0)
        );
    }

    #[test]
    fn jitter_moves_only_the_size_query() {
        assert_eq!(
            running_processes(3, 2, true, 0),
            answer(ERROR_INSUFFICIENT_SIZE, 5, 0)
        );
        assert_eq!(
            running_processes(3, -1, true, 0),
            answer(ERROR_INSUFFICIENT_SIZE, 2, 0)
        );
        // Floored at zero: the size query claims no processes although there are three.
        assert_eq!(running_processes(3, -7, true, 0), answer(SUCCESS, 0, 0));
        // Jitter can invent processes on an idle GPU; the fetch then returns none.
        assert_eq!(
            running_processes(0, 2, true, 0),
            answer(ERROR_INSUFFICIENT_SIZE, 2, 0)
        );
        assert_eq!(running_processes(0, 2, false, 7), answer(SUCCESS, 0, 0));
    }

    #[test]
    fn utilization_samples_answer_not_found_when_there_are_none() {
        assert_eq!(process_samples(0, true, 0), answer(ERROR_NOT_FOUND, 0, 0));
        assert_eq!(process_samples(0, false, 4), answer(ERROR_NOT_FOUND, 0, 0));
        assert_eq!(
            process_samples(2, true, 0),
            answer(ERROR_INSUFFICIENT_SIZE, 2, 0)
        );
        assert_eq!(
            process_samples(2, false, 1),
            answer(ERROR_INSUFFICIENT_SIZE, 2, 0)
        );
        assert_eq!(process_samples(2, false, 2), answer(SUCCESS, 2, 2));
    }
}
