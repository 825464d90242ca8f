"""``python -m tierkit compare-json KWARGS``: what ``tierkit compare --executor ray``
runs. KWARGS is a JSON object of :func:`tierkit.compare` arguments (``sets`` as
``KEY=VALUE`` strings, as on the command line). Prints the leaderboard and the
report path as the CLI does; exit 1 when runs failed, 2 for a bad request."""

from __future__ import annotations

import json
import sys

from . import CompareFailed, _RawToml, compare


def main(argv: list) -> int:
    if len(argv) != 2 or argv[0] != "compare-json":
        print("usage: python -m tierkit compare-json '{\"matrix\": \"quick\", ...}'", file=sys.stderr)
        return 2
    kw = json.loads(argv[1])
    sets = kw.pop("sets", None) or []
    bad = [x for x in sets if "=" not in x]
    if bad:
        print(f"tierkit: --set `{bad[0]}`: expected KEY=VALUE", file=sys.stderr)
        return 2
    try:
        df = compare(
            kw.pop("matrix", None),
            set={k: _RawToml(v) for k, v in (s.split("=", 1) for s in sets)},
            executor="ray",
            **{k: v for k, v in kw.items() if v is not None},
        )
    except CompareFailed as e:
        print(f"tierkit: {e}", file=sys.stderr)
        return 1
    except ValueError as e:
        print(f"tierkit: {e}", file=sys.stderr)
        return 2
    print(df.attrs["leaderboard"], end="")
    print(f"report: {df.attrs['report']}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
