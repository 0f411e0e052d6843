//! Running out of memory ends strata with one line on stderr and exit status 1, the terminal
//! restored, instead of the standard library's abort (exit 134, "memory allocation of N
//! bytes failed"). The binary's global allocator is the system's, which this wraps: a failed
//! allocation is said (without allocating: a number written into a stack buffer, one
//! `write`) and the process exits.

use std::alloc::{GlobalAlloc, Layout, System};

/// The system allocator, exiting with one line when an allocation fails.
pub struct ExitOnOom;

// SAFETY: every call is passed to `System` as it is; only a null result is acted on.
unsafe impl GlobalAlloc for ExitOnOom {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract is System's.
        let p = unsafe { System.alloc(layout) };
        if p.is_null() {
            out_of_memory(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as above.
        let p = unsafe { System.alloc_zeroed(layout) };
        if p.is_null() {
            out_of_memory(layout.size());
        }
        p
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as above.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if p.is_null() {
            out_of_memory(new_size);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }
}

/// The line said, around the size asked for.
const LINE: (&[u8], &[u8]) = (
    b"strata: out of memory: an allocation of ",
    b" bytes failed (hint: free some memory, or raise the process's limit: ulimit -v)\n",
);

/// Restores the terminal, says the line, exits 1. Allocates nothing.
fn out_of_memory(size: usize) -> ! {
    crate::terminal::restore_in_handler();
    let mut line = [0u8; 160];
    let mut len = 0;
    let mut put = |bytes: &[u8]| {
        let n = bytes.len().min(line.len() - len);
        line[len..len + n].copy_from_slice(&bytes[..n]);
        len += n;
    };
    put(LINE.0);
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    let mut rest = size;
    loop {
        at -= 1;
        digits[at] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    put(&digits[at..]);
    put(LINE.1);
    // SAFETY: write and _exit are async-signal-safe and allocate nothing.
    unsafe {
        libc::write(libc::STDERR_FILENO, line.as_ptr().cast(), len);
        libc::_exit(1);
    }
}
