/*
 * preinit-shim: makes a Python or JavaScript build reproducible. Loaded with LD_PRELOAD
 * into the pre-initializer only (componentize-py; componentize-js's wizer), never into
 * kubewasm or a plugin at run time. plugins/toolchain.sh builds it (ensure_preinit_shim) with
 * the system's C compiler and uses it (preinit_env); Linux x86-64 and aarch64 only.
 *
 * componentize-py and wizer run the interpreter (CPython, StarlingMonkey) once at build
 * time and save its memory as the component: whatever the interpreter drew from the host
 * then is in every instance of that component. They give it the host's entropy (the hash
 * secret, `random`'s and Math.random's seeds), wall clock and file times (the standard
 * library they unpack, the bindings they generate, even the access and change times left in
 * a stat buffer), and neither lets a caller fix that. For that one process, this library
 * makes:
 *
 *   - getrandom, getentropy and syscall(SYS_getrandom) return the same bytes on every call;
 *   - the clocks (clock_gettime's realtime, monotonic and boot-time clocks, gettimeofday,
 *     time) read SOURCE_DATE_EPOCH (default 315532800, 1980-01-01 UTC) and stand still:
 *     time does not pass during a pre-initialization (CPU-time clocks are left alone). The
 *     monotonic clock too, because CPython's snapshot keeps a generator state (a ChaCha key)
 *     that followed it. A timeout computed from a clock that stands still ends at once or
 *     waits for its event: a module that sleeps at import time would wait forever;
 *   - every statx(2) report the access, birth, change and modification times as
 *     SOURCE_DATE_EPOCH. The runtimes call statx directly (not through the C library), so it
 *     is trapped with a seccomp filter (SIGSYS) and made here instead; no other system call
 *     is touched.
 *
 * Why this does not weaken a plugin's security: nothing here runs in a plugin or in kubewasm.
 * A snapshot already shares whatever it drew at build time with every instance of that
 * component (every replica, every restart), and anyone holding the published file can read
 * it: drawing it from a constant instead tells an attacker nothing new. What a plugin draws
 * when it runs comes from kubewasm's WASI random source, the host's (componentize-py also
 * calls random.seed() again on the first call, so `random` is not the snapshot's).
 * Secrets must not be made at import time (a module's top level) in any case.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

static time_t epoch = 315532800;

/* ---- entropy ---------------------------------------------------------------------- */

/* splitmix64 from a fixed seed, restarted on every call: the same bytes whatever the
 * order in which threads ask. */
static void fill(void *buf, size_t len) {
    uint64_t x = 0x6b75626577736d21ULL;
    unsigned char *p = buf;
    while (len) {
        uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        z ^= z >> 31;
        size_t n = len < 8 ? len : 8;
        memcpy(p, &z, n);
        p += n;
        len -= n;
    }
}

ssize_t getrandom(void *buf, size_t len, unsigned int flags) {
    (void)flags;
    fill(buf, len);
    return (ssize_t)len;
}

int getentropy(void *buf, size_t len) {
    if (len > 256) {
        errno = EIO;
        return -1;
    }
    fill(buf, len);
    return 0;
}

/* Rust's std and the getrandom crate may ask through syscall(2). */
long syscall(long n, ...) {
    va_list ap;
    long a[6];
    va_start(ap, n);
    for (int i = 0; i < 6; i++) a[i] = va_arg(ap, long);
    va_end(ap);
    if (n == SYS_getrandom) {
        fill((void *)a[0], (size_t)a[1]);
        return a[1];
    }
    static long (*real)(long, ...);
    if (!real) real = (long (*)(long, ...))dlsym(RTLD_NEXT, "syscall");
    return real(n, a[0], a[1], a[2], a[3], a[4], a[5]);
}

/* ---- wall clock ------------------------------------------------------------------- */

int clock_gettime(clockid_t clk, struct timespec *ts) {
    if (clk == CLOCK_REALTIME || clk == CLOCK_REALTIME_COARSE || clk == CLOCK_TAI ||
        clk == CLOCK_MONOTONIC || clk == CLOCK_MONOTONIC_COARSE || clk == CLOCK_MONOTONIC_RAW ||
        clk == CLOCK_BOOTTIME) {
        ts->tv_sec = epoch;
        ts->tv_nsec = 0;
        return 0;
    }
    static int (*real)(clockid_t, struct timespec *);
    if (!real) real = (int (*)(clockid_t, struct timespec *))dlsym(RTLD_NEXT, "clock_gettime");
    return real(clk, ts);
}

int gettimeofday(struct timeval *restrict tv, void *restrict tz) {
    (void)tz;
    tv->tv_sec = epoch;
    tv->tv_usec = 0;
    return 0;
}

time_t time(time_t *t) {
    if (t) *t = epoch;
    return epoch;
}

/* ---- file times: statx ------------------------------------------------------------ */

/* The one place this library makes a system call itself: the seccomp filter lets statx
 * through when it comes from here (`preinit_syscall_ret`, the address after the
 * instruction), and traps it everywhere else. */
long preinit_syscall(long n, long a, long b, long c, long d, long e);
extern char preinit_syscall_ret[];
#if defined(__x86_64__)
#define SHIM_ARCH AUDIT_ARCH_X86_64
__asm__(".text\n"
        ".globl preinit_syscall\n"
        ".type preinit_syscall,@function\n"
        "preinit_syscall:\n"
        "  mov %rdi, %rax\n"
        "  mov %rsi, %rdi\n"
        "  mov %rdx, %rsi\n"
        "  mov %rcx, %rdx\n"
        "  mov %r8, %r10\n"
        "  mov %r9, %r8\n"
        "  syscall\n"
        ".globl preinit_syscall_ret\n"
        "preinit_syscall_ret:\n"
        "  ret\n");
