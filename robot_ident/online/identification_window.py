"""The identification node's logic without ROS: the identification of what its recording
window (`recording_window.RecordingWindow`) recorded.

`identify_recorded` identifies a closed window -- its recorded bag, or its streams in
memory (`identify_streams`) -- through the one pipeline of estimation/flow.py, as
``robot-ident identify`` does (the same input checks, the same cutoff chosen from the data
when the config leaves it unset), and writes the same result folder.
`result_summary` turns the outcome into plain data for the node's messages.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from ..data.sync import JointStream
from .recording_window import Recorded


# ------------------------------------------------------------------ identification
def method_error(method: str) -> str | None:
    """A one-line error for an unknown estimator name (empty: the config's), else None."""
    from ..estimation import ESTIMATORS
    if not method or method in ESTIMATORS:
        return None
    return (f"parameter method: unknown estimator {method!r}; "
            f"expected one of {', '.join(sorted(ESTIMATORS))} (or empty: the config's)")


@dataclass
class StreamOutcome:
    model: object
    result: object
    validation: object
    output: Path | None
    sync_summary: str
    holdout: float
    identified_urdf: str | None
    warnings: list = field(default_factory=list)   # 'warning: ...' lines (plausibility, model quality)


def holdout_fraction(config_holdout: float, repetitions: int) -> float:
    """The last of `repetitions` (> 1) repetitions is held out; otherwise the config's fraction."""
    return 1.0 / repetitions if repetitions and repetitions > 1 else float(config_holdout)


def identify_streams(states: JointStream, currents: JointStream, cfg, urdf, output=None,
                     config_path=None, method: str | None = None, repetitions: int = 0,
                     plots: bool = False, source: dict | None = None, force: bool = False,
                     progress=None) -> StreamOutcome:
    """`identify_recorded` of streams in memory."""
    from ..data.processing import StreamsInput
    return _identify(StreamsInput(states, currents, "robot_ident identification_node"), cfg, urdf, output,
                     config_path, method, repetitions, plots, source, force, progress)


def identify_recorded(rec: Recorded, cfg, urdf, output=None, config_path=None, method: str | None = None,
                      repetitions: int = 0, plots: bool = False, source: dict | None = None,
                      progress=None, force: bool = False) -> StreamOutcome:
    """Identify a closed window: its bag when it was recorded to one (read in bounded
    memory), else its in-memory streams; the input checks refuse implausible input unless
    `force`. `progress`: a `util.progress.Progress` (e.g. `recording_bag.StatusProgress`
    for the status topic)."""
    if rec.bag is None:
        return identify_streams(rec.states, rec.currents, cfg, urdf, output, config_path, method, repetitions,
                                plots, source, force, progress)
    src = dict(source or {}, recording=str(rec.bag))
    if rec.loss:        # what the subscription never got, from the gaps in the header stamps
        src["messages"] = {t: {"received": v.received, "lost": v.lost,
                               "rate_hz": None if v.period_s is None else round(1.0 / v.period_s, 3)}
                           for t, v in rec.loss.items()}
    return _identify(str(rec.bag), cfg, urdf, output, config_path, method, repetitions, plots, src, force, progress)


def _identify(input_, cfg, urdf, output, config_path, method, repetitions, plots, source, force,
              progress) -> StreamOutcome:
    from ..estimation.auto_cutoff import strip_auto_cutoff
    from ..estimation.flow import identify_sources
    from ..estimation.pipeline import identification_config
    from ..io.model_loading import load_model

    section = dict(cfg.section("identification"))
    if method:
        section["method"] = method
    section, auto = strip_auto_cutoff(section)     # 'auto' or no cutoff: chosen from the data
    icfg = identification_config(section)
    icfg = replace(icfg, holdout=holdout_fraction(icfg.holdout, repetitions))
    model = load_model(urdf, cfg, icfg)
    from ..mechanisms.closed_chain.config import closures_source
    src = dict(source or {}, config=str(config_path), **closures_source(model, cfg, config_path))
    o = identify_sources([input_], cfg, icfg, model, progress=progress, auto_cutoff=auto, force=force, plots=plots,
                         source=src)
    urdf_path = urdf_text = None
    if output is not None:
        from ..io.result_folder import write_result_folder
        urdf_path = write_result_folder(Path(output), model, o.result, o.validation, o.plot_data, o.record,
                                        config_path, plots, valid_data=o.valid_data)
    if urdf_path is not None:
        urdf_text = Path(urdf_path).read_text(encoding="utf-8")
    elif o.result.standard_values is not None:
        from ..io.results import identified_urdf_xml
        urdf_text = identified_urdf_xml(model, o.result)
    return StreamOutcome(model, o.result, o.validation, None if output is None else Path(output), o.summary,
                         icfg.holdout, urdf_text, o.warnings)


@dataclass(frozen=True)
class ResultSummary:
    """Plain data for the node's messages."""

    method: str
    names: tuple[str, ...]
    values: np.ndarray
    std: np.ndarray
    joints: tuple[str, ...]
    validation_rms: np.ndarray | None         # per joint, None without hold-out data
    validation_relative_rms: np.ndarray | None
    condition_number: float
    samples: int
    warnings: tuple = ()                      # 'warning: ...' and 'note: ...' lines, one diagnostic value each

    def key_values(self) -> list[tuple[str, str]]:
        kv = [("method", self.method), ("samples", str(self.samples)),
              ("condition_number", f"{self.condition_number:.6g}")]
        notes = [w for w in self.warnings if w.startswith("note: ")]
        kv += [(f"warning.{k + 1}", w) for k, w in enumerate(w for w in self.warnings if w not in notes)]
        kv += [(f"note.{k + 1}", w) for k, w in enumerate(notes)]
        kv += [(n, f"{v:.9g} +- {s:.3g}") for n, v, s in zip(self.names, self.values, self.std)]
        if self.validation_rms is not None:
            kv += [(f"validation_rms.{j}", f"{r:.6g}") for j, r in zip(self.joints, self.validation_rms)]
        return kv


def result_summary(outcome: StreamOutcome) -> ResultSummary:
    r, v = outcome.result, outcome.validation
    return ResultSummary(
        method=str(r.method), names=tuple(r.names), values=np.asarray(r.values, dtype=float),
        std=np.asarray(r.std, dtype=float), joints=tuple(outcome.model.joint_names),
        validation_rms=None if v is None else np.asarray(v.rms, dtype=float),
        validation_relative_rms=None if v is None else np.asarray(v.relative_rms, dtype=float),
        condition_number=float(getattr(r, "condition_number", np.nan)),
        samples=int(getattr(r, "n_samples", 0)), warnings=tuple(getattr(outcome, "warnings", ())))

