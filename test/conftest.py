import os
import sys
from pathlib import Path

if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) > 1:
    # pytest-xdist's workers fill the processors already: one BLAS thread each, set before
    # numpy and scipy load OpenBLAS (it reads these once); the commands the tests start
    # inherit it. Two threads per worker took 32 % more CPU time for the suite (9:28 against 7:09).
    for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
        os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


@pytest.fixture(scope="session")
def demo_urdf() -> Path:
    return ROOT / "urdf" / "demo_arm.urdf"


def example_robot_urdf(package: str, name: str) -> Path:
    """URDF shipped by the example-robot-data wheel (a test dependency)."""
    import cmeel  # noqa: F401  installed with example-robot-data
    import sysconfig
    for base in {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}:
        p = Path(base) / "cmeel.prefix" / "share" / "example-robot-data" / "robots" / package / "urdf" / name
        if p.is_file():
            return p
    raise FileNotFoundError(f"example-robot-data URDF {package}/urdf/{name} not found; "
                            "install the test extras: pip install '.[test]'")


@pytest.fixture(scope="session")
def panda_urdf() -> Path:
    return example_robot_urdf("panda_description", "panda.urdf")


PANDA_ARM = tuple(f"panda_joint{i}" for i in range(1, 8))


def random_states(model, n, seed=0, vel=2.0, acc=8.0):
    rng = np.random.default_rng(seed)
    lo = np.where(np.isfinite(model.limits.lower), model.limits.lower, -np.pi)
    hi = np.where(np.isfinite(model.limits.upper), model.limits.upper, np.pi)
    return (rng.uniform(lo, hi, (n, model.n)), rng.uniform(-vel, vel, (n, model.n)),
            rng.uniform(-acc, acc, (n, model.n)))


@pytest.fixture(scope="module")
def model(demo_urdf):
    """The demo arm's RobotModel (test files may define their own `model`)."""
    from robot_ident.model.robot import RobotModel
    return RobotModel(demo_urdf)


@pytest.fixture(scope="module")
def base(model):
    from robot_ident.model.base import BaseParameters
    return BaseParameters.from_model(model)
