"""`triage bench --plot`: TTFT against input length, flagged requests marked, the ceiling drawn.

matplotlib (the `plot` extra) with the Agg backend: no display needed.
"""

from __future__ import annotations

from pathlib import Path

from triage.benchmarks.model import Finding, Point

PLOT_NAME = "triage_bench_ttft.png"


def plot(points: list[Point], findings: list[Finding], ceiling_tps: float, path: Path) -> Path:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise RuntimeError("--plot needs matplotlib (pip install 'triage[plot]')") from exc

    flagged: dict[tuple[str, int], list[str]] = {}
    for f in findings:
        if f.row is not None and f.invalid:
            flagged.setdefault((f.point, f.row), []).append(f.check)

    fig, ax = plt.subplots(figsize=(9, 6), dpi=110)
    xs_all: list[float] = []
    ys_all: list[float] = []
    markers = "osD^v<>ph*"
    # no red in the palette: red is for flagged rows
    colors = (
        "#1f77b4",
        "#ff7f0e",
        "#2ca02c",
        "#9467bd",
        "#8c564b",
        "#e377c2",
        "#7f7f7f",
        "#bcbd22",
        "#17becf",
    )
    for i, p in enumerate(points):
        ok = [
            (float(r.input_len), float(r.ttft_s))
            for r in p.successes
            if r.input_len and r.ttft_s and (p.label, r.index) not in flagged
        ]
        if ok:
            ax.scatter(
                [x for x, _ in ok],
                [y for _, y in ok],
                s=36,
                alpha=0.8,
                marker=markers[i % len(markers)],
                color=colors[i % len(colors)],
                label=f"{p.label} ({len(ok)} valid)",
            )
        xs_all += [x for x, _ in ok]
        ys_all += [y for _, y in ok]
    bad = [
        (float(r.input_len), float(r.ttft_s), flagged[(p.label, r.index)], p.label, r.index)
        for p in points
        for r in p.successes
        if r.input_len and r.ttft_s and (p.label, r.index) in flagged
    ]
    if bad:
        ax.scatter(
            [b[0] for b in bad],
            [b[1] for b in bad],
            s=110,
            marker="x",
            linewidths=2.2,
            color="#d62728",
            zorder=5,
            label=f"flagged ({len(bad)}): see the ledger",
        )
        # one label per point: its flagged rows and their reasons
        groups: dict[str, list[tuple[float, float, list[str], int]]] = {}
        for x, y, checks, label, row in bad:
            groups.setdefault(label, []).append((x, y, checks, row))
        for k, (label, items) in enumerate(list(groups.items())[:20]):
            rows = ",".join(str(it[3]) for it in items[:8]) + ("..." if len(items) > 8 else "")
            reasons = sorted({c for it in items for c in it[2]})
            x, y = items[0][0], min(it[1] for it in items)
            ax.annotate(
                f"{label} rows {rows}: {', '.join(reasons)}",
                (x, y),
                textcoords="offset points",
                xytext=(-14, -18 - 11 * k),
                ha="right",
                fontsize=7,
                arrowprops={"arrowstyle": "-", "color": "#d62728", "lw": 0.6},
                color="#d62728",
            )
        xs_all += [b[0] for b in bad]
        ys_all += [b[1] for b in bad]
    if xs_all:
        lo, hi = min(xs_all) / 1.5, max(xs_all) * 1.5
        ax.plot(
            [lo, hi],
            [lo / ceiling_tps, hi / ceiling_tps],
            "--",
            color="black",
            linewidth=1.3,
            label=f"ceiling: {ceiling_tps:,.0f} tok/s uncached prefill",
        )
        ax.fill_between(
            [lo, hi],
            [min([*ys_all, lo / ceiling_tps]) / 3] * 2,
            [lo / ceiling_tps, hi / ceiling_tps],
            color="#d62728",
            alpha=0.07,
            label="faster than the ceiling: likely cache hits",
        )
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(lo, hi)
    ax.set_xlabel("input length (tokens)")
    ax.set_ylabel("time to first token (s)")
    ax.set_title("TTFT vs input length: rows below the dashed line prefilled impossibly fast")
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path
