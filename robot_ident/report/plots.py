"""matplotlib drawings of the report's figures (numbers from report/figures.py); each
returns PNG bytes. No display needed (Agg)."""
from __future__ import annotations

import io
import math

import numpy as np

from .figures import velocity_unit

DPI = 90


def _plt():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI)
    _plt().close(fig)
    return buf.getvalue()


def _grid(n: int, ncols: int, w: float, h: float):
    plt = _plt()
    ncols = min(ncols, max(n, 1))
    nrows = -(-n // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(w * ncols, h * nrows + 0.6), squeeze=False)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, axes.flat


def friction_figure(fits, worst: str | None) -> bytes:
    """Per joint: measured effort minus the rigid-body part against velocity, the identified
    Coulomb + viscous curve, and the binned mean of what the curve leaves."""
    fig, axes = _grid(len(fits), 3, 4.3, 3.1)
    for ax, f in zip(axes, fits):
        ax.scatter(f.qd[~f.moving], f.friction_effort[~f.moving], s=2, color="0.8", label="dead band (not fitted)")
        ax.scatter(f.qd[f.moving], f.friction_effort[f.moving], s=2, color="C0", alpha=0.35, label="samples")
        ax.plot(f.curve_qd, f.curve, color="C3", lw=1.6,
                label=f"Fc tanh(qd/s) + Fv qd\nFc={f.coulomb:.3g}, Fv={f.viscous:.3g}")
        if f.bin_centres.size:
            at = np.interp(f.bin_centres, f.curve_qd, f.curve)
            ax.plot(f.bin_centres, at + f.bin_means, "k.", ms=5, label="binned mean")
        bad = f.joint == worst
        tag = ("  (worst)" if not f.within_noise else "  (largest, within noise)") if bad else ""
        ax.set_title(f"{f.joint}: misfit {f.misfit_percent:.1f} %" + tag
                     + ("" if f.within_noise else "  > noise"), fontsize=9, color="C3" if bad else "k",
                     fontweight="bold" if bad else "normal")
        ax.set_xlabel(f"velocity [{velocity_unit(f.unit)}]", fontsize=8)
        ax.set_ylabel(f"effort − rigid body [{f.unit}]", fontsize=8)
        ax.grid(alpha=0.3)
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=6, loc="upper left", markerscale=3)
    fig.suptitle("Friction fit: measured effort minus the identified rigid-body part (inertia, gravity, "
                 "armature, offset)\nmisfit = RMS of the binned means / RMS of the friction effort", fontsize=10)
    fig.tight_layout()
    return _png(fig)


def error_histogram_figure(hists, title: str) -> bytes:
    fig, axes = _grid(len(hists), 3, 4.3, 2.8)
    for ax, h in zip(axes, hists):
        ax.stairs(h.counts, h.edges, fill=True, alpha=0.5, color="C0", label=f"error, RMS {h.rms:.3g} {h.unit}")
        if h.noise_std:
            c = 0.5 * (h.edges[:-1] + h.edges[1:])
            ax.plot(c, h.expected, "C3--", lw=1.4, label=f"noise only, std {h.noise_std:.3g} {h.unit}")
            for s in (-h.noise_std, h.noise_std):
                ax.axvline(s, color="C3", lw=0.6, alpha=0.6)
        ratio = f"  RMS/noise {h.ratio:.2f}" if h.ratio else ""
        ax.set_title(f"{h.joint}{ratio}", fontsize=9, color="C3" if h.ratio and h.ratio > 1.5 else "k")
        ax.set_xlabel(f"measured − predicted [{h.unit}]", fontsize=8)
        ax.set_ylabel("samples", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=6, loc="upper left")
        ax.grid(alpha=0.3)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return _png(fig)


