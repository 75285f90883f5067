#!/usr/bin/env python3
"""The code layout of the `kubewasm` binary: which functions the linker places first.

The kernel maps a binary's code in windows of 64 KiB around each page touched (fault-around)
and reads executables ahead in large windows, so the code resident in a running host is the
windows its functions fall in, not the functions. Placed by the linker in source order, the
few megabytes of functions that a host runs are spread over the 36 MB of code, and ~12 MiB
of windows end up resident. Two files ask the linker to place them first, together: those
that run once the host has started (watches, events, plugin calls, applies, the periodic
work), then those of start-up alone. `hot-code.ld`, a linker script, names a function by
its mangled name up to the hash, which changes with the profile, the target and the
compiler, so it holds for any build of the same sources. A generic function's instances
share that name, so those that ran are named in full in `hot-code.order` (the linker's
`--symbol-ordering-file`), which holds only for builds of the profile settings, target
option and Cargo.lock recorded. host/cli/build.rs passes both.

Two steps, on Linux, as root (for `read_ahead_kb` and /proc/PID/pagemap):

    generate.py record OUT.json [PATTERN]
        Samples the code pages of the first process matching PATTERN (default
        'target/release/kubewasm .*run') every 20 ms until it exits. Start it, then the
        host. For exact pages, turn read-ahead off on the binary's disk and drop the binary
        from the page cache first (so a fault maps only the page touched):
        echo 0 > /sys/block/DEV/queue/read_ahead_kb (and restore it afterwards).
    generate.py script BINARY PROFILE.json... [--and BINARY PROFILE.json...]...
        Writes hot-code.ld and hot-code.order beside this script from the recorded
        profiles of each BINARY (the build that was recorded): one for each kind of build
        whose full names should be placed (the image's `--target` build and a plain
        `cargo build --release` differ).

tests/bench/README.md ("Code layout") says how the committed files were recorded. A
function renamed or added since, or not found, falls back to the linker's order.
"""
import json
import os
import re
import struct
import subprocess
import sys
import time


