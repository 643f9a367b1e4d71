"""A stand-in for `data.bag_stream.bag_chunks`, shared by the tests that inject faults into
the messages of a bag (test_faults.py, test_recording_checks.py)."""
import numpy as np


def chunker(streams_of):
    """`bag_chunks` serving the messages of ``streams_of(path)`` (topic -> `JointStream`) in
    bag (receive time) order, `batch` at a time."""
    def chunks(path, topics, batch=20_000, progress=None):
        streams = streams_of(path)
        names = list(topics)
        rx = np.concatenate([streams[t].received for t in names])
        which = np.concatenate([np.full(len(streams[t]), k) for k, t in enumerate(names)])
        row = np.concatenate([np.arange(len(streams[t])) for t in names])
        order = np.argsort(rx, kind="stable")
        for a in range(0, order.size, batch):
            sel = order[a:a + batch]
            out = {}
            for k, t in enumerate(names):
                r = row[sel[which[sel] == k]]
                if r.size:
                    out[t] = streams[t].select(r)
            yield out
    return chunks
