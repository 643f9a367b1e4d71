"""Bag read rate of `data.bag_stream.bag_chunks` (read + batch CDR decoding of both joint
topics), fast readers against rosbags' reader, for the demo arm's 1 kHz recording:
sqlite3, mcap with uncompressed chunks (what rosbags writes by default) and mcap with zstd
chunks (what the MCAP library's writer defaults to).

The bags hold a synthetic smooth motion (no simulator: only the message layout and count
matter for the rate): ``/joint_states`` at 500 Hz, ``/dynamic_joint_states`` at 1 kHz with
``position`` and ``current``, 1.5 k messages per second of recording. Each read runs
`--repeat` times; the best wall rate and the best CPU rate (process time: what it costs on
an idle core) are printed with the load average. ``--profile`` prints cProfile's top
functions of one fast and one rosbags read of the zstd bag.

    python bench/bag_read.py [--duration 300] [--repeat 3] [--work /tmp/bags] [--profile]
"""
from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys
import tempfile
import time
from pathlib import Path
from unittest import mock

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from robot_ident.data import bag_stream  # noqa: E402
from robot_ident.data.bag import make_typestore, write_bag_from_config  # noqa: E402
from robot_ident.data.signals import Recording  # noqa: E402
from robot_ident.io.config import load_config  # noqa: E402

CONFIG = ROOT / "config" / "demo_arm.yaml"


def recording(duration: float, joints) -> Recording:
    t = np.arange(0.0, duration, 1e-3)
    n = len(joints)
    w = np.linspace(0.7, 1.9, n)
    q = 0.6 * np.sin(np.outer(t, w) + np.arange(n))
    qd = 0.6 * w * np.cos(np.outer(t, w) + np.arange(n))
    eff = 5 * np.sin(np.outer(t, 1.3 * w)) + 0.05 * np.random.default_rng(0).normal(size=q.shape)
    return Recording(t, joints, q, eff, qd=qd)


def zstd_copy(src: Path, dst: Path) -> None:
    """The same messages in an mcap bag with zstd chunks (rosbags' storage compression)."""
    from rosbags.rosbag2 import CompressionFormat, CompressionMode, Reader, StoragePlugin, Writer
    ts = make_typestore()
    w = Writer(dst, version=8, storage_plugin=StoragePlugin.MCAP)
    w.set_compression(CompressionMode.STORAGE, CompressionFormat.ZSTD)
    with Reader(src) as r, w:
        conns = {c.id: w.add_connection(c.topic, c.msgtype, typestore=ts) for c in r.connections}
        for c, t, raw in r.messages():
            w.write(conns[c.id], t, raw)


def read_once(bag: Path, topics) -> tuple[int, float, float]:
    t0, c0 = time.perf_counter(), time.process_time()
    n = 0
    for chunk in bag_stream.bag_chunks(bag, topics):
        n += sum(len(s) for s in chunk.values())
    return n, time.perf_counter() - t0, time.process_time() - c0


def rosbags_only():
    return mock.patch.multiple(bag_stream, _plain_mcap=lambda p: None, _plain_sqlite=lambda p: None)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=300.0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--work", help="folder for the bags (kept and reused; default: a new temporary folder)")
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()
    cfg = load_config(CONFIG)
    topics = {cfg.joint_states_topic: ("joint_state", None),
              cfg.current_topic: (cfg.current_kind, cfg.current_interface)}
    work = Path(args.work or tempfile.mkdtemp(prefix="ri_bagread_"))
    work.mkdir(parents=True, exist_ok=True)
    d = f"{args.duration:g}s"
    bags = {"sqlite3": work / f"demo_sqlite3_{d}", "mcap": work / f"demo_mcap_{d}",
            "mcap zstd": work / f"demo_mcap_zstd_{d}"}
    rec = None
    for kind, b in bags.items():
        if (b / "metadata.yaml").exists():
            continue
        if kind == "mcap zstd":
            zstd_copy(bags["mcap"], b)
            continue
        rec = rec or recording(args.duration, tuple(cfg.joints))
        write_bag_from_config(b, rec, cfg, storage=kind, current_noise_std=0.005)
    print(f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} at start; "
          f"{args.duration:g} s demo-arm bags in {work}")
    for kind, b in bags.items():
        size = sum(f.stat().st_size for f in b.iterdir()) / 2 ** 20
        for label, ctx in (("fast", None), ("rosbags", rosbags_only)):
            runs = []
            for _ in range(args.repeat):
                if ctx is None:
                    runs.append(read_once(b, topics))
                else:
                    with ctx():
                        runs.append(read_once(b, topics))
            n = runs[0][0]
            wall, cpu = min(r[1] for r in runs), min(r[2] for r in runs)
            print(f"{kind:<10} {size:6.0f} MiB {label:<8} {n:>8d} msg  wall {n / wall / 1e3:7.1f} k msg/s "
                  f"({wall:5.2f} s)  CPU {n / cpu / 1e3:7.1f} k msg/s ({cpu:5.2f} s)", flush=True)
    print(f"load average {os.getloadavg()[0]:.2f} at the end (2 cores shared: wall rates are lower bounds)")
    if args.profile:
        for label, ctx in (("fast", None), ("rosbags", rosbags_only)):
            prof = cProfile.Profile()
            if ctx is None:
                prof.runcall(read_once, bags["mcap zstd"], topics)
            else:
                with ctx():
                    prof.runcall(read_once, bags["mcap zstd"], topics)
            print(f"\n--- cProfile, {label} reader, mcap zstd (tottime) ---")
            pstats.Stats(prof).sort_stats("tottime").print_stats(12)


if __name__ == "__main__":
    main()