def record(out, pattern="target/release/kubewasm .*run"):
    pid = None
    while pid is None:
        found = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True).stdout.split()
        if found:
            pid = found[0]
        else:
            time.sleep(0.005)
    exe, samples = None, []
    try:
        while True:
            exe = exe or os.readlink(f"/proc/{pid}/exe")
            mappings = []
            for line in open(f"/proc/{pid}/maps"):
                fields = line.split()
                if len(fields) >= 6 and fields[1] == "r-xp" and fields[5] == exe:
                    start, end = (int(x, 16) for x in fields[0].split("-"))
                    mappings.append((start, end, int(fields[2], 16)))
            present = []
            with open(f"/proc/{pid}/pagemap", "rb") as pagemap:
                for start, end, offset in mappings:
                    pagemap.seek(start // 4096 * 8)
                    entries = pagemap.read((end - start) // 4096 * 8)
                    for i, (entry,) in enumerate(struct.iter_unpack("<Q", entries)):
                        if entry >> 63:
                            present.append(offset + i * 4096)
            samples.append((time.monotonic(), present))
            time.sleep(0.02)
    except OSError:
        pass  # the process exited
    t0 = samples[0][0] if samples else 0
    with open(out, "w") as f:
        json.dump({"exe": exe, "samples": [[t - t0, p] for t, p in samples]}, f)
    print(f"{len(samples)} samples of {exe}", file=sys.stderr)


def phases(profile):
    """(pages of the running host, pages of start-up alone): the host gives its code back
    before its own start-up (`resident::release`), which shows as the first sample with
    fewer than half the pages of the one before; what is resident from then on runs once
    the host runs."""
    counts = [len(p) for _, p in profile["samples"]]
    first = next((i for i in range(1, len(counts)) if counts[i] < counts[i - 1] // 2), 0)
    running, startup = set(), set()
    for i, (_, pages) in enumerate(profile["samples"]):
        (running if i >= first else startup).update(pages)
    return running, startup - running


def text_segment(binary):
    """(file offset, virtual address) of the executable PT_LOAD of a 64-bit ELF."""
    with open(binary, "rb") as f:
        header = f.read(64)
        phoff, = struct.unpack_from("<Q", header, 32)
        phentsize, phnum = struct.unpack_from("<HH", header, 54)
        f.seek(phoff)
        table = f.read(phentsize * phnum)
    for i in range(phnum):
        kind, flags, offset, vaddr = struct.unpack_from("<IIQQ", table, i * phentsize)
        if kind == 1 and flags & 1:
            return offset, vaddr
    raise SystemExit(f"{binary}: no executable segment")


HASH = re.compile(r"17h[0-9a-f]{16}E(\..*)?$")


def pattern(name):
    """The section-name pattern of a function: its mangled name up to the hash."""
    m = HASH.search(name)
    return name[: m.start()] + "17h*" if m else name


def layout(binary, profiles):
    """The functions of one recorded build that ran, in the order they should be placed
    (the running host's before start-up's), as (key, whether the key is a pattern, full
    name), where the key is the function's pattern or, for a generic function's
    instance, its full name; and how many functions each pattern names."""
    runs, startup = [], set()
    for path in profiles:
        r, s = phases(json.load(open(path)))
        runs.append(r)
        startup |= s
    running = set().union(*runs)
    startup -= running
    offset, vaddr = text_segment(binary)
    nm = subprocess.run(["nm", "-S", "--defined-only", binary], capture_output=True, text=True, check=True)
    functions = []  # (name, address, how many profiles' hosts ran it, start-up ran it)
    instances = {}  # pattern -> how many functions it names
    for line in nm.stdout.splitlines():
        fields = line.split(" ", 3)
        if len(fields) != 4 or fields[2] not in ("t", "T"):
            continue
        address, size, name = int(fields[0], 16), int(fields[1], 16), fields[3]
        first = (address - vaddr + offset) // 4096 * 4096
        pages = range(first, address - vaddr + offset + max(size, 1), 4096)
        ran_in = sum(any(p in r for p in pages) for r in runs)
        functions.append((name, address, ran_in, any(p in startup for p in pages)))
        instances[pattern(name)] = instances.get(pattern(name), 0) + 1
    # A generic function's instances share their name up to the hash, so a pattern would
    # place them all, most never run (measured: 0.98x the Controller's peak instead of
    # 0.87x with half-run generics as patterns): those that ran are named in full.
    def key(name):
        unique = instances[pattern(name)] == 1
        return (pattern(name) if unique else name, unique, name)

    hot, cold = {}, {}
    for name, address, ran_in, at_startup in functions:
        if ran_in:
            # Functions every profile's host ran come first, then those of fewer.
            hot.setdefault(key(name), (-ran_in, address))
        elif at_startup:
            cold.setdefault(key(name), (0, address))
    for k in hot:
        cold.pop(k, None)
    return [k for group in (hot, cold) for k in sorted(group, key=group.get)], instances


def script(builds):
    """Write hot-code.ld and hot-code.order from [(binary, [profile, ...]), ...]: the
    patterns of every build, a pattern only where it names one function in each build that
    has it, and the full names of each build (the first build's order first)."""
    layouts = [layout(binary, profiles) for binary, profiles in builds]
    generic = {p for _, instances in layouts for p, n in instances.items() if n > 1}
    patterns, names = {}, {}
    for order, _ in layouts:
        for key, unique, name in order:
            if unique and key not in generic:
                patterns.setdefault(key, None)
            else:
                # A generic instance, or a function another build has several of.
                names.setdefault(name, None)
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "hot-code.ld"), "w") as out:
        out.write("/* Generated by generate.py (beside this file): the functions a running host\n")
        out.write("   runs, those of every profile first, then those of its start-up alone, by\n")
        out.write("   their mangled names up to the hash; passed to the linker by\n")
        out.write("   host/cli/build.rs. Generic functions are in hot-code.order. */\n")
        out.write("SECTIONS\n{\n  .text.kubewasm.hot : {\n")
        for key in patterns:
            out.write(f"    *(.text.{key})\n")
        out.write("  }\n}\nINSERT BEFORE .text;\n")
    with open(os.path.join(here, "hot-code.order"), "w") as out:
        for key in names:
            out.write(key + "\n")
    print(f"{len(patterns)} patterns, {len(names)} full names", file=sys.stderr)


def builds(args):
    """BINARY PROFILE... [--and BINARY PROFILE...]... as [(binary, [profile, ...]), ...]."""
    found, current = [], []
    for arg in args + ["--and"]:
        if arg != "--and":
            current.append(arg)
        elif len(current) >= 2:
            found.append((current[0], current[1:]))
            current = []
        else:
            raise SystemExit(__doc__)
    return found


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "record":
        record(*sys.argv[2:4])
    elif len(sys.argv) >= 4 and sys.argv[1] == "script":
        script(builds(sys.argv[2:]))
    else:
        raise SystemExit(__doc__)
