"""The PNG of measured versus predicted effort that a result folder holds (matplotlib, no
display needed)."""
from __future__ import annotations

from pathlib import Path

from ..util.atomic import atomic_write_bytes


def plot_efforts(path: str | Path, t, measured, predicted, joint_names, title: str, units=None) -> Path:
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
    axes[0, 0].legend(loc="upper right", fontsize=7, ncol=3)
    axes[-1, 0].set_xlabel("time [s]")
    fig.suptitle(title)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    return atomic_write_bytes(path, buf.getvalue())