#define ARG(uc, i) ((long)(uc)->uc_mcontext.gregs[(int[]){REG_RDI, REG_RSI, REG_RDX, REG_R10, REG_R8}[i]])
#define SET_RET(uc, v) ((uc)->uc_mcontext.gregs[REG_RAX] = (v))
#elif defined(__aarch64__)
#define SHIM_ARCH AUDIT_ARCH_AARCH64
__asm__(".text\n"
        ".globl preinit_syscall\n"
        ".type preinit_syscall,%function\n"
        "preinit_syscall:\n"
        "  mov x8, x0\n"
        "  mov x0, x1\n"
        "  mov x1, x2\n"
        "  mov x2, x3\n"
        "  mov x3, x4\n"
        "  mov x4, x5\n"
        "  svc #0\n"
        ".globl preinit_syscall_ret\n"
        "preinit_syscall_ret:\n"
        "  ret\n");
#define ARG(uc, i) ((long)(uc)->uc_mcontext.regs[i])
#define SET_RET(uc, v) ((uc)->uc_mcontext.regs[0] = (v))
#else
#error "preinit-shim supports x86-64 and aarch64 Linux"
#endif

/* Inode numbers, in the order files are first seen (the host hashes (device, inode) into
 * the inode numbers WASI reports, and a new build's files have new ones): an open-addressing
 * table, locked with a spin lock (the handler runs on any thread; it cannot take a mutex). */
#define INODES (1u << 18)
static struct {
    uint64_t dev, ino, id;
} inodes[INODES];
static uint64_t inodes_seen;
static volatile int inodes_lock;

static uint64_t stable_inode(uint64_t dev, uint64_t ino) {
    uint64_t h = (dev * 0x9e3779b97f4a7c15ULL) ^ (ino * 0xbf58476d1ce4e5b9ULL);
    uint64_t id = ino; /* when the table is full: the real one */
    while (__atomic_test_and_set(&inodes_lock, __ATOMIC_ACQUIRE)) {
    }
    for (uint32_t i = 0; i < INODES; i++) {
        uint32_t slot = (uint32_t)(h + i) & (INODES - 1);
        if (inodes[slot].id == 0) {
            if (inodes_seen + 1 < INODES / 2) {
                inodes[slot].dev = dev;
                inodes[slot].ino = ino;
                inodes[slot].id = id = ++inodes_seen;
            }
            break;
        }
        if (inodes[slot].dev == dev && inodes[slot].ino == ino) {
            id = inodes[slot].id;
            break;
        }
    }
    __atomic_clear(&inodes_lock, __ATOMIC_RELEASE);
    return id;
}

static void on_sigsys(int sig, siginfo_t *info, void *context) {
    (void)sig;
    ucontext_t *uc = context;
    if (info->si_syscall != SYS_statx) return;
    long rc = preinit_syscall(SYS_statx, ARG(uc, 0), ARG(uc, 1), ARG(uc, 2), ARG(uc, 3), ARG(uc, 4));
    if (rc == 0) {
        struct statx *st = (struct statx *)ARG(uc, 4);
        struct statx_timestamp t = {.tv_sec = epoch, .tv_nsec = 0};
        st->stx_atime = t;
        st->stx_btime = t;
        st->stx_ctime = t;
        st->stx_mtime = t;
        uint64_t dev = ((uint64_t)st->stx_dev_major << 32) | st->stx_dev_minor;
        st->stx_ino = stable_inode(dev, st->stx_ino);
        st->stx_dev_major = 0;
        st->stx_dev_minor = 1;
    }
    SET_RET(uc, rc);
}

/* statx from anywhere but preinit_syscall: SIGSYS (on_sigsys makes it). */
static int trap_statx(void) {
    uint64_t ret = (uint64_t)(uintptr_t)preinit_syscall_ret;
    struct sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SHIM_ARCH, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_statx, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, instruction_pointer)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)ret, 0, 3),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, instruction_pointer) + 4),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)(ret >> 32), 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP),
    };
    struct sock_fprog prog = {.len = sizeof filter / sizeof filter[0], .filter = filter};
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigsys;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGSYS, &sa, NULL) != 0) return -1;
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return -1;
    return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog);
}

__attribute__((constructor)) static void init(void) {
    /* KUBEWASM_PREINIT_EPOCH (the wizer wrapper's: componentize-js gives wizer an
     * environment of its own), else SOURCE_DATE_EPOCH. */
    const char *e = getenv("KUBEWASM_PREINIT_EPOCH");
    if (!e || !*e) e = getenv("SOURCE_DATE_EPOCH");
    if (e && *e) epoch = (time_t)strtoll(e, NULL, 10);
    /* Neither inherited by a process this one starts nor seen by the guest (wizer passes its
     * environment on to it). A process this one starts inherits the filter but not the
     * handler: the pre-initializers start none once VIRTUAL_ENV is set (toolchain.sh). */
    unsetenv("LD_PRELOAD");
    unsetenv("KUBEWASM_PREINIT_EPOCH");
    if (trap_statx() != 0) {
        static const char msg[] = "preinit-shim: cannot install the statx filter (seccomp)\n";
        (void)!write(2, msg, sizeof msg - 1);
        _exit(70);
    }
}
