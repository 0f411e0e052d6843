//! What the loader read once and the monitor need not keep in memory.
//!
//! A position-independent binary carries a record for each address the loader must fix up as
//! it maps it: strata's release build some 16,500 of 24 bytes each (390 kB), applied before
//! `main` and never read again. Their pages stay mapped, and counted in the monitor's
//! resident memory (its RSS, what `top` shows), for as long as the process runs.
//! [`release_relocations`] lets them go at start: the pages leave this process (a private,
//! read-only mapping of the binary's file, never written), the file's copy in the page cache
//! is untouched, and a read, were there one, would bring them back from the file.

use std::ops::Range;

/// The page-aligned addresses of this process's relocation records that it let go (empty where
/// there were none, or where it could not tell where they are).
pub fn release_relocations() -> Range<usize> {
    let span = relocation_pages();
    if !span.is_empty() {
        // SAFETY: the range is whole pages of the executable's own read-only mapping, which
        // nothing writes; MADV_DONTNEED drops this process's view of them, and a later read
        // would fault in the same bytes from the file.
        let result = unsafe {
            libc::madvise(
                span.start as *mut libc::c_void,
                span.end - span.start,
                libc::MADV_DONTNEED,
            )
        };
        if result != 0 {
            return 0..0;
        }
    }
    span
}

/// The whole pages of the executable's relocation records (the first and last are shared
/// with what lies beside them, and kept).
fn relocation_pages() -> Range<usize> {
    let records = relocation_records();
    let page = page_size();
    let first = records.start.next_multiple_of(page);
    let last = records.end / page * page;
    if last > first {
        first..last
    } else {
        0..0
    }
}

/// Where the executable's relocation records are loaded, found from its dynamic section.
fn relocation_records() -> Range<usize> {
    let mut span = 0..0;
    // SAFETY: the callback reads only what the loader hands it for the executable (the first
    // object listed), as the loader keeps it, and stops at once.
    unsafe {
        libc::dl_iterate_phdr(Some(on_object), (&raw mut span).cast::<libc::c_void>());
    }
    span
}

// The dynamic section's tags read here (<elf.h>).
const DT_NULL: u64 = 0;
const DT_RELA: u64 = 7;
const DT_RELASZ: u64 = 8;

/// One entry of the dynamic section (`Elf64_Dyn`).
#[repr(C)]
struct Dyn {
    tag: u64,
    value: u64,
}

/// Called for each loaded object, the executable first: reads its DT_RELA and DT_RELASZ, and
/// returns non-zero to stop.
unsafe extern "C" fn on_object(
    info: *mut libc::dl_phdr_info,
    _size: libc::size_t,
    data: *mut libc::c_void,
) -> libc::c_int {
    // SAFETY: the loader passes a valid `dl_phdr_info`, and `data` is the span handed to
    // `dl_iterate_phdr` above.
    let (info, span) = unsafe { (&*info, &mut *data.cast::<Range<usize>>()) };
    if info.dlpi_phdr.is_null() {
        return 1;
    }
    // SAFETY: `dlpi_phdr` points at `dlpi_phnum` program headers.
    let headers =
        unsafe { std::slice::from_raw_parts(info.dlpi_phdr, usize::from(info.dlpi_phnum)) };
    let bias = info.dlpi_addr as usize;
    let Some(dynamic) = headers.iter().find(|h| h.p_type == libc::PT_DYNAMIC) else {
        return 1;
    };
    let (mut start, mut size) = (None, None);
    let mut entry = bias.wrapping_add(dynamic.p_vaddr as usize) as *const Dyn;
    let end = entry.wrapping_add(dynamic.p_memsz as usize / size_of::<Dyn>());
    while entry < end {
        // SAFETY: within the dynamic segment the loader mapped, ended by DT_NULL.
        let Dyn { tag, value } = unsafe { entry.read() };
        match tag {
            DT_NULL => break,
            DT_RELA => start = Some(value as usize),
            DT_RELASZ => size = Some(value as usize),
            _ => {}
        }
        entry = entry.wrapping_add(1);
    }
    let (Some(start), Some(size)) = (start, size) else {
        return 1;
    };
    // glibc rewrites the section's addresses to where they are loaded (the dynamic section is
    // writable on x86-64); other loaders leave them as the file has them, below the bias.
    let start = if start >= bias { start } else { bias + start };
    *span = start..start + size;
    1
}

/// Bytes in a page of memory, as `/proc` counts them.
fn page_size() -> usize {
    usize::try_from(crate::source::procfs::page_size()).unwrap_or(4096)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Which of `pages` (page-aligned) are mapped in this process, from /proc/self/pagemap
    /// (bit 63 of each page's word: present).
    fn present(pages: &Range<usize>) -> usize {
        use std::io::{Read, Seek, SeekFrom};
        let page = page_size();
        let mut map = std::fs::File::open("/proc/self/pagemap").unwrap();
        map.seek(SeekFrom::Start((pages.start / page * 8) as u64))
            .unwrap();
        let mut words = vec![0u8; (pages.end - pages.start) / page * 8];
        map.read_exact(&mut words).unwrap();
        words
            .chunks_exact(8)
            .filter(|w| u64::from_le_bytes((*w).try_into().unwrap()) >> 63 == 1)
            .count()
    }

    /// Where the executable's `.rela.dyn` is loaded, read from its file's section headers, and
    /// where the file's first page is mapped (the load bias of a position-independent binary).
    fn section_in_file() -> Range<usize> {
        use object::{Object, ObjectSection};
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let bias = maps
            .lines()
            .find(|l| {
                l.ends_with(exe.to_str().unwrap())
                    && l.split_whitespace().nth(2) == Some("00000000")
            })
            .and_then(|l| l.split('-').next())
            .map(|a| usize::from_str_radix(a, 16).unwrap())
            .unwrap();
        let bytes = std::fs::read(&exe).unwrap();
        let file = object::File::parse(&*bytes).unwrap();
        let section = file.section_by_name(".rela.dyn").unwrap();
        let start = bias + section.address() as usize;
        start..start + section.size() as usize
    }

    #[test]
    fn the_records_found_are_the_binarys_relocation_section() {
        assert_eq!(relocation_records(), section_in_file());
    }

    #[test]
    fn the_relocation_records_are_found_and_leave_memory() {
        // The test binary is position-independent, as the release build: it has records.
        let span = relocation_pages();
        assert!(!span.is_empty(), "no relocation records found");
        // Read them all: their pages are in memory.
        let page = page_size();
        let mut sum = 0u64;
        for at in span.clone().step_by(page) {
            // SAFETY: a mapped, readable page of the executable.
            sum = sum.wrapping_add(u64::from(unsafe { (at as *const u8).read_volatile() }));
        }
        std::hint::black_box(sum);
        let pages = (span.end - span.start) / page;
        assert_eq!(present(&span), pages, "the records read are in memory");
        assert_eq!(release_relocations(), span);
        assert_eq!(present(&span), 0, "the records' pages were let go");
    }
}
