//! Giving back resident memory the running host no longer uses: the binary's code and
//! read-only data pages that start-up touched, and the free pages glibc keeps.
//!
//! Most of an idle host's resident memory is its own code, mapped from the binary, and
//! the kernel maps a 64 KiB window around each code page touched (fault-around, which
//! `MADV_RANDOM` does not turn off: measured). Start-up (the kubeconfig, TLS, discovery,
//! loading the plugins) leaves megabytes of code resident that never runs again.
//! [`release`] reclaims the binary's read-only mappings (`MADV_PAGEOUT`: their pages leave
//! the process and, where no other process maps them, the page cache, so what runs again
//! is read back a page at a time instead of in whole windows of pages still cached), then
//! unmaps what is left of them (`MADV_DONTNEED`: pages another process maps stay cached);
//! it also returns glibc's free heap pages (`malloc_trim`). This is what the kernel does
//! to these pages under memory pressure; here it happens before there is any. The
//! mappings are also marked `MADV_RANDOM`: a page read back from the file after a release
//! comes alone, without the read-around window of its neighbours (fault-around still maps
//! neighbours that are cached). Measured at N = 1,000: 1.3 MiB less at the peak, the same
//! CPU.
//!
//! The kernel pages out a file's pages only for a process that owns the file or may write
//! it, which the image's host (user 65532, a root-owned binary) does not: so once the
//! mappings are dropped, the release also evicts the binary's unmapped pages from the
//! page cache (`POSIX_FADV_DONTNEED`, which any reader may ask). Idle as 65532: 13.8 MiB
//! without it, measured.
//!
//! Linux only (the trim with glibc only, so not in a static musl build); elsewhere it does
//! nothing.

/// Drop the binary's code and read-only data pages from this process and return glibc's
/// free heap pages; the bytes of the mappings dropped. Cheap (a read of
/// `/proc/self/smaps` and a few system calls); any thread, any time.
pub(crate) fn release() -> usize {
    let dropped = code_mappings()
        .into_iter()
        .filter(|&(start, len)| drop_pages(start, len))
        .map(|(_, len)| len)
        .sum();
    if dropped > 0 {
        uncache_binary();
    }
    trim();
    dropped
}

/// Drop the binary's pages that no process maps from the page cache: what
/// `MADV_PAGEOUT` does for a process that owns its binary or may write it, here for any
/// (the image's binary is root's, and the host runs as another user). Called once the
/// mappings are dropped, so this process's pages are among them.
fn uncache_binary() {
    if let Ok(exe) = std::fs::File::open("/proc/self/exe") {
        advise_dontneed(&exe);
    }
}

#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
fn advise_dontneed(file: &std::fs::File) {
    use std::os::fd::AsRawFd as _;
    // SAFETY: the descriptor is open for the whole call (`file` is borrowed). The advice
    // only evicts clean page-cache pages of the file that no process maps (the kernel
    // skips mapped and dirty ones); no memory of this process changes. A failure changes
    // nothing.
    unsafe {
        libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED);
    }
}

#[cfg(not(target_os = "linux"))]
fn advise_dontneed(_file: &std::fs::File) {}

/// The running binary's code and read-only data: each read-only or read/execute private
/// mapping of `/proc/self/exe` holding no anonymous page (so not the read-only data the
/// dynamic loader relocated), as (start, length). Empty where `/proc` does not say.
fn code_mappings() -> Vec<(usize, usize)> {
    let (Ok(exe), Ok(smaps)) = (
        std::fs::read_link("/proc/self/exe"),
        std::fs::read_to_string("/proc/self/smaps"),
    ) else {
        return Vec::new();
    };
    exe.to_str()
        .map(|exe| code_mappings_in(&smaps, exe))
        .unwrap_or_default()
}

/// [`code_mappings`] of an smaps text: a mapping's header line, then its `Key: value` lines.
fn code_mappings_in(smaps: &str, exe: &str) -> Vec<(usize, usize)> {
    let mut found = Vec::new();
    let mut current = None;
    for line in smaps.lines() {
        if let Some(kib) = line.strip_prefix("Anonymous:") {
            // A page written in the mapping (a debugger's breakpoint, a uprobe) is not
            // the file's: such a mapping is left alone.
            let clean = kib.trim().strip_suffix("kB").map(str::trim) == Some("0");
            if let Some(range) = current.take().filter(|_| clean) {
                found.push(range);
            }
        } else if !line
            .split_ascii_whitespace()
            .next()
            .is_some_and(|key| key.ends_with(':'))
        {
            current = header(line, exe);
        }
    }
    found
}

