"""The fast bag readers of `data.bag_stream` (standard-library sqlite3, hand-written MCAP
reader `data.mcap_read`) against rosbags' reader: bitwise the same decoded arrays on bags
with other topics and message types, several chunks, zstd / lz4 / uncompressed chunks,
a split bag, chunks out of log-time order, a file without chunks, a damaged message
index; and clear errors (naming the file) on corrupt files."""
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml

pytest.importorskip("rosbags")

from robot_ident.data import bag_stream  # noqa: E402
from robot_ident.data.bag import DYNAMIC_JOINT_STATE, JOINT_STATE, BagError, make_typestore  # noqa: E402
from robot_ident.data.bag_stream import bag_chunks, concat_streams  # noqa: E402
from robot_ident.data.msgs import dynamic_joint_state_message, joint_state_message  # noqa: E402

TOPICS = {"/joint_states": ("joint_state", None), "/dynamic_joint_states": ("dynamic_joint_state", "current")}
START = 1_700_000_000_000_000_000
JOINTS = ["j1", "j2", "j3", "j4", "j5", "j6"]


def messages(n=6000, seed=0):
    """(topic, msgtype, log time, serialised message) in write order: joint states at
    500 Hz, dynamic joint states at 1 kHz, a second JointState publisher on another topic,
    strings and twists; a few joint-state messages of another layout."""
    ts = make_typestore()
    T = ts.types
    JS, H, Tm = T[JOINT_STATE], T["std_msgs/msg/Header"], T["builtin_interfaces/msg/Time"]
    DJS, IV = T[DYNAMIC_JOINT_STATE], T["control_msgs/msg/InterfaceValue"]
    String, Twist, V3 = T["std_msgs/msg/String"], T["geometry_msgs/msg/Twist"], T["geometry_msgs/msg/Vector3"]
    rng = np.random.default_rng(seed)
    out = []
    for k in range(n):
        s = START + k * 1_000_000
        log = s + 200_000
        if k % 2 == 0:
            names = JOINTS + ["gripper"] if k % 500 == 10 else JOINTS
            m = joint_state_message(JS, H, Tm, s, names, position=rng.normal(size=len(names)),
                                    velocity=rng.normal(size=len(names)))
            out.append(("/joint_states", JOINT_STATE, log, bytes(ts.serialize_cdr(m, JOINT_STATE))))
        m = dynamic_joint_state_message(DJS, IV, H, Tm, s, JOINTS[::-1],
                                        {"position": rng.normal(size=6), "current": rng.normal(size=6)})
        out.append(("/dynamic_joint_states", DYNAMIC_JOINT_STATE, log + 1,
                    bytes(ts.serialize_cdr(m, DYNAMIC_JOINT_STATE))))
        if k % 7 == 0:
            m = joint_state_message(JS, H, Tm, s, ["wheel"], position=[0.1 * k])
            out.append(("/base/joint_states", JOINT_STATE, log + 2, bytes(ts.serialize_cdr(m, JOINT_STATE))))
        if k % 11 == 0:
            out.append(("/chatter", "std_msgs/msg/String", log + 3,
                        bytes(ts.serialize_cdr(String(data=f"message {k}" * (k % 5)), "std_msgs/msg/String"))))
        if k % 13 == 0:
            tw = Twist(linear=V3(x=1.0, y=0.0, z=float(k)), angular=V3(x=0.0, y=0.0, z=0.5))
            out.append(("/cmd_vel", "geometry_msgs/msg/Twist", log + 4,
                        bytes(ts.serialize_cdr(tw, "geometry_msgs/msg/Twist"))))
    return out


def write_rosbags(path: Path, msgs, storage="mcap", zstd=False):
    from rosbags.rosbag2 import CompressionFormat, CompressionMode, StoragePlugin, Writer
    w = Writer(path, version=8, storage_plugin=StoragePlugin.MCAP if storage == "mcap" else StoragePlugin.SQLITE3)
    if zstd:
        w.set_compression(CompressionMode.STORAGE, CompressionFormat.ZSTD)
    ts = make_typestore()
    with w:
        conns = {}
        for topic, mtype, log, raw in msgs:
            if topic not in conns:
                conns[topic] = w.add_connection(topic, mtype, typestore=ts)
            w.write(conns[topic], log, raw)
    return path


def rewrite_with_mcap_package(bag: Path, msgs, **options):
    """Replace the .mcap file of a rosbags-written bag by one written by Foxglove's `mcap`
    writer from `msgs` in the given order (same topics and counts: metadata.yaml stays valid)."""
    mcap_writer = pytest.importorskip("mcap.writer")
    ts = make_typestore()
    (f,) = bag.glob("*.mcap")
    f.unlink()
    with open(f, "wb") as out:
        w = mcap_writer.Writer(out, **options)
        w.start(profile="ros2", library="test")
        chans = {}
        for topic, mtype, log, raw in msgs:
            if topic not in chans:
                text = ts.generate_msgdef(mtype, ros_version=2)[0]
                sid = w.register_schema(mtype, "ros2msg", text.encode())
                chans[topic] = w.register_channel(topic, "cdr", sid)
            w.add_message(chans[topic], log_time=log, data=raw, publish_time=log)
        w.finish()


