"""The config schema (robot_ident/cli/config_schema.py) against the validators: the same keys
in every section, the same defaults (the schema's defaults written out explicitly parse to
what an empty section parses to), a misspelt key anywhere refused naming the intended key,
and docs/config.md equal to what the schema renders."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from robot_ident.cli.config_reference import config_reference
from robot_ident.cli.config_schema import SECTIONS, section
from robot_ident.cli.config_template import section_lines
from robot_ident.errors import ConfigError, ModelError

ROOT = Path(__file__).resolve().parents[1]
URDF = str(ROOT / "urdf" / "demo_arm.urdf")
JOINTS = ["shoulder_pan", "shoulder_lift", "elbow", "wrist_1", "wrist_2", "wrist_3"]


def test_docs_config_md_is_up_to_date():
    doc = ROOT / "docs" / "config.md"
    assert doc.is_file() and doc.read_text(encoding="utf-8") == config_reference(), (
        "docs/config.md differs from the schema; regenerate it: "
        "python -m robot_ident.cli.config_reference > docs/config.md")


def _validator_keys() -> dict[str, set]:
    from robot_ident.estimation import body_bounds, payload, pipeline
    from robot_ident.excitation import config as excitation
    from robot_ident.excitation.collision import spec as collision
    from robot_ident.io import config
    from robot_ident.mechanisms.closed_chain import spec as closures
    from robot_ident.model import actuation, spring, transmission
    from robot_ident.sim import config as sim
    return {
        "": set(config._OWNED) | set(config.SECTIONS) | set(config.SHARED),
        "actuators.<joint>": set(actuation.ALL_KEYS),
        "sync": set(config._SYNC_KEYS),
        "transmissions.<group>": set(transmission._GROUP_KEYS),
        "identification": pipeline._IDENT_KEYS, "identification.filter": pipeline._FILTER_KEYS,
        "identification.dead_band": pipeline._DEAD_BAND_KEYS, "identification.model": pipeline._MODEL_KEYS,
        "identification.physical": body_bounds._KEYS, "identification.physical.bodies.<joint>": body_bounds._BODY_KEYS,
        "excitation": excitation._KEYS, "excitation.margins": excitation._MARGIN_KEYS,
        "excitation.collision": set(collision._KEYS), "excitation.collision.boxes.<name>": set(collision._BOX_KEYS),
        "simulation": sim._KEYS, "simulation.joints.<joint>": sim._JOINT_KEYS, "simulation.payload": sim._PAYLOAD_KEYS,
        "payload": payload._PAYLOAD_KEYS, "springs.<name>": spring._KEYS,
        "(closures file)": set(closures.FILE_KEYS), "(closures file).closures[]": set(closures.CLOSURE_KEYS),
    }


def test_every_section_lists_the_keys_its_validator_accepts():
    keys = _validator_keys()
    assert set(keys) == {s.path for s in SECTIONS}
    for s in SECTIONS:
        assert s.names() == set(keys[s.path]), s.path
        assert (ROOT / "robot_ident" / s.checked_by).is_file(), s.checked_by


def _defaults(path: str) -> dict:
    """The schema's defaults of a section as the YAML `init` writes them, parsed back."""
    return yaml.safe_load("\n".join(section_lines(path, defaults_only=True))) or {}


def test_top_level_sync_and_actuator_defaults_are_the_codes():
    from robot_ident.io.config import config_from_parameters
    act = {"type": "rotary", "torque_constant": 0.1}
    bare = {"joints": ["a"], "actuators": {"a": act}}
    top = _defaults("")
    assert {"current_source", "current_interface", "joint_states_topic", "sync", "identification"} <= set(top)
    full = {**top, "joints": ["a"], "actuators": {"a": {**act, **_defaults("actuators.<joint>")}}}
    a, b = config_from_parameters(bare), config_from_parameters(full)
    for f in ("current_source", "current_interface", "joint_states_topic", "current_topic", "actuators", "sync"):
        assert getattr(a, f) == getattr(b, f), f
    # current_topic has no single default: the meaning says which
    assert a.current_topic == "/dynamic_joint_states"
    assert config_from_parameters({"joints": ["a"], "current_source": "effort"}).current_topic == "/joint_states"


