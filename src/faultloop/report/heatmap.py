"""The heatmap: one panel per analyzer, cells passing per fault type and node count."""

from __future__ import annotations

import math
from pathlib import Path

from faultloop.contracts import FR_PREFIX, ScoreRecord
from faultloop.report.model import groups, rate
from faultloop.score.tables import by_analyzer


def write_heatmap(rows: list[ScoreRecord], path: Path) -> None:
    """One panel per analyzer: cells passing (log analyzers: all four dimensions; FR analyzers: the
    exact rank) per fault type x node count; grey where no cell was scored. Sized from the pool's
    shape, so any number of fault types, node counts and analyzers stays readable."""
    import matplotlib  # imported on use: the workflow imports this module while planning

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    views = by_analyzer(rows) or {"builtin": []}
    everything = groups(rows)
    faults = list(dict.fromkeys(f for f, _ in everything)) or ["-"]
    nodes = sorted({n for _, n in everything}) or [0]
    columns = min(len(views), 3)
    lines = math.ceil(len(views) / columns)
    panel_w, panel_h = 1.2 + 0.8 * len(nodes), 0.9 + 0.36 * len(faults)
    fig, axes = plt.subplots(
        lines, columns, squeeze=False, layout="constrained", figsize=(1.6 + columns * panel_w, 0.8 + lines * panel_h)
    )
    cmap = matplotlib.colormaps["RdYlGn"].with_extremes(bad="lightgrey")
    image = None
    for ax, (name, own) in zip(axes.flat, views.items(), strict=False):
        grp = groups(own)
        values = [[rate(grp.get((f, n), []), lambda r: r.passed) for n in nodes] for f in faults]
        image = ax.imshow([[v.value for v in row] for row in values], cmap=cmap, vmin=0, vmax=1, aspect="auto")
        ax.set_xticks(range(len(nodes)), [f"{n} node{'s' if n != 1 else ''}" for n in nodes], fontsize=8)
        ax.set_yticks(range(len(faults)), faults if ax in axes[:, 0] else [], fontsize=8)
        for i, row in enumerate(values):
            for j, v in enumerate(row):
                dark = v.total and not 0.2 < v.value < 0.85  # the colour map's ends are dark
                ax.text(
                    j,
                    i,
                    f"{v.passed}/{v.total}" if v.total else "-",
                    ha="center",
                    va="center",
                    fontsize=7,
                    color="white" if dark else "black",
                )
        what = "FR names the injected rank" if name.startswith(FR_PREFIX) else "all four dimensions"
        ax.set_title(f"{name}\n{what}", fontsize=9)
    for ax in list(axes.flat)[len(views) :]:
        ax.set_visible(False)
    if image is not None:
        fig.colorbar(image, ax=axes, shrink=0.8, label="share of scored cells passing")
    fig.suptitle("Cells passing, per fault type and node count", fontsize=11)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    fig.savefig(tmp, format="png", dpi=100)
    plt.close(fig)
    tmp.replace(path)