def relative_std_figure(chart, names_full=None) -> bytes:
    plt = _plt()
    n = len(chart.labels)
    fig, ax = plt.subplots(figsize=(9.5, 0.17 * n + 1.6))
    r = chart.relative_std
    finite = r[np.isfinite(r)]
    cap = max(float(finite.max()) * 3 if finite.size else 1e3, chart.undetermined * 3)
    shown = np.where(np.isfinite(r), np.maximum(r, 1e-4), cap)
    colors = ["C3" if not v < chart.undetermined else "C1" if not v < chart.threshold else "C2" for v in r]
    y = np.arange(n)
    ax.barh(y, shown, color=colors)
    ax.set_xscale("log")
    ax.set_yticks(y)
    ax.set_yticklabels(chart.labels, fontsize=6.5)
    for k in range(min(3, n)):
        ax.get_yticklabels()[k].set_color("C3")
        ax.get_yticklabels()[k].set_fontweight("bold")
        txt = "inf" if not math.isfinite(r[k]) else f"{r[k]:.3g} %"
        ax.text(shown[k], k, f"  {txt}", va="center", fontsize=7, color="C3")
    ax.invert_yaxis()
    ax.axvline(chart.threshold, color="k", ls="--", lw=1)
    ax.axvline(chart.undetermined, color="C3", ls=":", lw=1)
    ax.text(chart.threshold, -1.2, f" well determined < {chart.threshold:g} %", fontsize=7)
    ax.text(chart.undetermined, -1.2, f" std > value ({chart.undetermined:g} %)", fontsize=7, color="C3")
    ax.set_xlabel("relative standard deviation [%] (log scale)")
    ax.set_title(f"Base parameters, least determined first: {chart.n_well} of {n} well determined "
                 f"(< {chart.threshold:g} %), {chart.n_undetermined} with std > value", fontsize=10)
    ax.grid(axis="x", alpha=0.3, which="both")
    fig.tight_layout()
    return _png(fig)


def _hatch(bars, determined):
    for bar, ok in zip(bars, determined):
        if ok is False:
            bar.set_hatch("///")
            bar.set_alpha(0.55)


def bodies_figure(comps) -> bytes:
    """CAD vs identified per body; hatched: a quantity the data do not fix by itself (the
    estimator's choice)."""
    plt = _plt()
    names = [c.body for c in comps]
    x = np.arange(len(comps))
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.0))
    det = lambda key: [None if c.determined is None else c.determined[key] for c in comps]
    m = np.array([c.mass for c in comps])
    ax = axes[0]
    ax.bar(x - 0.2, m[:, 0], 0.4, color="0.6", label="CAD")
    _hatch(ax.bar(x + 0.2, m[:, 1], 0.4, color="C0", label="identified"), det("mass"))
    for k, c in enumerate(comps):
        ax.text(k + 0.2, max(m[k]), f"{c.mass_change_percent:+.1f} %", ha="center", va="bottom", fontsize=7)
    ax.set_ylabel("mass [kg]")
    ax.set_title("Mass: CAD vs identified", fontsize=10)
    ax.legend(fontsize=7)
    ax = axes[1]
    shift = np.array([c.com_shift_mm for c in comps])
    _hatch(ax.bar(x, np.nan_to_num(shift), color="C0"), det("com"))
    for k, s in enumerate(shift):
        ax.text(k, 0 if not math.isfinite(s) else s, "n/a" if not math.isfinite(s) else f"{s:.1f}",
                ha="center", va="bottom", fontsize=7)
    ax.set_ylabel("centre-of-mass shift [mm]")
    ax.set_title("Centre of mass: |identified − CAD|", fontsize=10)
    ax = axes[2]
    pcs = np.array([c.principal_change_percent for c in comps])
    for i in range(3):
        _hatch(ax.bar(x + (i - 1) * 0.27, np.nan_to_num(pcs[:, i]), 0.27, color=f"C{i}",
                      label=f"I{i + 1} (ascending)"), det("inertia"))
    ax.axhline(0, color="k", lw=0.6)
    ax.set_yscale("symlog", linthresh=10)
    ax.set_ylabel("change from CAD [%] (symlog)")
    ax.set_title("Principal inertias about the centre of mass", fontsize=10)
    ax.legend(fontsize=7)
    _body_ticks(axes, names, [c.bounds_active for c in comps])
    notes = []
    if any(c.determined and not all(c.determined.values()) for c in comps):
        notes.append("hatched: not fixed by the data by itself (regrouped or unseen): the estimator's choice, "
                     "not a measurement")
    if any(c.bounds_active for c in comps):
        notes.append("red body name: a physical bound is active")
    if notes:
        fig.text(0.01, 0.005, ";  ".join(notes), fontsize=8, color="C3")
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    return _png(fig)


