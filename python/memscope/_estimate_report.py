"""An estimate as the library's report model (memscope.Report): one output for the text the
command prints, the JSON it writes and the HTML page, rendered by the same renderers as every
other memscope report (src/report). Summary: the peaks and the fit; tables: what is live at the
last step's peak by category and by module, the attention backends; series: allocated and
reserved bytes after each event of the replay, with the steps as bands and the peak marked;
notes: what is modelled and what is not."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._memscope import (
    Report,
    ReportBand,
    ReportMarker,
    ReportSeries,
    ReportTable,
    format_bytes,
)

if TYPE_CHECKING:
    from ._estimate import Estimate


def _share_table(title: str, first: str, rows: list[tuple[str, int]], total: int,
                 note: str = "") -> ReportTable:
    total = max(1, total)
    return ReportTable(
        title=title, columns=[first, "bytes", "share"], numeric=[False, True, True],
        rows=[[name, format_bytes(n), f"{100 * n / total:.1f}%"] for name, n in rows if n],
        note=note)


def estimate_report(e: Estimate) -> Report:
    """The report of an estimate (Estimate.report())."""
    fit = "fits" if e.fits else "DOES NOT FIT (out of memory in the replay)"
    summary = [
        ("peak allocated (last step)", format_bytes(e.peak_allocated)),
        ("peak reserved", format_bytes(e.peak_reserved)
         + (f" (settings: {e.config})" if e.config else "")),
        ("capacity" if e.card is None else "the allocator's share",
         f"{format_bytes(e.capacity)}: {fit}"),
        ("captured", f"{e.ops:,} ops in {e.capture_seconds:.2f} s, replayed in "
                     f"{e.replay_seconds:.2f} s"),
    ]
    if e.card is not None:
        u = e.card
        left = (format_bytes(u.left) if u.left >= 0
                else f"short by {format_bytes(-u.left)}")
        summary += [
            ("card", f"{u.card}: {format_bytes(u.total)} usable"),
            ("outside the allocator", f"{format_bytes(u.outside)} (CUDA context "
                                      f"{format_bytes(u.context)}, cuBLAS handles "
                                      f"{format_bytes(u.cublas_handles)}, cuDNN handles "
                                      f"{format_bytes(u.cudnn_handles)})"),
            ("allocator reserved", format_bytes(u.reserved)),
            ("left on the card", left),
        ]
    if e.attention:
        calls = ", ".join(f"{n} on {b}" for b, n in sorted(e.attention.items()))
        summary.append(("attention", f"{calls} (as CUDA dispatches it on {e.device})"))
    tables = [_share_table("live at the last step's peak, by category", "category",
                           list(e.by_category.items()), e.peak_allocated)]
    if e.top_modules:
        tables.append(_share_table("by module", "module", e.top_modules, e.peak_allocated,
                                   note="forward allocations by module; others by phase"))
    notes = [
        f"modelled: storage sizes of every op; cuBLAS workspaces of "
        f"{format_bytes(e.workspace_bytes)} per thread; the attention backend CUDA picks, its "
        "saved tensors and backward buffers; the caching allocator's rounding, splitting and "
        "cache",
        "not modelled:\n" + "\n".join(f"  - {x}" for x in e.not_modeled),
    ]
    if e.card is not None:
        notes.append("the card's figures, and where they come from:\n" + "\n".join(
            f"  - {what}: {source}" for what, source in e.card.sources.items()))
    series = []
    if e.series:
        t = [float(i) for i in range(len(e.series))]
        series = [ReportSeries("allocated", t, [float(s[1]) for s in e.series], step=True),
                  ReportSeries("reserved", t, [float(s[0]) for s in e.series], step=True,
                               dashed=True)]
    bands = [ReportBand(f"step {i + 1}", float(b), float(max(b, end - 1)))
             for i, (b, end) in enumerate(e.step_bounds)]
    peak = (ReportMarker("allocated", float(e.peak_event), float(e.peak_allocated),
                         "peak allocated (last step)") if e.series else None)
    r = Report(title=f"memscope estimate: batch {e.batch}, {e.steps} steps",
               subtitle=f"{e.device}, capacity {format_bytes(e.capacity)}", summary=summary,
               tables=tables, notes=notes, series=series, bands=bands, peak=peak)
    r.x_label = "event of the replayed capture (allocation or free)"
    return r
