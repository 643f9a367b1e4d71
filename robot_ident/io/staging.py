"""Output folders written as a unit.

A command that writes a folder (a result folder, a simulated bag) writes it inside a
hidden staging folder next to the target, ``.<name>.robot_ident-<pid>-<random>/<name>``,
and only when every file is written swaps it in:

- no target yet: one ``rename``;
- an older folder of the same kind: exchanged in one step (Linux ``renameat2`` with
  ``RENAME_EXCHANGE``; elsewhere two renames), then the old one is deleted, so an
  older result is replaced as a whole, never mixed with the new one;
- a folder that is not of this kind (a user's own files): always refused -- nothing a
  command did not write is ever deleted, whatever the flags.

Ctrl-C, SIGTERM (the command line turns it into the same unwinding) or an error removes
the staging folder; after SIGKILL it stays hidden and the next run into the same target
removes it (its process is gone). The target is checked before any work starts
(`check_output_folder`): a file, a path below a file, or a folder without write
permission is a one-line `OutputError`. The check also takes the target's lock (an
exclusive `flock` on a file under the temporary directory, keyed by the target's absolute
path), held until the folder is swapped in or the process ends: a second run writing the
same target fails at its start naming the first one's process, instead of one silently
replacing the other's result.
"""
from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import fcntl
import hashlib
import os
import shutil
import stat
import tempfile
from pathlib import Path

from ..errors import RobotIdentError
from ..util.atomic import default_dir_mode

MARKER = ".robot_ident"          # written into each folder robot_ident produces: its kind
_STAGE = ".robot_ident-"


class OutputError(RobotIdentError):
    """An output path cannot be written (a file, below a file, no permission, foreign folder)."""


def _nearest_existing(p: Path) -> Path:
    q = p
    while not q.exists() and not q.is_symlink():
        if q.parent == q:
            break
        q = q.parent
    return q


LATER = {"validation.yaml", "validation_samples.npz", "report.html"}   # validate / report write into a result


def folder_kind(path: Path) -> str | None:
    """The kind of a folder robot_ident wrote ('result', 'bag', ...) or None."""
    m = path / MARKER
    if m.is_file():
        try:
            return (m.read_text(encoding="utf-8").splitlines() or [""])[0].strip() or None
        except OSError:
            return None
    if (path / "result.yaml").is_file():          # result folders written before the marker existed
        return "result"
    if (path / "payload.yaml").is_file():         # payload folders written before the marker existed
        return "payload"
    return None


def _write_marker(folder: Path, kind: str) -> None:
    """The marker: the folder's kind, then every file robot_ident wrote in it."""
    files = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file() and p.name != MARKER)
    (folder / MARKER).write_text("\n".join([kind] + files) + "\n", encoding="utf-8")


def foreign_files(folder: Path) -> list[str]:
    """Files in a folder robot_ident wrote that it did not write (a user's notes): none when
    its marker lists no files (folders written before the list existed)."""
    try:
        listed = (folder / MARKER).read_text(encoding="utf-8").splitlines()[1:]
    except OSError:
        return []
    if not listed:
        return []
    known = set(listed) | LATER | {MARKER}
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*")
                  if p.is_file() and str(p.relative_to(folder)) not in known)


def check_writable_path(target: str | os.PathLike, what: str = "output") -> Path:
    """Refuse a path that cannot be created: below a file, or in a folder without write
    permission. Returns it as a Path."""
    target = Path(target)
    base = _nearest_existing(target.parent if target.parent != target else target)
    if not base.exists():
        raise OutputError(f"{what} {target}: {base} does not exist")
    if not base.is_dir():
        raise OutputError(f"{what} {target}: {base} is a file, not a folder")
    if not os.access(base, os.W_OK | os.X_OK):
        raise OutputError(f"{what} {target}: no permission to write in {base}")
    return target


def check_output_file(target: str | os.PathLike, ours, what: str) -> Path:
    """Check an output file before any work: a folder there, a path that cannot be created, or
    an existing file robot_ident did not write as `what` (`ours(path)` false or failing) is an
    `OutputError`: robot_ident replaces only files it wrote. Returns it as a Path."""
    target = Path(target)
    if target.is_dir():
        raise OutputError(f"output {target} is a folder; give a file name")
    if target.exists() or target.is_symlink():
        try:
            mine = bool(ours(target))
        except Exception:          # unreadable, another format: not ours
            mine = False
        if not mine:
            raise OutputError(f"output {target} exists and is not a robot_ident {what} (robot_ident replaces only "
                              "a file it wrote); choose another file")
    return check_writable_path(target)


def keep_previous(target: Path) -> Path | None:
    """Hard-link an existing `target` to the first free ``<name>.bak``, ``<name>.bak2``, ... so
    that replacing it loses nothing; the backup's path (None: nothing there)."""
    if not target.exists():
        return None
    for k in range(1, 1000):
        bak = target.with_name(f"{target.name}.bak{k if k > 1 else ''}")
        if bak.exists() or bak.is_symlink():
            continue
        try:
            os.link(target, bak)
        except FileExistsError:
            continue
        except OSError:                  # no hard links on this file system: a copy
            shutil.copy2(target, bak)
        return bak
    raise OutputError(f"output {target}: no free name for a backup of it")


_HELD: dict[str, int] = {}       # real path of a target -> the lock file descriptor this process holds


def _lock_path(key: str) -> Path:
    """The lock file of an output: in a folder of the temporary directory private to this user
    (refused when someone else could have planted it: not ours, not a folder, or open to others)."""
    folder = Path(tempfile.gettempdir()) / f"robot_ident-locks-{os.getuid()}"
    folder.mkdir(mode=0o700, exist_ok=True)
    st = os.lstat(folder)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise OutputError(f"{folder} (the output locks) is not a folder private to this user; remove it")
    return folder / (hashlib.sha1(key.encode()).hexdigest() + ".lock")


