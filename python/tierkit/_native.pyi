"""Type stubs of the native module (see python/src/lib.rs)."""

from typing import Any, Dict, List, Optional, Tuple

__version__: str

def sim(
    policy: Optional[str] = None,
    workload: Optional[str] = None,
    machine: Optional[str] = None,
    ratio: Optional[str] = None,
    seed: Optional[int] = None,
    sets: List[str] = ...,
    config: Optional[str] = None,
    out: Optional[str] = None,
    force: bool = False,
) -> Tuple[str, str, str, str, str]: ...
def compare(
    out: str,
    matrix: Dict[str, Any],
    jobs: Optional[int] = None,
    force: bool = False,
    only_finished: bool = False,
) -> Tuple[str, str, str]: ...
def catalog(section: str) -> str: ...
def plan_matrix(out: str, matrix: Dict[str, Any]) -> str: ...
def run_one(id: str, matrix: Dict[str, Any]) -> List[Tuple[str, bytes]]: ...
def prepare_out_dir(out: str, force: bool) -> None: ...
def trace_record(
    workload: str, out: str, sets: List[str] = ..., seed: Optional[int] = None, force: bool = False
) -> Tuple[int, int, int, int]: ...
def trace_import(
    format: str,
    input: str,
    out: str,
    mlp: Optional[float] = None,
    ns_per_instruction: Optional[float] = None,
    keep_l1_hits: bool = False,
    force: bool = False,
) -> str: ...

class TraceReader:
    def __init__(self, path: str, chunk: int = ...) -> None: ...
    def __iter__(self) -> "TraceReader": ...
    def __next__(self) -> Tuple[int, int, bytes, bytes, bytes]: ...
