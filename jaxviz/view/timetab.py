"""The time tab's payload: a ProfileReport (jaxviz.profile) as the JSON the view reads
(`payload.profile`; js/src/graph/timetab.js draws it, jaxviz/schema.py declares it).

    >>> from jaxviz.profile.report import ProfileReport
    >>> empty = ProfileReport("f", "cpu", "cpu", 0.0, 0, (), (), (), (), None, 1.0, 0)
    >>> profile_entry(empty)["lines"]
    []
"""

from __future__ import annotations

import dataclasses
from typing import Any, cast

from jaxviz.schema import (
    ProfileCompile,
    ProfileEntry,
    ProfileKernel,
    ProfileLine,
    ProfileModule,
    ProfileTimeline,
)

MAX_LINES = 60  # lines the tab lists (the rest summed in `rest_us`)
MAX_KERNELS = 20


def profile_entry(r: Any) -> ProfileEntry:
    """The report as plain JSON: lines, kernels, modules, compiles, timeline, text twin."""
    lines = [dataclasses.asdict(x) for x in r.lines[:MAX_LINES]]
    for x in lines:  # tuples -> lists for JSON
        for k in ("kernels", "prims", "node_ids"):
            x[k] = list(x[k])
    kernels = []
    for k in r.kernels[:MAX_KERNELS]:
        d = dataclasses.asdict(k)
        d["lines"] = [[label, frac] for label, frac in k.lines]
        d["prims"] = list(k.prims)
        kernels.append(d)
    return {
        "name": r.name,
        "platform": r.platform,
        "device": r.device,
        "total_us": r.total_us,
        "steps": r.steps,
        "attributed_share": r.attributed_share,
        "events": r.events,
        "lines": cast(list[ProfileLine], lines),
        "rest_us": sum(x.us for x in r.lines[MAX_LINES:]),
        "kernels": cast(list[ProfileKernel], kernels),
        "modules": cast(list[ProfileModule], [dataclasses.asdict(m) for m in r.modules]),
        "compiles": cast(
            list[ProfileCompile],
            [dict(dataclasses.asdict(c), total_s=c.total_s) for c in r.compiles[:20]],
        ),
        "timeline": cast(
            ProfileTimeline | None,
            dict(dataclasses.asdict(r.timeline), spans=[list(s) for s in r.timeline.spans])
            if r.timeline is not None
            else None,
        ),
        # each node's device time per step, by trace: the graph's "colour: device time"
        "node_us": {
            t: {k: us / max(r.steps, 1) for k, us in per.items()} for t, per in r.node_us.items()
        },
        "notes": list(r.notes),
        # what the lines' per-step figures add up to: the step's calls and the rest
        "step_note": r.step.sentence() if r.step is not None else "",
        # jaxviz's own NaN check, in none of the times above (the tab says it apart)
        "nan_check_us": r.nan_check_us,
        "nan_check_calls": r.nan_check_calls,
        "nan_check_compile_s": r.nan_check_compile_s,
        "text": str(r),
    }