/// A mapping's header (`start-end perms offset dev inode path`) as a read-only mapping of
/// `exe`.
fn header(line: &str, exe: &str) -> Option<(usize, usize)> {
    let mut fields = line.split_ascii_whitespace();
    let (range, perms) = (fields.next()?, fields.next()?);
    // The path is the line's rest and may hold spaces; a replaced binary's ends in
    // " (deleted)" and is left alone.
    let path = line.splitn(6, ' ').nth(5)?.trim_start();
    if !matches!(perms, "r-xp" | "r--p") || path != exe {
        return None;
    }
    let (start, end) = range.split_once('-')?;
    let start = usize::from_str_radix(start, 16).ok()?;
    let end = usize::from_str_radix(end, 16).ok()?;
    (end > start).then_some((start, end - start))
}

#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
fn drop_pages(start: usize, len: usize) -> bool {
    // SAFETY: `start..start + len` is one whole mapping that the kernel lists as the
    // running executable's: private, not writable, holding no anonymous page, so every
    // page of it is the file's bytes (nothing in the process can write it; the pages the
    // dynamic loader relocated are anonymous, and their mapping is skipped); nothing
    // unmaps or remaps it while the process lives. MADV_DONTNEED on such a mapping removes
    // its pages from this process's page tables only, and MADV_PAGEOUT reclaims them as
    // memory pressure would: the next access to any byte faults the same bytes back in
    // from the file (a change to the file on disk would reach these pages after any
    // reclaim, with or without this call). No memory that Rust code reads changes, so no
    // reference or pointer is invalidated. MADV_RANDOM changes only how much the kernel
    // reads ahead on a fault. A failure (EINVAL on a locked mapping) changes nothing.
    unsafe {
        let addr = start as *mut libc::c_void;
        // Older kernels (before 5.4) do not know MADV_PAGEOUT; the unmapping does not
        // depend on it, nor on MADV_RANDOM (read-ahead advice only).
        libc::madvise(addr, len, libc::MADV_RANDOM);
        libc::madvise(addr, len, libc::MADV_PAGEOUT);
        libc::madvise(addr, len, libc::MADV_DONTNEED) == 0
    }
}

#[cfg(not(target_os = "linux"))]
fn drop_pages(_start: usize, _len: usize) -> bool {
    false
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
fn trim() {
    // SAFETY: `malloc_trim` returns free memory of glibc's heaps to the system under
    // glibc's own locks; it has no preconditions and touches no allocated block.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn trim() {}

#[cfg(test)]
mod tests {
    use super::*;

    const SMAPS: &str = "\
55d0c0000000-55d0c0400000 r--p 00000000 fe:01 123                        /usr/bin/kube wasm
Size:               4096 kB
Anonymous:             0 kB
55d0c0000000-55d0c0400000 r--p 00000000 fe:01 123                        /usr/bin/kube wasm
Size:               4096 kB
Anonymous:          1272 kB
55d0c0000000-55d0c0400000 rw-p 00000000 fe:01 123                        /usr/bin/kube wasm
Anonymous:             0 kB
55d0c0400000-55d0c1400000 r-xp 00400000 fe:01 123                        /usr/bin/kube wasm
Size:              16384 kB
Anonymous:             0 kB
55d0c1400000-55d0c1500000 r-xp 01400000 fe:01 123                        /usr/bin/kube wasm
Anonymous:             4 kB
55d0c1500000-55d0c1600000 r-xp 01500000 fe:01 123                        /usr/bin/kube wasm (deleted)
Anonymous:             0 kB
7f0000000000-7f0000100000 r-xp 00000000 fe:01 456                        /usr/lib/libc.so.6
Anonymous:             0 kB
7f0000200000-7f0000300000 rw-p 00000000 00:00 0 
Anonymous:          1024 kB
";

    #[test]
    fn only_the_executables_clean_read_only_mappings_are_dropped() {
        assert_eq!(
            code_mappings_in(SMAPS, "/usr/bin/kube wasm"),
            [(0x55d0c0000000, 4 << 20), (0x55d0c0400000, 16 << 20)]
        );
    }

    #[test]
    fn the_running_binary_keeps_running_after_its_code_is_dropped() {
        // This test binary's own code: found, dropped, and faulted back in to run on.
        assert!(release() > 0);
        assert_eq!(code_mappings_in("", "x"), []);
    }
}