def records(data: bytes):
    """(position, opcode, length) of the top-level records of an MCAP file."""
    pos = 8
    while pos < len(data) - 8:
        op, ln = data[pos], int.from_bytes(data[pos + 1:pos + 9], "little")
        yield pos, op, ln
        pos += 9 + ln


def read(bag, batch=700):
    """topic -> one JointStream of the whole bag, through the fast path or through rosbags."""
    parts = {}
    for chunk in bag_chunks(bag, TOPICS, batch=batch):
        for t, s in chunk.items():
            parts.setdefault(t, []).append(s)
    return {t: concat_streams(v) for t, v in parts.items()}


def read_both(bag, monkeypatch):
    fast = read(bag)
    with monkeypatch.context() as m:
        m.setattr(bag_stream, "_plain_mcap", lambda p: None)
        m.setattr(bag_stream, "_plain_sqlite", lambda p: None)
        slow = read(bag)
    return fast, slow


def no_rosbags(monkeypatch):
    """Make sure a read takes the fast path: rosbags' reader would fail."""
    def refuse(path):
        raise AssertionError("rosbags' reader was used")
    monkeypatch.setattr(bag_stream, "_open", refuse)


def assert_same(a, b, order=None):
    assert set(a) == set(b) == set(TOPICS)
    for t in a:
        x, y = a[t], b[t]
        if order == "received":          # rosbags sorts by log time: compare in that order
            x = x.select(np.argsort(x.received, kind="stable"))
        assert len(x) == len(y) > 0
        assert np.array_equal(x.stamps, y.stamps) and np.array_equal(x.received, y.received)
        joints = sorted(y.joint_set())
        assert x.joint_set() == y.joint_set()
        assert set(x.fields) == set(y.fields)
        for f in y.fields:
            xm, ym = x.matrix(f, joints), y.matrix(f, joints)
            assert xm.dtype == ym.dtype and np.array_equal(xm.view(np.int64), ym.view(np.int64)), (t, f)


@pytest.fixture(scope="module")
def msgs():
    return messages()


@pytest.mark.parametrize("storage,zstd", [("sqlite3", False), ("mcap", False), ("mcap", True)])
def test_fast_path_equals_rosbags(tmp_path, msgs, monkeypatch, storage, zstd):
    bag = write_rosbags(tmp_path / "bag", msgs, storage, zstd)
    if storage == "mcap":
        assert len(bag_stream._plain_mcap(bag)[0][0].compressions) == 1
        assert bag_stream._plain_mcap(bag)[0][0].compressions == {"zstd" if zstd else ""}
    fast, slow = read_both(bag, monkeypatch)
    assert_same(fast, slow)
    assert len(slow["/dynamic_joint_states"]) == 6000 and len(slow["/joint_states"]) == 3000
    no_rosbags(monkeypatch)
    assert_same(read(bag, batch=50_000), slow)


@pytest.mark.parametrize("options", [
    {"compression": "LZ4", "chunk_size": 64 * 1024},          # lz4 chunks with CRCs
    {"compression": "ZSTD", "chunk_size": 200 * 1024},
    {"compression": "NONE", "chunk_size": 100 * 1024, "index_types": "CHUNK"},   # no message index
    {"use_chunking": False},                                   # messages outside chunks
])
def test_files_of_foxglove_mcap_writer(tmp_path, msgs, monkeypatch, options):
    mcap_writer = pytest.importorskip("mcap.writer")
    CompressionType, IndexType = mcap_writer.CompressionType, mcap_writer.IndexType
    opts = dict(options)
    if "compression" in opts:
        opts["compression"] = CompressionType[opts["compression"]]
    if "index_types" in opts:
        opts["index_types"] = IndexType[opts["index_types"]]
    bag = write_rosbags(tmp_path / "bag", msgs)
    ref = read_both(bag, monkeypatch)[1]
    rewrite_with_mcap_package(bag, msgs, **opts)
    fast, slow = read_both(bag, monkeypatch)
    if "index_types" in options:
        assert slow == {}        # rosbags counts messages from the message index: it reads none
    else:
        assert_same(slow, ref)
    no_rosbags(monkeypatch)
    assert_same(fast, ref)