def lock_output(target: Path) -> None:
    """Hold `target`'s writer lock for this process (again: nothing to do)."""
    key = os.path.realpath(target)
    if key in _HELD:
        return
    fd = os.open(_lock_path(key), os.O_CREAT | os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        holder = os.read(fd, 64).decode(errors="replace").strip() or "?"
        os.close(fd)
        raise OutputError(f"output {target} is being written by another robot-ident run (process {holder}); "
                          "wait for it to finish or choose another folder") from None
    os.ftruncate(fd, 0)
    os.write(fd, str(os.getpid()).encode())
    _HELD[key] = fd


def release_output(target: Path) -> None:
    """Give `target`'s lock back (a no-op when this process does not hold it)."""
    fd = _HELD.pop(os.path.realpath(target), None)
    if fd is not None:
        os.close(fd)          # closing releases the flock


def check_output_folder(target: str | os.PathLike, kind: str, replace: bool = True) -> Path:
    """Check an output folder before any work: a file, a path below a file, a folder
    without write permission, an existing non-empty folder robot_ident did not write as
    `kind`, or any existing folder when `replace` is false, is an `OutputError`."""
    target = Path(target)
    if target.exists() or target.is_symlink():
        if not target.is_dir():
            raise OutputError(f"output {target} is a file, not a folder")
        if not replace:
            raise OutputError(f"output {target} exists already; choose a new folder")
        if any(target.iterdir()) and folder_kind(target) != kind:
            raise OutputError(f"output folder {target} exists and is not a robot_ident {kind} folder (robot_ident "
                              "replaces only a folder it wrote); choose another folder")
        if theirs := foreign_files(target):
            raise OutputError(f"output folder {target} holds file(s) robot_ident did not write ("
                              + ", ".join(theirs[:3]) + (", ..." if len(theirs) > 3 else "")
                              + "): replacing it would lose them; move them or choose another folder")
        if not os.access(target.parent, os.W_OK | os.X_OK):
            raise OutputError(f"output {target}: no permission to replace it in {target.parent}")
    check_writable_path(target)
    lock_output(target)
    return target


# ------------------------------------------------------------------------ swapping
_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _exchange(a: Path, b: Path) -> bool:
    """Atomically exchange two paths (Linux renameat2); False where unsupported."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return False
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    rc = fn(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)
    if rc == 0:
        return True
    err = ctypes.get_errno()
    if err in (22, 38, 95):      # EINVAL / ENOSYS / EOPNOTSUPP: file system or kernel without it
        return False
    raise OSError(err, os.strerror(err), str(b))


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale_stages(target: Path) -> list[Path]:
    """Delete staging folders of `target` left by killed runs (their process is gone)."""
    removed = []
    prefix = f".{target.name}{_STAGE}"
    try:
        entries = list(target.parent.iterdir())
    except OSError:
        return removed
    for p in entries:
        if not p.name.startswith(prefix):
            continue
        try:
            pid = int(p.name[len(prefix):].split("-")[0])
        except ValueError:
            continue
        if pid != os.getpid() and not _pid_alive(pid):
            shutil.rmtree(p, ignore_errors=True)
            removed.append(p)
    return removed


@contextlib.contextmanager
def _signals_held():
    """SIGINT and SIGTERM held back (delivered after the block) in the main thread."""
    import signal
    import threading
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held = {signal.SIGINT, signal.SIGTERM}
    old = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


class StagedFolder:
    """``with StagedFolder(target, 'result') as tmp: <write files into tmp>`` -- see the
    module doc. `create=False` leaves the staging path for the writer to create (rosbags'
    Writer wants a new folder). Files keep the folder's final name, so a bag's
    ``<name>.db3`` matches its folder."""

    def __init__(self, target: str | os.PathLike, kind: str, replace: bool = True,
                 create: bool = True):
        self.target = check_output_folder(target, kind, replace)
        self.kind, self.replace, self.create = kind, replace, create
        self._stage: Path | None = None
        self.path: Path | None = None
        self.replaced = False

    def __enter__(self) -> Path:
        t = self.target
        t.parent.mkdir(parents=True, exist_ok=True)
        remove_stale_stages(t)
        self._stage = Path(tempfile.mkdtemp(prefix=f".{t.name}{_STAGE}{os.getpid()}-", dir=t.parent))
        os.chmod(self._stage, 0o700)
        self.path = self._stage / t.name
        if self.create:
            self.path.mkdir(mode=default_dir_mode())
            os.chmod(self.path, default_dir_mode())
            (self.path / MARKER).write_text(self.kind + "\n", encoding="utf-8")
        return self.path

    def commit(self) -> Path:
        t = self.target
        if self.create is False and self.path.is_dir():
            os.chmod(self.path, default_dir_mode())
        if self.path.is_dir():
            _write_marker(self.path, self.kind)
        if t.exists() or t.is_symlink():
            check_output_folder(t, self.kind, self.replace)   # unchanged since the start?
            self.replaced = True
            if not _exchange(self.path, t):
                old = self._stage / (t.name + ".old")
                with _signals_held():         # no target between the two renames, whatever arrives
                    os.rename(t, old)
                    os.rename(self.path, t)
        else:
            os.rename(self.path, t)
        shutil.rmtree(self._stage, ignore_errors=True)
        self._stage = None
        return t

    def __exit__(self, exc_type, exc, tb):
        try:
            if exc_type is None:
                self.commit()
            elif self._stage is not None:
                shutil.rmtree(self._stage, ignore_errors=True)
                self._stage = None
        finally:
            release_output(self.target)
        return False