def _body_ticks(axes, names, bounds):
    x = np.arange(len(names))
    for ax in axes:
        ax.set_xticks(x)
        ax.set_xticklabels(names, rotation=30, ha="right", fontsize=8)
        ax.grid(axis="y", alpha=0.3)
        for k, b in enumerate(bounds):
            if b:
                ax.get_xticklabels()[k].set_color("C3")


def base_changes_figure(base_changes: dict) -> bytes:
    """Per body, its base parameters (those led by one of its standard parameters) against
    the CAD's: what the data do fix."""
    plt = _plt()
    names = list(base_changes)
    fig, ax = plt.subplots(figsize=(9, 3.6))
    labelled = set()
    for k, b in enumerate(names):
        pts = [p for p in base_changes[b] if math.isfinite(p[1])]
        xs = k + (np.linspace(-0.25, 0.25, len(pts)) if len(pts) > 1 else np.zeros(len(pts)))
        for xx, (_, change, good) in zip(xs, pts):
            lab = "well determined" if good else "poorly determined"
            ax.plot(xx, change, "o", color="C0" if good else "0.5", mfc="C0" if good else "none", ms=5 if good else 4,
                    label=None if lab in labelled else lab)
            labelled.add(lab)
    ax.axhline(0, color="k", lw=0.6)
    ax.set_ylim(-205, 205)
    ax.set_ylabel("change from CAD [%]\n100 (id − CAD) / max(|id|, |CAD|)", fontsize=8)
    ax.set_title("What the data fix: each body's base parameters against the CAD's", fontsize=10)
    if labelled:
        ax.legend(fontsize=7)
    _body_ticks([ax], names, [None] * len(names))
    fig.tight_layout()
    return _png(fig)


def coverage_figure(covs, condition_number) -> bytes:
    plt = _plt()
    n = len(covs)
    fig, axes = plt.subplots(n, 2, figsize=(11, 1.45 * n + 1.0), squeeze=False)
    for k, c in enumerate(covs):
        for ax, edges, counts, lims, what, unit in (
                (axes[k, 0], c.position_edges, c.position_counts, (c.lower, c.upper), "position", c.unit),
                (axes[k, 1], c.velocity_edges, c.velocity_counts, (-c.velocity_limit, c.velocity_limit),
                 "velocity", c.unit + "/s")):
            ax.stairs(counts, edges, fill=True, color="C0", alpha=0.7)
            for v in lims:
                if math.isfinite(v):
                    ax.axvline(v, color="C3", lw=1.2)
            pct = c.range_used_percent if what == "position" else c.peak_velocity_percent
            tag = ("range used" if what == "position" else "peak |qd|") + (
                f" {pct:.0f} % of limit" if math.isfinite(pct) else " (no limit)")
            ax.set_ylabel(f"{c.joint}\nsamples", fontsize=7)
            ax.text(0.01, 0.85, tag, transform=ax.transAxes, fontsize=7)
            ax.tick_params(labelsize=7)
            if k == n - 1:
                ax.set_xlabel(f"{what} [{unit}] (red: URDF limits)", fontsize=8)
    fig.suptitle(f"Joint-space coverage of the identification data; condition number {condition_number}",
                 fontsize=10)
    fig.tight_layout()
    return _png(fig)


def validation_rms_figure(joints, units, series: dict) -> bytes:
    """Validation RMS per joint, one bar per result (for --compare); series: label -> (n,) RMS."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(9, 3.2))
    x = np.arange(len(joints))
    w = 0.8 / max(len(series), 1)
    for i, (label, rms) in enumerate(series.items()):
        ax.bar(x + (i - (len(series) - 1) / 2) * w, rms, w, label=label)
    ax.set_yscale("log")
    ax.set_xticks(x)
    ax.set_xticklabels([f"{j} [{u}]" for j, u in zip(joints, units)], rotation=20, ha="right", fontsize=8)
    ax.set_ylabel("validation RMS (unit per joint)")
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return _png(fig)

