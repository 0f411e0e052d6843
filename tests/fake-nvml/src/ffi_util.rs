//! Helpers shared by the exported functions: the panic guard and checked writes through the
//! caller's pointers.

use std::ffi::{c_char, c_uint};
use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::codes::{ERROR_INSUFFICIENT_SIZE, ERROR_INVALID_ARGUMENT, ERROR_UNKNOWN, SUCCESS};
use crate::state::report;

/// Runs the body of an exported function. A panic must not unwind into C (it would abort the
/// host process), so it becomes `NVML_ERROR_UNKNOWN`.
pub fn guard(body: impl FnOnce() -> Result<(), u32>) -> u32 {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => SUCCESS,
        Ok(Err(code)) => code,
        Err(_) => {
            report("internal panic caught; answering NVML_ERROR_UNKNOWN");
            ERROR_UNKNOWN
        }
    }
}

/// `Ok` for `NVML_SUCCESS`, else the code as the error.
pub fn from_code(code: u32) -> Result<(), u32> {
    match code {
        SUCCESS => Ok(()),
        code => Err(code),
    }
}

/// Writes `value` through `ptr`; a null pointer answers `NVML_ERROR_INVALID_ARGUMENT`.
///
/// # Safety
/// `ptr` must be null or valid for writing one `T`.
pub unsafe fn put<T>(ptr: *mut T, value: T) -> Result<(), u32> {
    if ptr.is_null() {
        return Err(ERROR_INVALID_ARGUMENT);
    }
    // SAFETY: non-null, and valid for writes per the caller's contract.
    unsafe { ptr.write(value) };
    Ok(())
}

/// Copies `text` and its terminating NUL into the caller's buffer of `length` bytes; a buffer
/// too small answers `NVML_ERROR_INSUFFICIENT_SIZE`, as NVML does.
///
/// # Safety
/// `dst` must be null or valid for writing `length` bytes.
pub unsafe fn put_str(text: &str, dst: *mut c_char, length: c_uint) -> Result<(), u32> {
    if dst.is_null() {
        return Err(ERROR_INVALID_ARGUMENT);
    }
    let bytes = text.as_bytes();
    if bytes.len() >= length as usize {
        return Err(ERROR_INSUFFICIENT_SIZE);
    }
    // SAFETY: `bytes.len() + 1 <= length` bytes are writable at `dst`; the source is a Rust
    // string, so the ranges do not overlap.
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr().cast::<c_char>(), dst, bytes.len());
        dst.add(bytes.len()).write(0);
    }
    Ok(())
}

/// `text` in a fixed C char array, truncated to leave room for the NUL.
pub fn c_array<const N: usize>(text: &str) -> [c_char; N] {
    let mut out = [0 as c_char; N];
    for (slot, byte) in out.iter_mut().zip(text.bytes().take(N.saturating_sub(1))) {
        *slot = byte as c_char;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_need_room_for_their_nul() {
        let mut buffer = [1 as c_char; 6];
        // SAFETY: the buffer has 6 bytes.
        let exact = unsafe { put_str("hello", buffer.as_mut_ptr(), 6) };
        assert_eq!(exact, Ok(()));
        assert_eq!(buffer.map(|b| b as u8), *b"hello\0");
        // SAFETY: as above, and only 5 are claimed.
        let short = unsafe { put_str("hello", buffer.as_mut_ptr(), 5) };
        assert_eq!(short, Err(ERROR_INSUFFICIENT_SIZE));
        // SAFETY: a null pointer is checked, not written.
        let null = unsafe { put_str("x", std::ptr::null_mut(), 8) };
        assert_eq!(null, Err(ERROR_INVALID_ARGUMENT));
    }

    #[test]
    fn a_panic_becomes_unknown() {
        assert_eq!(guard(|| panic!("boom")), ERROR_UNKNOWN);
        assert_eq!(guard(|| Err(7)), 7);
        assert_eq!(guard(|| Ok(())), SUCCESS);
    }

    #[test]
    fn c_arrays_truncate_and_terminate() {
        let array: [c_char; 4] = c_array("abcdef");
        assert_eq!(array.map(|b| b as u8), *b"abc\0");
    }
}
