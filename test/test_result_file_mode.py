"""Result files get the mode an ordinary open() would give them (0666 less the umask),
not mkstemp's 0600: other users of the robot may read the result folder."""
import os
import stat

import pytest

from robot_ident.util.atomic import atomic_write_text


@pytest.mark.parametrize("umask", [0o022, 0o002, 0o077])
def test_atomic_writes_follow_the_umask(tmp_path, umask):
    old = os.umask(umask)
    try:
        p = atomic_write_text(tmp_path / f"r{umask:o}" / "result.yaml", "a: 1\n")
        plain = tmp_path / f"plain{umask:o}"
        plain.write_text("x")
    finally:
        os.umask(old)
    assert stat.S_IMODE(p.stat().st_mode) == 0o666 & ~umask == stat.S_IMODE(plain.stat().st_mode)
