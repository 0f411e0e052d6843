//! What the loader read once and the monitor need not keep in memory.
//!
//! A position-independent binary carries a record for each address the loader must fix up as
//! it maps it: strata's release build some 16,500 of 24 bytes each (390 kB), applied before
//! `main` and never read again. Their pages stay mapped, and counted in the monitor's
//! resident memory (its RSS, what `top` shows), for as long as the process runs.
//! [`release_relocations`] lets them go at start: the pages leave this process (a private,
//! read-only mapping of the binary's file, never written), the file's copy in the page cache
//! is untouched, and a read, were there one, would bring them back from the file.
//!
//! Starting reads much more code and constant data than a sample does, in the binary and in
//! the libraries (the command line's parser and its help, the loader's and the C library's
//! start, NVML's initialisation), and the kernel maps each in blocks of 64 KiB around the page
//! read. [`release_startup_pages`] lets go of every page of the process's read-only file
//! mappings once the monitor runs steadily; what a sample reads comes back at the next one,
//! from the page cache, and the rest stays out.

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

/// Lets go of the pages of this process's read-only mappings of files (its binary's and its
/// libraries' code and constants) that are the file's bytes as they are: the pages leave the
/// process, the page cache keeps them, and the next read of one maps it again from there (a
/// minor fault, with the 64 KiB around it). Returns the resident kB let go (0 where
/// `/proc/self/smaps` cannot be read).
///
/// A page that is not the file's bytes (written through a debugger, or relocated and made
/// read-only after, as the loader's RELRO is) would be lost: a mapping holding any such page
/// (`Anonymous` or `Swap` above 0) is left whole, and so is one of a device, locked or not a
/// file's ([`releasable`]).
pub fn release_startup_pages() -> u64 {
    let Ok(smaps) = std::fs::read_to_string("/proc/self/smaps") else {
        return 0;
    };
    let mut released = 0;
    for (span, resident) in releasable(&smaps) {
        // SAFETY: a whole mapping of a file, private and read-only, none of whose pages differs
        // from the file (`releasable`): MADV_DONTNEED drops this process's view of them, and
        // a later read faults in the same bytes from the file.
        let result = unsafe {
            libc::madvise(
                span.start as *mut libc::c_void,
                span.end - span.start,
                libc::MADV_DONTNEED,
            )
        };
        if result == 0 {
            released += resident;
        }
    }
    released
}

/// The mappings of `smaps` (`/proc/PID/smaps`'s text) whose pages [`release_startup_pages`]
/// may let go, each with its resident kB: private and read-only (`r--p`, `r-xp`), of a file
/// outside `/dev`, with no page of its own (`Anonymous`, `Swap`: 0 kB), not locked, not of
/// device memory (`VmFlags` `lo`, `io`, `pf`). A mapping whose fields are not all there is
/// left.
fn releasable(smaps: &str) -> Vec<(Range<usize>, u64)> {
    #[derive(Default)]
    struct Mapping {
        span: Range<usize>,
        candidate: bool,
        rss: Option<u64>,
        own: Option<u64>,
        swap: Option<u64>,
        flags_ok: Option<bool>,
    }
    fn done(m: Mapping, out: &mut Vec<(Range<usize>, u64)>) {
        if m.candidate && m.own == Some(0) && m.swap == Some(0) && m.flags_ok == Some(true) {
            if let Some(rss) = m.rss.filter(|&kb| kb > 0) {
                out.push((m.span, rss));
            }
        }
    }
    fn header(line: &str) -> Option<Mapping> {
        let mut fields = line.split_whitespace();
        let (start, end) = fields.next()?.split_once('-')?;
        let span = usize::from_str_radix(start, 16).ok()?..usize::from_str_radix(end, 16).ok()?;
        let perms = fields.next()?;
        // Offset, device, inode, then the path (absent for anonymous memory).
        let path = fields.nth(3).unwrap_or("");
        let candidate = matches!(perms, "r--p" | "r-xp")
            && path.starts_with('/')
            && !path.starts_with("/dev/")
            && span.end > span.start;
        Some(Mapping {
            span,
            candidate,
            ..Mapping::default()
        })
    }
    let kb = |value: &str| -> Option<u64> {
        let mut parts = value.split_whitespace();
        let n = parts.next()?.parse().ok()?;
        (parts.next() == Some("kB")).then_some(n)
    };
    let mut out = Vec::new();
    let mut current: Option<Mapping> = None;
    for line in smaps.lines() {
        let Some((key, value)) = line.split_once(':').filter(|(k, _)| !k.contains(' ')) else {
            if let Some(m) = current.take() {
                done(m, &mut out);
            }
            current = header(line);
            continue;
        };
        let Some(m) = current.as_mut() else { continue };
        match key {
            "Rss" => m.rss = kb(value),
            "Anonymous" => m.own = kb(value),
            "Swap" => m.swap = kb(value),
            "VmFlags" => {
                m.flags_ok = Some(
                    !value
                        .split_whitespace()
                        .any(|flag| matches!(flag, "lo" | "io" | "pf")),
                );
            }
            _ => {}
        }
    }
    if let Some(m) = current.take() {
        done(m, &mut out);
    }
    out
}