def test_identification_defaults_are_the_codes():
    from robot_ident.estimation.auto_cutoff import strip_auto_cutoff
    from robot_ident.estimation.pipeline import identification_config
    full = {**_defaults("identification")}
    assert set(full) >= {"filter", "dead_band", "model", "physical", "method", "holdout"}
    (s1, auto1), (s2, auto2) = strip_auto_cutoff({}), strip_auto_cutoff(full)
    assert auto1 and auto2          # cutoff_hz: auto is the default
    assert identification_config(s1) == identification_config(s2)


def test_excitation_defaults_are_the_codes():
    from robot_ident.excitation.collision.spec import parse_collision_section
    from robot_ident.excitation.config import parse_excitation_config
    ex = _defaults("excitation")
    assert {"margins", "collision"} <= set(ex)

    def parse(section):
        return parse_excitation_config({"robot_ident": {"ros__parameters": {"joints": ["a"], "excitation": section}}})
    assert parse(ex) == parse({})
    box = {"size": [1.0, 1.0, 1.0]}
    assert (parse_collision_section({"boxes": {"b": {**box, **_defaults("excitation.collision.boxes.<name>")}}})
            == parse_collision_section({"boxes": {"b": box}}))


def test_simulation_payload_spring_and_closure_defaults_are_the_codes():
    from robot_ident.estimation.payload import payload_config
    from robot_ident.mechanisms.closed_chain.spec import Closure
    from robot_ident.model.robot import RobotModel
    from robot_ident.model.spring import spring_specs
    from robot_ident.sim.config import simulation_config
    model = RobotModel(URDF)
    sim = _defaults("simulation")
    assert set(sim) >= {"payload", "effort_noise"}
    entry = {"offset": 0.0}         # armature: unset, derived from the effort limit (sim/config.py)
    assert entry == _defaults("simulation.joints.<joint>")
    a = simulation_config({}, model)
    b = simulation_config({**sim, "joints": {"elbow": entry}}, model)
    assert (a.noise, a.current_noise, a.payload_mass, a.payload_com) == (
        b.noise, b.current_noise, b.payload_mass, b.payload_com)
    for f in ("armature", "coulomb", "viscous", "offset"):
        assert np.array_equal(getattr(a.truth, f), getattr(b.truth, f)), f
    assert payload_config(_defaults("payload")) == payload_config({})
    s = {"link_a": "base_link", "point_a": [0, 0, 0], "link_b": "upper_arm", "point_b": [0, 0, 1]}
    assert spring_specs({"s": {**s, **_defaults("springs.<name>")}}) == spring_specs({"s": s})
    c = {"link_a": "a", "link_b": "b"}
    assert Closure.from_dict({**c, **_defaults("(closures file).closures[]")}) == Closure.from_dict(c)


def _misspelt(key: str) -> str:
    """The key with its middle letter doubled (the key itself stays the closest valid one)."""
    k = len(key) // 2
    return key[:k] + key[k] + key[k:]


ITEM = {"<joint>": "elbow", "<group>": "wrist", "<name>": "table"}


def _place(path: str, value) -> tuple[dict, list[str]]:
    """ros__parameters with `value` at `path` (names chosen for <joint>, ...), and the path's parts."""
    parts = [ITEM.get(p, p) for p in path.split(".")] if path else []
    params = {"joints": JOINTS, "current_source": "effort"}
    d = params
    for p in parts[:-1]:
        d = d.setdefault(p, {})
    if parts:
        d[parts[-1]] = value
    else:
        params.update(value)
    return params, parts


