"""The report's first screen: may this model be used? One of three verdicts with its
reasons, ranked by what they do to the predicted efforts.

* **not trusted**: the input was implausible and forced through, the data do not
  determine the model, the model misses structure the data show (a coupling, spring or
  gain the config gets wrong), or a joint's held-out error is more than `NOT_TRUSTED_RATIO` x
  its noise level: the predicted efforts are wrong by more than the sensors' noise;
* **usable, with the caveats named**: warnings remain (a body held at a bound, a lag
  corrected, a joint not validated, a held-out error above `CAVEAT_RATIO` x the noise);
* **trusted**: no warning; notes may remain.

Ranking: the reasons that concern the whole model first (forced input, undetermined
model), then those about a joint, the joint whose held-out error is the largest multiple
of its noise first, then the rest.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

NOT_TRUSTED_RATIO = 3.0     # held-out RMS over the noise level above which a joint's efforts are wrong
CAVEAT_RATIO = 1.5          # ... above which it is a caveat (report.findings.RATIO_WARNING)

TRUSTED, CAVEATS, NOT_TRUSTED = "trusted", "usable, with the caveats named", "not trusted"


@dataclass(frozen=True)
class Verdict:
    level: str                 # TRUSTED, CAVEATS or NOT_TRUSTED
    reasons: tuple             # ranked, most damaging first

    @property
    def css(self) -> str:
        return {TRUSTED: "ok", CAVEATS: "caveat", NOT_TRUSTED: "bad"}[self.level]


def verdict(findings, validation_rows, joints) -> Verdict:
    """From the report's findings (`report.findings.Finding`) and validation rows (dicts with
    joint, ratio = held-out RMS over the noise level, not_validated)."""
    ratio = {r["joint"]: r.get("ratio") for r in validation_rows if not r.get("not_validated")}
    fatal, ranked = [], []
    for f in findings:
        if f.level == "note":
            continue
        if f.level == "refusal" or "do not determine the model" in f.text \
                or "misses structure the data show" in f.text:
            fatal.append(f.text)
            continue
        joint = _joint_of(f.text, joints)
        r = ratio.get(joint) if joint else None
        ranked.append((r if r is not None and math.isfinite(r) else (1.0 if joint else 0.0), f.text))
    bad_joints = [(r, j) for j, r in ratio.items() if r is not None and math.isfinite(r) and r > NOT_TRUSTED_RATIO]
    for r, j in sorted(bad_joints, reverse=True):
        fatal.append(f"joint {j}: held-out error {r:.2f} x its noise level -- its predicted efforts are wrong by "
                     "more than the sensors' noise")
    shown = {j for _, j in bad_joints}        # the report's own ratio line is the fatal line above
    ranked = [(r, t) for r, t in ranked if not any(t.startswith(f"joint {j}: validation RMS") for j in shown)]
    if not ratio:
        ranked.append((0.0, "not validated: no held-out data or validation recording -- the model was not checked "
                            "on data it was not fitted to"))
    reasons = tuple(fatal) + tuple(t for _, t in sorted(ranked, key=lambda x: -x[0]))
    if fatal:
        return Verdict(NOT_TRUSTED, reasons)
    return Verdict(CAVEATS if reasons else TRUSTED, reasons)


def _joint_of(text: str, joints) -> str | None:
    """The joint a finding is about (named as 'joint X' or 'joint \\'X\\''), if any."""
    for j in sorted(joints, key=len, reverse=True):
        if re.search(rf"joint (['\"]?){re.escape(j)}\1(?=$|[\s:;,.)])", text):
            return j
    return None