def test_chunks_out_of_log_time_order(tmp_path, msgs, monkeypatch):
    """The second half written first: rosbags yields log-time order, the fast path file order."""
    half = len(msgs) // 2
    order = msgs[half:] + msgs[:half]
    bag = write_rosbags(tmp_path / "bag", msgs)
    rewrite_with_mcap_package(bag, order, chunk_size=64 * 1024)
    fast, slow = read_both(bag, monkeypatch)
    js = fast["/joint_states"].received
    assert (np.diff(js) < 0).sum() == 1                      # file order: one step back
    assert_same(fast, slow, order="received")


def test_split_bag(tmp_path, msgs, monkeypatch):
    """Two files listed in one metadata.yaml (what rosbag2's --max-bag-size writes)."""
    half = len(msgs) // 2
    a = write_rosbags(tmp_path / "a", msgs[:half])
    b = write_rosbags(tmp_path / "b", msgs[half:], zstd=True)
    bag = tmp_path / "bag"
    bag.mkdir()
    shutil.copy(a / "a.mcap", bag / "bag_0.mcap")
    shutil.copy(b / "b.mcap", bag / "bag_1.mcap")
    ma = yaml.safe_load((a / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    mb = yaml.safe_load((b / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    ma["relative_file_paths"] = ["bag_0.mcap", "bag_1.mcap"]
    ma["files"] = [dict(ma["files"][0], path="bag_0.mcap"), dict(mb["files"][0], path="bag_1.mcap")]
    ma["message_count"] += mb["message_count"]
    more = {t["topic_metadata"]["name"]: t["message_count"] for t in mb["topics_with_message_count"]}
    for t in ma["topics_with_message_count"]:
        t["message_count"] += more.get(t["topic_metadata"]["name"], 0)
    ma["duration"]["nanoseconds"] = mb["starting_time"]["nanoseconds_since_epoch"] + mb["duration"]["nanoseconds"] \
        - ma["starting_time"]["nanoseconds_since_epoch"]
    (bag / "metadata.yaml").write_text(yaml.safe_dump({"rosbag2_bagfile_information": ma}))
    assert len(bag_stream._plain_mcap(bag)[0]) == 2
    fast, slow = read_both(bag, monkeypatch)
    assert len(slow["/dynamic_joint_states"]) == 6000
    no_rosbags(monkeypatch)
    assert_same(fast, slow)


def test_damaged_message_index_is_not_trusted(tmp_path, msgs, monkeypatch):
    """An index offset pointing into another message: the chunk is walked record by record."""
    bag = write_rosbags(tmp_path / "bag", msgs)
    ref = read(bag)
    (f,) = bag.glob("*.mcap")
    data = bytearray(f.read_bytes())
    at = next(pos for pos, op, _ in records(data) if op == 0x07)   # the first message index record
    first_offset = at + 9 + 2 + 4 + 8                             # offset of its first (log time, offset)
    data[first_offset:first_offset + 8] = (int.from_bytes(data[first_offset:first_offset + 8], "little")
                                           + 40).to_bytes(8, "little")
    f.write_bytes(bytes(data))
    no_rosbags(monkeypatch)
    assert_same(read(bag), ref)


def test_corrupt_chunk_names_the_file(tmp_path, msgs):
    bag = write_rosbags(tmp_path / "bag", msgs, zstd=True)
    (f,) = bag.glob("*.mcap")
    data = bytearray(f.read_bytes())
    chunk = next(pos for pos, op, _ in records(data) if op == 0x06)
    frame = chunk + 9 + 8 + 8 + 8 + 4 + 4 + len("zstd") + 8        # the zstd frame of the chunk
    assert data[frame:frame + 4] == b"\x28\xb5\x2f\xfd"
    data[frame:frame + 4] = bytes(4)
    f.write_bytes(bytes(data))
    with pytest.raises(BagError, match=rf"MCAP file .*bag\.mcap: record at byte {chunk}: the zstd chunk does not "
                                       "decompress"):
        read(bag)


def test_chunk_crc_mismatch_names_the_file(tmp_path, msgs):
    """A flipped bit in a message value of an uncompressed chunk with a CRC (Foxglove's writer)."""
    bag = write_rosbags(tmp_path / "bag", msgs)
    none = pytest.importorskip("mcap.writer").CompressionType.NONE
    rewrite_with_mcap_package(bag, msgs, compression=none, chunk_size=64 * 1024)
    (f,) = bag.glob("*.mcap")
    data = bytearray(f.read_bytes())
    chunk = next(pos for pos, op, _ in records(data) if op == 0x06)
    data[chunk + 2000] ^= 0x10
    f.write_bytes(bytes(data))
    with pytest.raises(BagError, match=rf"bag\.mcap: record at byte {chunk}: chunk CRC mismatch"):
        read(bag)


def test_truncated_file_falls_back_to_rosbags_with_a_clear_error(tmp_path, msgs):
    bag = write_rosbags(tmp_path / "bag", msgs)
    (f,) = bag.glob("*.mcap")
    data = f.read_bytes()
    f.write_bytes(data[: len(data) // 2])
    assert bag_stream._plain_mcap(bag) == "MCAP file bag.mcap: no footer (truncated file?)"
    with pytest.raises(BagError, match=rf"{bag}: it looks corrupt or truncated .*\[MCAP file bag\.mcap: no footer"):
        read(bag)


def test_unknown_chunk_compression_is_left_to_rosbags(tmp_path, msgs):
    bag = write_rosbags(tmp_path / "bag", msgs, zstd=True)
    (f,) = bag.glob("*.mcap")
    f.write_bytes(f.read_bytes().replace(b"\x04\x00\x00\x00zstd", b"\x04\x00\x00\x00brot"))
    assert "chunk compression ['brot']" in bag_stream._plain_mcap(bag)
    with pytest.raises(BagError, match=r"Unsupported chunk compression 'brot'.*\[MCAP file bag\.mcap: chunk compr"):
        read(bag)


def test_count_differing_from_the_statistics_is_an_error(tmp_path, msgs):
    """A message index that misses messages must not pass silently: the file's Statistics
    record counts the messages of each channel."""
    bag = write_rosbags(tmp_path / "bag", msgs)
    (f,) = bag.glob("*.mcap")
    data = bytearray(f.read_bytes())
    stats = next(pos for pos, op, _ in records(data) if op == 0x0B)
    first = stats + 9 + 8 + 2 + 4 * 4 + 16 + 4                 # first (channel, count) entry
    cid = int.from_bytes(data[first:first + 2], "little")
    count = int.from_bytes(data[first + 2:first + 10], "little")
    data[first + 2:first + 10] = (count + 1).to_bytes(8, "little")
    f.write_bytes(bytes(data))
    topic = bag_stream._plain_mcap(bag)[0][0].channels[cid].topic
    with pytest.raises(BagError, match=rf"bag\.mcap: read {count} messages of topic '{topic}', its statistics "
                                       rf"record says {count + 1}"):
        read(bag)


def collector_reference(bag):
    """What `bag.read_streams` returned before it read through `bag_chunks`: rosbags' reader
    message by message (log-time order), each message deserialised and collected."""
    from robot_ident.data.bag_files import _open
    from robot_ident.data.msgs import JointStreamCollector
    reader = _open(bag)
    try:
        conns = [c for c in reader.connections if c.topic in TOPICS]
        cols = {t: JointStreamCollector(t, k, i) for t, (k, i) in TOPICS.items()}
        for conn, log, raw in reader.messages(connections=conns):
            cols[conn.topic].add(reader.deserialize(raw, conn.msgtype), log)
        return {t: c.stream() for t, c in cols.items()}
    finally:
        reader.close()


@pytest.mark.parametrize("storage", ["sqlite3", "mcap"])
def test_read_streams_equals_the_message_collector(tmp_path, msgs, monkeypatch, storage):
    """The whole-recording reader (`read_recordings`, and data/processing.py's fallback for
    a bag played in a loop) goes through the fast readers and gives what rosbags +
    `JointStreamCollector` gave."""
    from robot_ident.data.bag import read_streams
    bag = write_rosbags(tmp_path / "bag", msgs, storage)
    ref = collector_reference(bag)
    no_rosbags(monkeypatch)
    got = read_streams(bag, TOPICS)
    assert_same(got, ref)


def test_read_streams_in_log_time_order_and_empty_topics(tmp_path, msgs, monkeypatch):
    """A file written out of log-time order is read in log-time order (as rosbags reads it);
    a topic the bag lists but holds no message of is an empty stream, not an error here."""
    from robot_ident.data.bag import read_streams
    half = len(msgs) // 2
    bag = write_rosbags(tmp_path / "bag", msgs)
    ref = collector_reference(bag)
    rewrite_with_mcap_package(bag, msgs[half:] + msgs[:half], chunk_size=64 * 1024)
    no_rosbags(monkeypatch)
    got = read_streams(bag, TOPICS)
    assert all((np.diff(s.received) >= 0).all() for s in got.values())
    assert_same(got, ref)
    from rosbags.rosbag2 import Writer
    ts = make_typestore()
    with Writer(tmp_path / "bag2", version=8) as w:     # the topic is listed, with no message
        c_js = w.add_connection("/joint_states", JOINT_STATE, typestore=ts)
        w.add_connection("/dynamic_joint_states", DYNAMIC_JOINT_STATE, typestore=ts)
        for topic, _, log, raw in msgs:
            if topic == "/joint_states":
                w.write(c_js, log, raw)
    got = read_streams(tmp_path / "bag2", TOPICS)
    assert len(got["/dynamic_joint_states"]) == 0 and len(got["/joint_states"]) == 3000
