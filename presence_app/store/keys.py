"""Key names: the one place that spells a Redis key.

Every key of a user lives in that user's *shard*, and every key of a shard starts with the same
Redis Cluster hash tag, ``{prefix:shard}``, so each state-changing script touches one slot.
Rooms are split the same way: a room has one member set per shard, holding that shard's users.

The keys of this layout (docs/store-layout.md) start with ``{prefix:shard}:3``: the layout is a
segment of every key, so that a future layout can run beside this one on the same Redis during a
rolling deploy, and be upgraded to.

User-controlled text (user ids, room names) is percent-encoded before it becomes part of a key,
so ``{``, ``}``, ``:``, ``*``, spaces and newlines can never change a key's meaning or its slot.
The Lua scripts derive keys with the identical ``esc`` function (``lua/lib.lua``).
"""

from __future__ import annotations

import zlib
from urllib.parse import quote, unquote

#: Separates the user id from the connection id in a lease member ("<user>|<conn>").
CONN_SEP = "|"
#: The store's key layout: a segment of every key, so that two layouts never share a key.
LAYOUT = 3


def esc(text: str) -> str:
    """Percent-encode everything but ``A-Z a-z 0-9 - . _ ~`` (UTF-8 bytes)."""
    return quote(text, safe="-._~")


def unesc(text: str) -> str:
    return unquote(text)


def shard_of(user_id: str, shards: int) -> int:
    """The shard of a user: stable across processes and languages (CRC-32)."""
    if shards <= 1:
        return 0
    return zlib.crc32(user_id.encode()) % shards


def registry_bucket(user_id: str, buckets: int) -> int:
    """The connection-registry bucket of a user (lua/lib.lua's bkey, the same arithmetic,
    exact in both languages)."""
    h = 0
    for byte in user_id.encode():
        h = (h * 31 + byte) % 2147483647
    return h % buckets


class KeySpace:
    """Key names for one prefix and shard count."""

    layout = LAYOUT

    def __init__(self, prefix: str = "presence", shards: int = 1) -> None:
        self.prefix = prefix
        self.shards = shards
        self._tags = [f"{{{prefix}:{shard}}}:{LAYOUT}" for shard in range(shards)]

    def tag(self, shard: int) -> str:
        """The base of every key of a shard: ``{prefix:shard}:3``, the Cluster hash tag and
        the layout."""
        return self._tags[shard]

    def all_tags(self) -> list[str]:
        return list(self._tags)

    def tag_for_user(self, user_id: str) -> str:
        return self._tags[shard_of(user_id, self.shards)]

    # The names below mirror lib.lua; scripts receive only the tag and build the rest.
    @staticmethod
    def records(tag: str) -> str:
        """The records, a field a user (lib.lua's K_RECS)."""
        return f"{tag}:recs"

    @staticmethod
    def record_expiry(tag: str) -> str:
        """Unlisted users' records by their expiry (lib.lua's K_REXP)."""
        return f"{tag}:rexp"

    @staticmethod
    def room(tag: str, room: str) -> str:
        return f"{tag}:r:{esc(room)}"

    @staticmethod
    def seen(tag: str) -> str:
        """Listed users by their last sign of life: the connected by a positive score, the
        HTTP-only by their last request negated (one index: head.lua's WEB)."""
        return f"{tag}:seen"

    @staticmethod
    def until(tag: str) -> str:
        """Listed users whose presence ends sooner than their seen score implies."""
        return f"{tag}:until"

    @staticmethod
    def hidden(tag: str) -> str:
        return f"{tag}:hidden"

    @staticmethod
    def rooms(tag: str) -> str:
        return f"{tag}:rooms"

    @staticmethod
    def procs(tag: str) -> str:
        """Processes by lease expiry."""
        return f"{tag}:procs"

    @staticmethod
    def last(tag: str) -> str:
        """Offline users by last seen."""
        return f"{tag}:last"

    @staticmethod
    def registry(tag: str, bucket: int) -> str:
        return f"{tag}:c:{bucket}"

    @staticmethod
    def process_users(tag: str, process: str) -> str:
        return f"{tag}:p:{process}"

    @staticmethod
    def graces(tag: str) -> str:
        """Users by the end of their closing connections' graces (lib.lua's K_GRACES)."""
        return f"{tag}:graces"

    @staticmethod
    def copies(tag: str) -> str:
        """Record holders in seen, by when the sweep renews their record's copy of their score
        (head.lua's K_COPIES)."""
        return f"{tag}:copies"

    @staticmethod
    def erased(tag: str) -> str:
        """Erased users' ids (their SHA-1) by the end of their erasure's hold (lib.lua's
        K_GONE): no write of theirs is taken until then."""
        return f"{tag}:gone"

    @staticmethod
    def cleaner(tag: str) -> str:
        """The registry cleaner's next bucket (sweep.lua)."""
        return f"{tag}:clean"

    @staticmethod
    def room_states(tag: str, room: str) -> str:
        """A room's live state, a hash (roomstate.lua)."""
        return f"{tag}:rs:{esc(room)}"

    #: The periodic jobs that one process at a time runs (each behind a lock of its own).
    JOBS = ("sweep", "flush")

    def lock(self, job: str) -> str:
        return f"{self.prefix}:{self.layout}:lock:{job}"

    def history(self) -> str:
        return f"{self.prefix}:history"

    def tenants(self) -> str:
        """The tenants in use (a sorted set: when a process last served each), kept by the
        store of the base prefix."""
        return f"{self.prefix}:tenants"

    def match_all(self) -> str:
        """A SCAN pattern for every key of this prefix (used by ``clear``)."""
        return f"{{{self.prefix}:*"
