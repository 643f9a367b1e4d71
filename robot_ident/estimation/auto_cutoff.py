"""The low-pass cutoff chosen from the data, when the configuration does not set it.

The cutoff trades two errors: too low and the filter removes effort content the
model must explain (fast accelerations, the drive's reaction to friction steps);
too high and the noise of the twice-differentiated positions enters the regressor
(``qdd`` noise grows with f^2). Where the balance lies depends on the robot, its
sensors and its controller -- 20 Hz was right for one arm and 10 Hz for another.

`choose_cutoff` decides it by cross-validation on the identification data itself:
for each candidate cutoff the recordings are processed, an ordinary least-squares model is
identified from 4 of every 5 blocks of ``block_s`` seconds (shorter when the data
are short: at least 10 blocks), and the RMS against the
*raw* measured effort is taken on the 5th blocks. All candidates are scored on the
same samples (the dead band of the lowest candidate, which is the widest), so a
longer reversal guard cannot flatter a low cutoff. The score is the mean over joints
of log RMS (every joint counts equally, whatever its effort scale); the lowest wins.
The held-out validation data take no part in the choice.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np

from ..data.signals import FilterOptions, ProcessedData, Recording, concatenate, process
from ..errors import IdentificationError, SignalError

CANDIDATES_HZ = (4.0, 6.0, 8.0, 10.0, 13.0, 16.0, 20.0, 25.0, 32.0)


@dataclass
class CutoffChoice:
    cutoff_hz: float
    candidates: tuple[float, ...]
    scores: tuple[float, ...]        # mean over joints of log RMS, per candidate
    rms: tuple[np.ndarray, ...]      # per candidate, (n,) cross-validated RMS per joint

    def summary(self) -> str:
        best = self.candidates.index(self.cutoff_hz)
        ref = self.rms[best]
        parts = [f"{c:g} Hz x{float(np.exp(s - self.scores[best])):.3f}"
                 for c, s in zip(self.candidates, self.scores)]
        return (f"filter cutoff {self.cutoff_hz:g} Hz chosen from the data (cross-validated RMS relative to "
                f"the best, geometric mean over joints: {', '.join(parts)}; best RMS per joint "
                + ", ".join(f"{v:.4g}" for v in ref) + ")")


def decimated_rate(fs: float, opt: FilterOptions) -> float:
    """The processed samples' rate of a recording at `fs` Hz (`signals.process`'s decimation)."""
    if opt.target_rate_hz is not None and opt.target_rate_hz < fs:
        return fs / max(1, int(round(fs / opt.target_rate_hz)))
    return fs


def choose_cutoff(model, recordings: Sequence[Recording], settings, candidates: Sequence[float] | None = None,
                  block_s: float = 2.0, folds: int = 5, base=None,
                  allowed: Sequence[np.ndarray] | None = None) -> CutoffChoice:
    """Cross-validated cutoff for `recordings` (synchronised segments with joint efforts,
    columns in `model.joint_names` order); `settings` is an `IdentificationSettings`.
    `allowed` (optional, per recording): which processed samples may take part (False for
    samples held out for the final validation, so that they play no part in the choice)."""
    from ..model.transmission import dead_band_rows
    from .pipeline import base_parameters, identify

    keep_idx = [k for k, r in enumerate(recordings) if r.n_samples >= 3]
    recs = [recordings[k] for k in keep_idx]
    allowed = None if allowed is None else [np.asarray(allowed[k], bool) for k in keep_idx]
    if not recs:
        raise SignalError("no recording to choose the filter cutoff from")
    top = 0.4 * min(decimated_rate(r.sample_rate, settings.filter) for r in recs)
    cands = tuple(c for c in (candidates or CANDIDATES_HZ) if c < top)
    if not cands:
        raise SignalError(f"no cutoff candidate below 0.4 x the sample rate ({top / 0.4:.4g} Hz)")

    def parts_for(c: float) -> list[ProcessedData | None]:
        out = []
        opt = replace(settings.filter, cutoff_hz=c)
        for r in recs:
            try:
                out.append(process(r, opt))
            except SignalError:
                out.append(None)
        return out

    processed = {c: parts_for(c) for c in cands}
    usable = [k for k in range(len(recs)) if all(processed[c][k] is not None for c in cands)]
    if not usable:
        raise SignalError("every segment is too short to choose the filter cutoff")
    # Blocks of block_s seconds, every `folds`-th one scores.
    first = [processed[cands[0]][k] for k in usable]
    ok_parts = [np.ones(p.n_samples, bool) if allowed is None else allowed[k] for p, k in zip(first, usable)]
    if any(a.shape != (p.n_samples,) for a, p in zip(ok_parts, first)):
        raise SignalError("cutoff choice: the allowed-sample masks do not match the processed samples")
    ok = np.concatenate(ok_parts)
    # Blocks of the allowed samples only (so that the folds never coincide with a hold-out),
    # at least 2 * folds of them in all; every `folds`-th block scores.
    total_s = sum(float(a.sum()) / max(p.n_samples, 1) * float(p.t[-1] - p.t[0]) for a, p in zip(ok_parts, first))
    block_s = min(block_s, total_s / (2 * folds)) if total_s > 0 else block_s
    fold_of = []
    count = 0
    for a, p in zip(ok_parts, first):
        f = np.full(p.n_samples, -1)
        if a.any():
            b = np.floor((p.t - p.t[0]) / block_s).astype(int)
            ids = np.unique(b[a], return_inverse=True)[1] + count
            count = int(ids.max()) + 1
            f[a] = ids % folds
        fold_of.append(f)
    fold = np.concatenate(fold_of)
    test = fold == folds - 1
    if not test.any() or not (ok & ~test).any():
        raise SignalError(f"the recordings ({int(ok.sum())} usable samples) are too short to "
                          f"cross-validate the filter cutoff in {block_s:g} s blocks")
    ref = concatenate(first)
    mask = dead_band_rows(model, ref, settings.moving_threshold, 1.0 / cands[0]) & test[:, None]
    if not mask.any(axis=0).all():
        raise SignalError("too few moving samples to cross-validate the filter cutoff")

    base = base or base_parameters(model, settings)
    scores, rms_all = [], []
    for c in cands:
        data = concatenate([processed[c][k] for k in usable])
        s = replace(settings, method="ols", filter=replace(settings.filter, cutoff_hz=c), reversal_guard_s=None)
        try:
            result = identify(model, data.subset(np.flatnonzero(~test & ok)), s, base)
        except IdentificationError:
            scores.append(math.inf)
            rms_all.append(np.full(model.n, np.inf))
            continue
        pred = result.predict(model, data.q, data.qd, data.qdd)
        err = np.where(mask, data.effort_raw - pred, 0.0)
        rms = np.sqrt((err ** 2).sum(0) / mask.sum(0))
        rms_all.append(rms)
        scores.append(float(np.mean(np.log(np.maximum(rms, 1e-300)))))
    best = int(np.argmin(scores))
    if not math.isfinite(scores[best]):
        raise SignalError("no cutoff candidate gave an identification; set identification.filter.cutoff_hz")
    return CutoffChoice(cands[best], cands, tuple(scores), tuple(rms_all))


# ------------------------------------------------------------------ config glue
def strip_auto_cutoff(section, cutoff_hz: float | None = None, force_auto: bool = False) -> tuple[dict, bool]:
    """The `identification:` section ready for `pipeline.identification_config`, and whether
    the cutoff is to be chosen from the data: it is when the section's
    ``filter.cutoff_hz`` is absent or ``auto`` (or `force_auto`), unless `cutoff_hz` is given."""
    section = dict(section or {})
    filt = dict(section.get("filter") or {})
    auto = cutoff_hz is None and (force_auto or filt.get("cutoff_hz", "auto") == "auto")
    if cutoff_hz is not None:
        filt["cutoff_hz"] = float(cutoff_hz)
    elif auto:
        filt.pop("cutoff_hz", None)
    section["filter"] = filt
    return section, auto


def settings_with_data_cutoff(model, recordings: Sequence[Recording], settings, allowed=None, base=None):
    """(settings with the cross-validated cutoff, a one-line note, the `CutoffChoice` or None).
    When the data cannot decide (too short, too few moving samples) the settings are
    returned unchanged and the note says why."""
    try:
        choice = choose_cutoff(model, recordings, settings, base=base, allowed=allowed)
    except SignalError as exc:
        return settings, default_cutoff_note(settings, exc), None
    new = replace(settings, filter=replace(settings.filter, cutoff_hz=choice.cutoff_hz))
    return new, choice.summary(), choice


def default_cutoff_note(settings, why) -> str:
    """The note when the data cannot decide and the default cutoff of `settings` is kept."""
    return f"filter cutoff {settings.filter.cutoff_hz:g} Hz (default): it could not be chosen from the data: {why}"
