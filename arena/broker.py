"""The embedded broker: kombu's filesystem transport, each message written whole before a worker
can see it.

kombu writes a message straight into the folder the workers read. A worker that lists the folder
while a producer is still writing moves the half-written file away, reads nothing, and stops
("Unrecoverable error: JSONDecodeError"); the message is lost with it. The faster the workers
look (settings: every 0.1 s), the likelier that is. Here a message is written under a name no
worker takes (it does not end in `.<queue>.msg`) and renamed into place, which is atomic on one
filesystem: a worker sees a message whole or not at all. Names and order are kombu's.

`filesystem://` means this transport in every arena process (arena/celery.py registers it).
"""

from __future__ import annotations

import contextlib
import os
import uuid
from time import monotonic

from kombu.transport import filesystem
from kombu.utils.encoding import str_to_bytes
from kombu.utils.json import dumps


class Channel(filesystem.Channel):
    def _put(self, queue, payload, **kwargs):
        name = f"{int(round(monotonic() * 1000))}_{uuid.uuid4()}.{queue}.msg"
        final = os.path.join(self.data_folder_out, name)
        partial = os.path.join(self.data_folder_out, f".{name}.part")
        try:
            with open(partial, "wb") as f:
                f.write(str_to_bytes(dumps(payload)))
            os.replace(partial, final)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.unlink(partial)
            raise filesystem.ChannelError(f"Cannot add file {final!r} to directory") from exc


class Transport(filesystem.Transport):
    Channel = Channel
