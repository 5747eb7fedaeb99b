#!/usr/bin/env python3
"""Shrink the CUDA device code of vLLM's shared libraries for one GPU arch, in place.

A shared library built with nvcc keeps its device code in the ELF section `.nv_fatbin`: one
fat binary per translation unit, each holding a cubin (ELF, machine code) per target arch and
optionally PTX (in vLLM 0.26 each entry is zstd-compressed already, flag 0x8000).  On an sm_90
GPU (H100/H200) the driver loads, per translation unit, the sm_90 cubin if there is one, else
JIT-compiles the newest PTX with arch <= 90.  Everything else is dead weight that does not
compress, e.g. 42 of the 54 MiB of device code in the 78 MiB `_C_stable_libtorch`.

This script overwrites the *payload* of the entries the driver can never choose on the target
arch with zero bytes.  Headers, sizes and offsets stay as they were (the host side points into
the section), so the library is byte-for-byte the same size and the zeros compress to nothing.

  --arch 90            per translation unit keep only what the driver picks on sm_90: the sm_90
                       cubin if present, else the newest PTX <= 90; zero the rest (the driver's
                       choice is unchanged; no PTX JIT happens that did not happen before)
  --fa3-keep 64:64,128:128 --fa3-dtypes bfloat16_t,half_t
                       additionally zero whole FlashAttention-3 translation units whose forward
                       kernels use none of the listed (head_dim:head_dim_v, dtype) combinations
                       (FA3 ships only sm_90 code, 113 MiB of it).  A model with another head
                       size then fails at its first attention call ("invalid device image"), so
                       keep the head sizes of the models you serve.

Run with --scan to only print what is in a library.
"""
import argparse
import collections
import os
import re
import struct
import subprocess
import sys
import tempfile

MAGIC = 0xBA55ED50
KIND = {1: "PTX", 2: "ELF"}


# .nv_fatbin: the device code the runtime registers. __nv_relfatbin: relocatable device code kept for a later
# device link (NCCL ships 121 MiB of it for every arch), in the same fat binary format.
SECTIONS = (".nv_fatbin", "__nv_relfatbin")


def fatbin_sections(path):
    """(offset, size) of each section holding fat binaries."""
    out = subprocess.check_output(["readelf", "-SW", path], text=True)
    found = []
    for line in out.splitlines():
        if "]" in line and line.split("]", 1)[1].split()[0] in SECTIONS:
            parts = line.split("]", 1)[1].split()
            found.append((int(parts[3], 16), int(parts[4], 16)))
    return found


def entries(data, off, size, tu=0):
    """Yield (tu, entry_offset, header_size, payload_size, kind, arch, flags); translation units numbered from tu."""
    p, end = off, off + size
    while p + 16 <= end:
        magic, _ver, hs, fs = struct.unpack_from("<IHHQ", data, p)
        if magic != MAGIC:
            p += 8  # fat binaries are 8-byte aligned; skip padding
            continue
        q, qe = p + hs, p + hs + fs
        while q < qe:
            kind, _u, ehs, psize = struct.unpack_from("<HHIQ", data, q)
            if ehs == 0:
                break
            (arch,) = struct.unpack_from("<I", data, q + 28)
            (flags,) = struct.unpack_from("<Q", data, q + 40)
            yield tu, q, ehs, psize, kind, arch, flags
            q += ehs + psize
        p, tu = qe, tu + 1


def cubin_kernels(blob):
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(blob)
        f.flush()
        syms = subprocess.run(["readelf", "-sW", f.name], capture_output=True, text=True).stdout
    names = [l.split()[-1] for l in syms.splitlines() if " FUNC " in l]
    return subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True).stdout.splitlines()


FA3_PAT = re.compile(
    r"CollectiveMainloopFwdSm90<\d+, cute::tuple<cute::C<\d+>, cute::C<\d+>, cute::C<\d+> >, "
    r"cute::tuple<cute::C<(\d+)>, cute::C<(\d+)>, cute::C<(\d+)> >, (\d+), ([\w:]+),"
)