/// Bytes in a page of memory, as `/proc` counts them.
fn page_size() -> usize {
    usize::try_from(crate::source::procfs::page_size()).unwrap_or(4096)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Held by each test that counts this process's pages in memory, or lets them go: the
    /// tests of a binary run on threads side by side, and one letting go of the binary's
    /// pages while another counts what it has just read would fail it.
    static PAGES: std::sync::Mutex<()> = std::sync::Mutex::new(());

    /// [`PAGES`], held until the guard is dropped (a test that failed holding it lets go).
    fn alone() -> std::sync::MutexGuard<'static, ()> {
        PAGES
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

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

    /// Four mappings of one file, and the rest of a process's kinds, as `/proc/PID/smaps`
    /// gives them (fields left out that the choice does not read).
    const SMAPS: &str = "\
5600aa000000-5600aa010000 r--p 00000000 08:01 131 /usr/bin/strata
Rss:                  40 kB
Anonymous:             0 kB
Swap:                  0 kB
VmFlags: rd mr mw me sd
5600aa010000-5600aa090000 r-xp 00010000 08:01 131 /usr/bin/strata
Rss:                 512 kB
Anonymous:             0 kB
Swap:                  0 kB
VmFlags: rd ex mr mw me sd
5600aa090000-5600aa0a0000 r--p 00090000 08:01 131 /usr/bin/strata
Rss:                  64 kB
Anonymous:            64 kB
Swap:                  0 kB
VmFlags: rd mr mw me ac sd
5600aa0a0000-5600aa0a4000 rw-p 000a0000 08:01 131 /usr/bin/strata
Rss:                  16 kB
Anonymous:            16 kB
Swap:                  0 kB
VmFlags: rd wr mr mw me ac sd
5600ab000000-5600ab100000 rw-p 00000000 00:00 0 [heap]
Rss:                 900 kB
Anonymous:           900 kB
Swap:                  0 kB
VmFlags: rd wr mr mw me ac sd
7f0000000000-7f0000010000 r-xp 00000000 08:01 77 /usr/lib/x86_64-linux-gnu/libc.so.6
Rss:                  60 kB
Anonymous:             0 kB
Swap:                  4 kB
VmFlags: rd ex mr mw me sd
7f0000010000-7f0000020000 r-xp 00000000 08:01 78 /opt/lib/libpinned.so
Rss:                  64 kB
Anonymous:             0 kB
Swap:                  0 kB
VmFlags: rd ex mr mw me lo sd
7f0000020000-7f0000030000 r--p 00000000 00:05 9 /dev/nvidiactl
Rss:                  64 kB
Anonymous:             0 kB
Swap:                  0 kB
VmFlags: rd mr mw me io pf
7f0000030000-7f0000040000 r--s 00000000 08:01 79 /var/cache/shared.db
Rss:                  64 kB
Anonymous:             0 kB
Swap:                  0 kB
VmFlags: rd sh mr mw me ms sd
7f0000040000-7f0000050000 r--p 00000000 08:01 80 /opt/lib/lib with space.so (deleted)
Rss:                  12 kB
Anonymous:             0 kB
Swap:                  0 kB
VmFlags: rd mr mw me sd
7f0000050000-7f0000060000 r--p 00000000 08:01 81 /opt/lib/libcold.so
Rss:                   0 kB
Anonymous:             0 kB
Swap:                  0 kB
VmFlags: rd mr mw me sd
7f0000060000-7f0000070000 r--p 00000000 08:01 82 /opt/lib/libcut.so
Rss:                  64 kB
7ffd00000000-7ffd00002000 r-xp 00000000 00:00 0 [vdso]
Rss:                   8 kB
Anonymous:             0 kB
Swap:                  0 kB
VmFlags: rd ex mr mw me de sd
";

    #[test]
    fn only_clean_private_read_only_mappings_of_files_are_let_go() {
        let chosen = releasable(SMAPS);
        assert_eq!(
            chosen,
            vec![
                // The binary's headers and constants, and its code.
                (0x5600_aa00_0000..0x5600_aa01_0000, 40),
                (0x5600_aa01_0000..0x5600_aa09_0000, 512),
                // A file deleted since, its name with a space.
                (0x7f00_0004_0000..0x7f00_0005_0000, 12),
            ],
            // Left: the binary's RELRO (relocated, then made read-only: its own pages), its
            // data, the heap, a library with a page swapped out, one locked, a device's
            // mapping, a shared one, one with nothing resident, one whose fields are cut
            // short, the vDSO.
        );
    }

    #[test]
    fn nothing_is_let_go_of_what_cannot_be_read() {
        assert!(releasable("").is_empty());
        assert!(releasable("not smaps at all\nRss: 4 kB\n").is_empty());
    }

    /// Maps `len` bytes of `file` private, with protection `prot`; the mapping's address.
    fn map(file: &std::fs::File, len: usize, prot: libc::c_int) -> *mut u8 {
        use std::os::fd::AsRawFd;
        // SAFETY: a new mapping of an open file, at an address the kernel picks.
        let at = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                prot,
                libc::MAP_PRIVATE,
                file.as_raw_fd(),
                0,
            )
        };
        assert_ne!(at, libc::MAP_FAILED, "mmap");
        at.cast()
    }

    #[test]
    fn a_files_clean_pages_leave_memory_and_read_the_same_and_written_ones_stay() {
        let _alone = alone();
        let page = page_size();
        let bytes: Vec<u8> = (0..4 * page).map(|i| (i % 251) as u8).collect();
        let path = std::env::temp_dir().join(format!("strata-footprint-{}", std::process::id()));
        std::fs::write(&path, &bytes).unwrap();
        let file = std::fs::File::open(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        // A clean mapping, read whole.
        let clean = map(&file, bytes.len(), libc::PROT_READ);
        // SAFETY: the mapping is `bytes.len()` readable bytes, alive until unmapped below.
        let read = |at: *mut u8| unsafe { std::slice::from_raw_parts(at, bytes.len()).to_vec() };
        assert_eq!(read(clean), bytes);
        let clean_span = clean as usize..clean as usize + bytes.len();
        assert_eq!(present(&clean_span), 4);
        // A mapping written to and made read-only after, as the loader's RELRO: its written
        // page is its own, and must not go back to the file's bytes.
        let written = map(&file, bytes.len(), libc::PROT_READ | libc::PROT_WRITE);
        // SAFETY: the first byte of a writable mapping; then the whole mapping made read-only.
        unsafe {
            written.write_volatile(0xEE);
            assert_eq!(
                libc::mprotect(written.cast(), bytes.len(), libc::PROT_READ),
                0
            );
        }
        let let_go = release_startup_pages();
        assert!(let_go >= 16, "{let_go} kB let go");
        assert_eq!(present(&clean_span), 0, "the clean pages were let go");
        assert_eq!(read(clean), bytes, "and read the file's bytes again");
        let mut expected = bytes.clone();
        expected[0] = 0xEE;
        assert_eq!(read(written), expected, "the written page stayed");
        // SAFETY: both mappings were made above with these lengths, and are not used after.
        unsafe {
            libc::munmap(clean.cast(), bytes.len());
            libc::munmap(written.cast(), bytes.len());
        }
    }

    #[test]
    fn the_records_found_are_the_binarys_relocation_section() {
        assert_eq!(relocation_records(), section_in_file());
    }

    #[test]
    fn the_relocation_records_are_found_and_leave_memory() {
        let _alone = alone();
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
