//! The compile worker's Landlock sandbox: before it reads a byte of its input, the worker
//! gives up every filesystem access (no path may be opened, executed, created or
//! removed), TCP binds and connects, abstract Unix sockets and signals to processes
//! outside it, as far as the kernel's Landlock ABI offers them. What it reads and writes
//! are its stdin and stdout pipes, opened before: Landlock checks paths when they are
//! opened, never descriptors already held. Its executable and shared libraries are mapped
//! by then, so no rule allows any path at all.
//!
//! Best effort, by ABI (`landlock_create_ruleset` with `LANDLOCK_CREATE_RULESET_VERSION`):
//! 1 (Linux 5.13) files; 2 adds renaming and linking across directories; 3 truncation;
//! 4 TCP bind and connect; 5 device ioctls; 6 abstract Unix sockets and signals. A kernel
//! without Landlock (or with it disabled) gets a worker without this sandbox: the host
//! says so once at start ([`support`]), and the worker keeps the rest of its confinement
//! (fresh environment, no inherited descriptors, rlimits).
//!
//! Raw system calls through `libc`: three calls and one struct, fewer lines than a
//! dependency's builder, and nothing in the worker's path that could allocate between
//! checks.

/// `struct landlock_ruleset_attr` (linux/landlock.h). The kernel reads the size given; a
/// kernel knowing fewer fields accepts the larger struct when the unknown fields are zero.
#[repr(C)]
#[derive(Default)]
struct RulesetAttr {
    handled_access_fs: u64,
    handled_access_net: u64,
    scoped: u64,
}

const CREATE_RULESET_VERSION: libc::c_uint = 1;

/// Every filesystem access right of ABI 1 (execute … make_sym).
const FS_ABI1: u64 = (1 << 13) - 1;
const FS_REFER: u64 = 1 << 13;
const FS_TRUNCATE: u64 = 1 << 14;
const FS_IOCTL_DEV: u64 = 1 << 15;
const NET_BIND_TCP: u64 = 1 << 0;
const NET_CONNECT_TCP: u64 = 1 << 1;
const SCOPE_ABSTRACT_UNIX_SOCKET: u64 = 1 << 0;
const SCOPE_SIGNAL: u64 = 1 << 1;

/// What the kernel's Landlock offers the worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Support {
    /// Landlock of this ABI version.
    Abi(u32),
    /// No Landlock (an old kernel, or disabled at boot): the worker runs without it.
    None,
}

impl Support {
    /// What the worker is denied under this support, for the host's log line.
    pub fn denied(self) -> &'static str {
        match self {
            Support::None => "nothing (no Landlock)",
            Support::Abi(1) => "every filesystem path (open, execute, create, remove)",
            Support::Abi(2) => "every filesystem path, and linking or renaming",
            Support::Abi(3) => "every filesystem path, linking, renaming and truncation",
            Support::Abi(4) => "every filesystem path and TCP bind and connect",
            Support::Abi(5) => "every filesystem path, device ioctls, TCP bind and connect",
            Support::Abi(_) => {
                "every filesystem path, device ioctls, TCP bind and connect, abstract Unix \
                 sockets and signals outside the worker"
            }
        }
    }
}

/// The kernel's Landlock ABI, asked without restricting anything.
pub fn support() -> Support {
    #[allow(unsafe_code)]
    // SAFETY: `landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION)` reads no
    // memory and creates no descriptor: it returns the ABI version or -1.
    let abi = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<RulesetAttr>(),
            0usize,
            CREATE_RULESET_VERSION,
        )
    };
    match u32::try_from(abi) {
        Ok(v) if v > 0 => Support::Abi(v),
        _ => Support::None,
    }
}

/// The rights handled (and so denied, no rule allowing any) under `abi`.
fn attr(abi: u32) -> RulesetAttr {
    let mut a = RulesetAttr {
        handled_access_fs: FS_ABI1,
        ..RulesetAttr::default()
    };
    if abi >= 2 {
        a.handled_access_fs |= FS_REFER;
    }
    if abi >= 3 {
        a.handled_access_fs |= FS_TRUNCATE;
    }
    if abi >= 4 {
        a.handled_access_net = NET_BIND_TCP | NET_CONNECT_TCP;
    }
    if abi >= 5 {
        a.handled_access_fs |= FS_IOCTL_DEV;
    }
    if abi >= 6 {
        a.scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL;
    }
    a
}

/// Restrict this process (every thread of it: the worker calls this before it starts any)
/// as [`support`] allows. `Ok(Support::None)`: the kernel has no Landlock, nothing was
/// restricted; an error: Landlock is there but refused the restriction.
pub fn restrict_self() -> std::io::Result<Support> {
    let support = support();
    let Support::Abi(abi) = support else {
        return Ok(support);
    };
    let attr = attr(abi);
    #[allow(unsafe_code)]
    // SAFETY: `attr` is a live `landlock_ruleset_attr` of the size given, read by the
    // kernel during the call; the descriptor returned is ours and closed below. `prctl`
    // and `landlock_restrict_self` take plain integers.
    unsafe {
        let fd = libc::syscall(
            libc::SYS_landlock_create_ruleset,
            &attr as *const RulesetAttr,
            std::mem::size_of::<RulesetAttr>(),
            0u32,
        );
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let fd = fd as libc::c_int;
        // Required of a process without CAP_SYS_ADMIN; the worker never gains privileges.
        let restricted = if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
            || libc::syscall(libc::SYS_landlock_restrict_self, fd, 0u32) != 0
        {
            Err(std::io::Error::last_os_error())
        } else {
            Ok(support)
        };
        libc::close(fd);
        restricted
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_abi_handles_what_it_knows_and_nothing_it_does_not() {
        let one = attr(1);
        assert_eq!(one.handled_access_fs, 0x1fff);
        assert_eq!((one.handled_access_net, one.scoped), (0, 0));
        assert_eq!(attr(3).handled_access_fs, 0x7fff);
        assert_eq!(attr(4).handled_access_net, 3);
        let six = attr(6);
        assert_eq!(six.handled_access_fs, 0xffff);
        assert_eq!(six.scoped, 3);
        // A newer ABI handles what this code knows, no more.
        assert_eq!(attr(9).handled_access_fs, 0xffff);
    }
}