def fa3_signatures(kernels):
    """{(head_dim, head_dim_v, dtype)} of the FA3 forward kernels in one cubin; empty for helpers."""
    sigs = set()
    for k in kernels:
        if not k.startswith("void "):
            continue  # local helper symbols ($...), named after their kernel; the kernel itself decides
        m = FA3_PAT.search(k)
        if m:
            sigs.add((int(m.group(3)), int(m.group(4)), m.group(5).split("::")[-1]))
        elif "FlashAttnFwdSm90" in k or "FlashAttnBwdSm90" in k:
            sigs.add(("unparsed", k[:80]))
    return sigs


def prune(path, arch, fa3_keep=None, fa3_dtypes=None, scan=False):
    secs = fatbin_sections(path)
    if not secs:
        return None
    with open(path, "rb") as f:
        data = bytearray(f.read())
    ents = []
    for off, size in secs:
        ents += entries(data, off, size, tu=1 + max((e[0] for e in ents), default=-1))
    by_tu = collections.defaultdict(list)
    for e in ents:
        by_tu[e[0]].append(e)
    kept = collections.Counter()
    zeroed = collections.Counter()
    for tu, es in by_tu.items():
        # What the driver loads for this translation unit on the target arch: the cubin of that
        # arch if there is one (SASS is preferred to PTX), else the newest PTX not newer than it.
        own = [e for e in es if e[4] == 2 and e[5] == arch]
        ptx = [e[5] for e in es if e[4] == 1 and e[5] <= arch]
        best_ptx = max(ptx) if ptx else None
        for _tu, q, ehs, psize, kind, a, flags in es:
            name = KIND.get(kind, str(kind))
            if own:
                drop = not (kind == 2 and a == arch)
            else:
                drop = not (kind == 1 and a == best_ptx)
            if not drop and kind == 2 and fa3_keep is not None:
                sigs = fa3_signatures(cubin_kernels(bytes(data[q + ehs:q + ehs + psize])))
                if not any(s[0] == "unparsed" for s in sigs) and sigs and \
                        not any((s[0], s[1]) in fa3_keep and s[2] in fa3_dtypes for s in sigs):
                    drop = True
            key = (name, a)
            if drop:
                zeroed[key] += psize
                if not scan:
                    data[q + ehs:q + ehs + psize] = bytes(psize)
            else:
                kept[key] += psize
    if not scan:
        tmp = path + ".pruned"
        with open(tmp, "wb") as f:
            f.write(data)
        os.chmod(tmp, os.stat(path).st_mode)
        os.replace(tmp, path)
    mib = lambda c: sum(c.values()) / 2**20
    print(f"{os.path.basename(path)}: {len(ents)} entries in {len(by_tu)} TUs; kept {mib(kept):.1f} MiB "
          f"{dict((f'{k[0]}{k[1]}', round(v / 2**20, 1)) for k, v in sorted(kept.items()))}; "
          f"{'would zero' if scan else 'zeroed'} {mib(zeroed):.1f} MiB")
    return kept, zeroed


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("libs", nargs="+")
    ap.add_argument("--arch", type=int, default=90)
    ap.add_argument("--fa3-keep", default=None, help="e.g. 64:64,128:128 (head_dim:head_dim_v)")
    ap.add_argument("--fa3-dtypes", default="bfloat16_t,half_t")
    ap.add_argument("--scan", action="store_true")
    a = ap.parse_args()
    keep = None
    if a.fa3_keep:
        keep = {tuple(int(x) for x in kv.split(":")) for kv in a.fa3_keep.split(",")}
    for lib in a.libs:
        is_fa3 = os.path.basename(lib).startswith("_vllm_fa3_C")
        prune(lib, a.arch, keep if is_fa3 else None, set(a.fa3_dtypes.split(",")), a.scan)


if __name__ == "__main__":
    sys.exit(main())