PARAMETER_FILE = [(s.path, k.name) for s in SECTIONS if not s.path.startswith("(") for k in s.keys]


@pytest.mark.parametrize("path,key", PARAMETER_FILE, ids=[f"{p or 'top'}.{k}" for p, k in PARAMETER_FILE])
def test_a_misspelt_key_is_refused_naming_the_intended_one(tmp_path, path, key):
    from robot_ident.offline.config_check import check_config
    bad = _misspelt(key)
    entry = {"type": "direct"} if path == "actuators.<joint>" else {}
    params, parts = _place(path, {**entry, bad: 1})
    cfg = tmp_path / "arm.yaml"
    cfg.write_text(yaml.safe_dump({"robot_ident": {"ros__parameters": params}}))
    with pytest.raises(ConfigError) as exc:
        check_config(cfg, URDF)
    msg = str(exc.value)
    where = ".".join([*parts, bad]).replace("transmissions.", "transmissions: ")   # springs: without the node
    assert msg.startswith(f"{cfg}: ") and where in msg and f"did you mean {key!r}?" in msg, msg


@pytest.mark.parametrize("path,entry,where,hint", [
    ("", {"identifcation": {}}, "robot_ident.ros__parameters.identifcation", "did you mean 'identification'?"),
    ("actuators.<joint>", {"type": "direct", "torque_constnat": 1},
     "robot_ident.ros__parameters.actuators.elbow.torque_constnat", "did you mean 'torque_constant'?"),
    ("simulation.joints.<joint>", {"x": 1}, "robot_ident.ros__parameters.simulation.joints.elbow.x",
     "known keys: armature, coulomb, offset, viscous"),
    ("identification.filter", {"cutof_hz": 5}, "robot_ident.ros__parameters.identification.filter.cutof_hz",
     "did you mean 'cutoff_hz'?"),
    ("excitation.collision", {"margn": 0.1}, "robot_ident.ros__parameters.excitation.collision.margn",
     "did you mean 'margin'?"),
])
def test_the_keys_of_the_issue(tmp_path, path, entry, where, hint):
    from robot_ident.offline.config_check import check_config
    params, _ = _place(path, entry)
    cfg = tmp_path / "arm.yaml"
    cfg.write_text(yaml.safe_dump({"robot_ident": {"ros__parameters": params}}))
    with pytest.raises(ConfigError, match=rf"^{cfg}: {where}: .*{hint.replace('?', '[?]')}"):
        check_config(cfg, URDF)


def test_the_top_level_leaves_a_key_far_from_every_known_one_alone(tmp_path):
    from robot_ident.offline.config_check import check_config
    params, _ = _place("", {"my_vendor_gain": 3})
    cfg = tmp_path / "arm.yaml"
    cfg.write_text(yaml.safe_dump({"robot_ident": {"ros__parameters": params}}))
    assert check_config(cfg, URDF).joint_names == tuple(JOINTS)


CLOSURE_FILE_KEYS = sorted(section("(closures file)").names() | section("(closures file).closures[]").names())


@pytest.mark.parametrize("key", CLOSURE_FILE_KEYS)
def test_a_misspelt_key_of_the_closures_file_is_refused(tmp_path, key):
    from robot_ident.mechanisms.closed_chain.spec import ClosedChainSpec
    doc = {"urdf": "five_bar.urdf", "actuated": ["act1", "act2"],
           "closures": [{"name": "tip", "link_a": "distal1", "link_b": "distal2"}]}
    bad = _misspelt(key)
    if key in section("(closures file)").names():
        doc[bad] = 1
    else:
        doc["closures"][0][bad] = 1
    p = tmp_path / "c.yaml"
    p.write_text(yaml.safe_dump(doc))
    with pytest.raises(ModelError, match=rf"\.{bad}: unknown key; did you mean '{key}'\?"):
        ClosedChainSpec.from_yaml(p)
