"""Traces from Python: record a workload, import another tool's output, read one.

    tierkit.trace.record("gups", "gups.tktrace", set={"workload.footprint_mib": 64})
    tierkit.trace.import_("lackey", "prog.lackey", "prog.tktrace")
    for chunk in tierkit.trace.read("prog.tktrace"):      # NumPy arrays, chunk by chunk
        chunk["addr"], chunk["write"], chunk["gap_ns"]
    a = tierkit.trace.read_all("prog.tktrace")            # one array

The files are tierkit's native trace format (docs/traces.md), the same the CLI's
`tierkit trace` commands write and `--workload trace:PATH` replays.
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, Iterator, Mapping, Optional, Union

import numpy as np

from . import _native, _sets

PathLike = Union[str, "os.PathLike[str]"]

#: The fields of an access array: the process and thread (indices in the trace), the
#: virtual address, whether it is a store, and the compute time before it in ns.
ACCESS_DTYPE = np.dtype(
    [("process", "<u4"), ("thread", "<u4"), ("addr", "<u8"), ("write", "?"), ("gap_ns", "<u4")]
)

__all__ = ["ACCESS_DTYPE", "record", "import_", "read", "read_all"]


def record(
    workload: str,
    out: PathLike,
    set: Optional[Mapping[str, Any]] = None,
    seed: Optional[int] = None,
    force: bool = False,
) -> Dict[str, int]:
    """Record workload ``workload`` (``set`` as ``--set workload.KEY=VALUE``) into
    the trace file ``out``, as ``tierkit trace record``; an existing ``out`` is
    refused unless ``force``. Returns the counts written."""
    a, ops, chunks, size = _native.trace_record(
        workload, os.fspath(out), sets=_sets(set), seed=seed, force=force
    )
    return {"accesses": a, "records": ops, "chunks": chunks, "file_bytes": size}


def import_(
    format: str,
    input: PathLike,
    out: PathLike,
    mlp: Optional[float] = None,
    ns_per_instruction: Optional[float] = None,
    keep_l1_hits: bool = False,
    force: bool = False,
) -> Dict[str, int]:
    """Import ``input`` (``format``: lackey, perf, damo or text) into the trace file
    ``out``, as ``tierkit trace import``. Returns the import's counts."""
    return json.loads(
        _native.trace_import(
            format, os.fspath(input), os.fspath(out), mlp=mlp,
            ns_per_instruction=ns_per_instruction, keep_l1_hits=keep_l1_hits, force=force,
        )
    )


def read(path: PathLike, chunk: int = 1 << 20) -> Iterator[np.ndarray]:
    """The accesses of a trace, thread after thread, as arrays of at most ``chunk``
    accesses with fields :data:`ACCESS_DTYPE`. Mappings are not accesses and are
    left out. Memory use stays at one chunk however long the trace."""
    for p, t, addrs, writes, gaps in _native.TraceReader(os.fspath(path), chunk):
        n = len(writes)
        a = np.empty(n, dtype=ACCESS_DTYPE)
        a["process"] = p
        a["thread"] = t
        a["addr"] = np.frombuffer(addrs, dtype="<u8")
        a["write"] = np.frombuffer(writes, dtype="u1").astype(bool)
        a["gap_ns"] = np.frombuffer(gaps, dtype="<u4")
        yield a


def read_all(path: PathLike) -> np.ndarray:
    """Every access of a trace in one array (see :func:`read`)."""
    parts = list(read(path))
    return np.concatenate(parts) if parts else np.empty(0, dtype=ACCESS_DTYPE)
