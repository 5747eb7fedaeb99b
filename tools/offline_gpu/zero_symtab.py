#!/usr/bin/env python3
"""Zero the static symbol table and debug sections of ELF files, in place, without moving a byte.

`.symtab`, `.strtab` and `.debug*` are not loaded (no SHF_ALLOC): the dynamic loader, dlsym,
dladdr and the CUDA runtime use `.dynsym`/`.dynstr` only.  They still take ~40 MiB of the offline
kit (C++ names compress poorly).  `strip` would rewrite the file layout, which is known to break
binaries that patchelf/auditwheel edited (nvidia-pytriton's, numpy's); overwriting the section
contents with zeros keeps every offset, so the files load exactly as before.  Only backtraces
lose their function names.

Usage: zero_symtab.py FILE_OR_DIR...   (non-ELF files are skipped)
"""
import os
import struct
import sys

SHF_ALLOC = 0x2


def zero(path):
    with open(path, "r+b") as f:
        head = f.read(64)
        if len(head) < 64 or head[:4] != b"\x7fELF" or head[4] != 2 or head[5] != 1:
            return 0  # not a 64-bit little-endian ELF
        e_shoff, = struct.unpack_from("<Q", head, 0x28)
        e_shentsize, e_shnum, e_shstrndx = struct.unpack_from("<HHH", head, 0x3A)
        if e_shoff == 0 or e_shnum == 0:
            return 0
        f.seek(e_shoff)
        shdrs = [struct.unpack("<IIQQQQIIQQ", f.read(e_shentsize)[:64]) for _ in range(e_shnum)]
        _n, _t, _fl, _a, str_off, str_size, *_ = shdrs[e_shstrndx]
        f.seek(str_off)
        names = f.read(str_size)
        total = 0
        for i, (name, typ, flags, _addr, off, size, *_r) in enumerate(shdrs):
            if i == e_shstrndx or flags & SHF_ALLOC or typ == 8 or size == 0:  # 8: SHT_NOBITS
                continue
            n = names[name:names.index(b"\0", name)].decode()
            if n in (".symtab", ".strtab") or n.startswith(".debug"):
                f.seek(off)
                f.write(bytes(size))
                total += size
        return total


def main(args):
    total = 0
    for a in args:
        paths = [a] if os.path.isfile(a) else [os.path.join(d, x) for d, _, fs in os.walk(a) for x in fs]
        for p in paths:
            if os.path.isfile(p) and not os.path.islink(p):
                total += zero(p)
    print(f"zero_symtab: zeroed {total / 2**20:.1f} MiB of .symtab/.strtab/.debug* in {' '.join(args)}")


if __name__ == "__main__":
    main(sys.argv[1:])
