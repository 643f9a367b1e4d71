"""The PNG of measured versus predicted effort that a result folder holds (matplotlib, no
display needed)."""
from __future__ import annotations

from pathlib import Path

from ..util.atomic import atomic_write_bytes


def plot_efforts(path: str | Path, t, measured, predicted, joint_names, title: str, units=None,
                 held_out=()) -> Path:
    """One panel per joint: measured, predicted and their difference over time; `held_out`:
    (start, end) time spans shaded as the part held out of the identification."""
    import io

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = len(joint_names)
    fig, axes = plt.subplots(n, 1, figsize=(10, 1.8 * n + 0.8), sharex=True, squeeze=False)
    for k, ax in enumerate(axes[:, 0]):
        ax.plot(t, measured[:, k], lw=0.6, color="0.55", label="measured")
        ax.plot(t, predicted[:, k], lw=1.0, color="C0", label="predicted")
        ax.plot(t, measured[:, k] - predicted[:, k], lw=0.6, color="C3", label="error")
        unit = units[k] if units else "N·m"
        ax.set_ylabel(f"{joint_names[k]}\n[{unit}]", fontsize=8)
        ax.grid(alpha=0.3)
        for a, b in held_out:
            ax.axvspan(a, b, color="gold", alpha=0.25, lw=0, label="held out" if a == held_out[0][0] else None)
    axes[0, 0].legend(loc="upper right", fontsize=7, ncol=4)
    axes[-1, 0].set_xlabel("time [s]")
    fig.suptitle(title)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    return atomic_write_bytes(path, buf.getvalue())


def combined_with_holdout(t, measured, predicted, t_held, measured_held, predicted_held):
    """(t, measured, predicted, held-out spans) of the identification and held-out samples of
    one recording on one time axis, or None when the held-out samples fall inside runs of
    identification samples (several inputs or segments whose times restart: no single time
    axis shows them apart)."""
    import numpy as np
    t, th = np.asarray(t, float), np.asarray(t_held, float)
    if t.size < 2 or th.size == 0:
        return None
    ts, hs = np.sort(t), np.sort(th)
    step = float(np.median(np.diff(ts)))
    k = np.clip(np.searchsorted(ts, hs), 1, ts.size - 1)
    inside = (ts[k] - ts[k - 1] <= 1.5 * step) & (hs > ts[0]) & (hs < ts[-1])
    if inside.mean() > 0.05:
        return None
    cut = np.flatnonzero(np.diff(hs) > 3 * max(float(np.median(np.diff(hs))) if hs.size > 1 else step, step))
    spans = list(zip(np.concatenate([[hs[0]], hs[cut + 1]]).tolist(), np.concatenate([hs[cut], [hs[-1]]]).tolist()))
    allt = np.concatenate([t, th])
    idx = np.argsort(allt, kind="stable")
    return (allt[idx], np.concatenate([measured, measured_held])[idx],
            np.concatenate([predicted, predicted_held])[idx], spans)
