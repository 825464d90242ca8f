#!/usr/bin/env python3
"""The hottest 4 KiB pages of a native tierkit trace (docs/traces.md, version 1).

Usage: trace-hot-pages.py TRACE [TOP]

Prints the trace's access count and mappings, the TOP (default 20) most accessed
pages with the mapping each lies in and its share of all accesses, the share of
the hottest 1, 4, 16, 64 and 256 pages, and each mapping's first 2 MiB regions'
shares of the accesses to its other pages. Pure Python: a few million accesses a
minute, so record a small instance (`tierkit trace record --workload W --set ...`).
"""
import collections
import struct
import sys
import zlib

# Pages with at least this share of all accesses are left out of the per-region
# shares (the pages `sim.time_sampled_weight = 0.032` samples in time at 1/16).
HOT_SHARE = 0.002


def varint(b, i):
    r = s = 0
    while True:
        x = b[i]
        i += 1
        r |= (x & 0x7F) << s
        s += 7
        if x < 0x80:
            return r, i


def chunks(d):
    """(offset, stored_len) of every chunk, and whether chunks are zlib streams."""
    if d[:8] != b"TIERKTRC" or struct.unpack_from("<I", d, 8)[0] != 1:
        sys.exit("not a native tierkit trace of version 1")
    flags = struct.unpack_from("<I", d, 12)[0]
    q = struct.unpack_from("<Q", d, 16)[0] + 8 + 8  # directory magic, footprint
    nr_processes = struct.unpack_from("<I", d, q)[0]
    q += 4
    for _ in range(nr_processes):
        q += 4 + 8
        q += 2 + struct.unpack_from("<H", d, q)[0]
    q += 4 + struct.unpack_from("<I", d, q)[0]
    n = struct.unpack_from("<Q", d, q)[0]
    q += 8
    out = []
    for k in range(n):
        off, _proc, _thread, _ops, _acc, _raw, stored = struct.unpack_from("<QIIIIII", d, q + 32 * k)
        out.append((off, stored))
    return out, bool(flags & 1)


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    top = int(sys.argv[2]) if len(sys.argv) == 3 else 20
    d = open(sys.argv[1], "rb").read()
    table, zipped = chunks(d)
    pages = collections.Counter()
    maps = []
    total = 0
    for off, stored in table:
        raw = d[off : off + stored]
        if zipped:
            raw = zlib.decompress(raw)
        i = addr = 0
        while i < len(raw):
            tag = raw[i]
            i += 1
            kind = tag & 3
            if kind < 2:
                if tag & 4:
                    _, i = varint(raw, i)
                if tag & 8:
                    z, i = varint(raw, i)
                    addr = (addr + ((z >> 1) ^ -(z & 1))) & (2**64 - 1)
                pages[addr >> 12] += 1
                total += 1
            else:
                a, i = varint(raw, i)
                n, i = varint(raw, i)
                if kind == 2:
                    maps.append((a, n))
    print(f"{total} accesses; mappings (index: start, MiB): "
          + ", ".join(f"{k}: {a:#x}, {n / 2**20:g}" for k, (a, n) in enumerate(maps)))
    print("| page | mapping | accesses | share |\n|---|---:|---:|---:|")
    for p, c in pages.most_common(top):
        m = next((k for k, (a, n) in enumerate(maps) if a <= p << 12 < a + n), "-")
        print(f"| {p << 12:#x} | {m} | {c} | {100 * c / total:.2f}% |")
    counts = sorted(pages.values(), reverse=True)
    print("hottest pages' share: " + ", ".join(
        f"{k}: {100 * sum(counts[:k]) / total:.1f}%" for k in (1, 4, 16, 64, 256)))
    # How evenly each mapping's 2 MiB regions share the rest: what a sample by region
    # keeps or drops whole (the pages a sampled run would sample in time left out).
    hot = {p for p, c in pages.items() if c >= HOT_SHARE * total}
    print(f"2 MiB regions of each mapping, pages of {100 * HOT_SHARE:g}% or more "
          f"({len(hot)}, {100 * sum(pages[p] for p in hot) / total:.1f}%) left out:")
    for k, (a, n) in enumerate(maps):
        regions = collections.Counter()
        for p, c in pages.items():
            if a <= p << 12 < a + n and p not in hot:
                regions[((p << 12) - a) >> 21] += c
        shares = [100 * regions[r] / total for r in range(-(-n >> 21))]
        print(f"  {k}: {len(shares)} regions, {sum(shares):.2f}% of all accesses; "
              f"first six: " + ", ".join(f"{x:.2f}%" for x in shares[:6]))


if __name__ == "__main__":
    main()
