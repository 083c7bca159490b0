"""``manage.py presence stats | sweep [--loop] | flush [--loop] | export USER | clear [--yes]``."""

from __future__ import annotations

import json
import time
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from ... import conf, presence
from ...core import rules
from ...core.connection import get_store
from ...jobs import sweeper
from ...models import LastSeen
from ...store import UNAVAILABLE


class Command(BaseCommand):
    help = "Presence housekeeping: show stats, sweep expired leases, flush last seen, clear Redis."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
        sub.add_parser("stats", help="Online users by state, busiest rooms, stored last seen.")
        sweep = sub.add_parser("sweep", help="Evict expired leases and announce the leaves.")
        sweep.add_argument("--loop", action="store_true", help="Repeat every SWEEP_INTERVAL.")
        flush = sub.add_parser("flush", help="Copy online users' last seen to the database.")
        flush.add_argument("--loop", action="store_true", help="Repeat every FLUSH_INTERVAL.")
        export = sub.add_parser("export", help="Print what presence stores about one user.")
        export.add_argument("user", help="The user's id (primary key) or username.")
        clear = sub.add_parser("clear", help="Delete every presence key in Redis.")
        clear.add_argument("--yes", action="store_true", help="Do not ask for confirmation.")

    def handle(self, *args: Any, action: str, **options: Any) -> None:
        try:
            getattr(self, f"do_{action}")(**options)
        except UNAVAILABLE as exc:
            raise CommandError(f"Redis for presence cannot be reached: {exc}.") from exc
        except KeyboardInterrupt:
            self.stdout.write("Stopped.")

    def do_export(self, *, user: str, **options: Any) -> None:
        User = get_user_model()
        found = User._default_manager.filter(**{User.USERNAME_FIELD: user}).first()
        uid = rules.user_id(found) if found is not None else user
        self.stdout.write(json.dumps(presence.export(uid), indent=2, sort_keys=True))

    def do_stats(self, **options: Any) -> None:
        reads = presence.Reads()
        counts, rooms, samples = presence.batch(
            reads.state_counts(viewer=presence.TRUSTED),
            reads.rooms(10, viewer=presence.TRUSTED),
            reads.history(time.time() - 24 * 3600),
        )
        self.stdout.write(
            f"online: {counts.total} (online {counts.online}, idle {counts.idle}, "
            f"dnd {counts.dnd}); invisible: {counts.invisible}"
        )
        if not counts.exact:
            self.stdout.write(f"  (states counted over the {counts.counted} most recent users)")
        self.stdout.write(f"rooms: {len(rooms)} occupied" + (", busiest:" if rooms else ""))
        for room, members in rooms:
            self.stdout.write(f"  {room}: {members}")
        peak = max((count for _, count in samples), default=0)
        self.stdout.write(f"samples (24 h): {len(samples)}, peak {peak}")
        self.stdout.write(f"last seen rows: {LastSeen.all_workspaces.count()}")

    def do_sweep(self, loop: bool = False, **options: Any) -> None:
        if loop:
            self.stdout.write(f"Sweeping every {conf.get('SWEEP_INTERVAL')} s; Ctrl-C stops.")
            sweeper.run_sweeper(loop=True, on_sweep=self._report_sweep)
        else:
            # Asked for by hand: sweep now even if another process holds the interval's lock.
            self._report_sweep(sweeper.sweep_once(force=True) or [])

    def _report_sweep(self, transitions: list) -> None:
        offline = sum(t.kind == "offline" for t in transitions)
        leaves = sum(t.kind == "leave" for t in transitions)
        self.stdout.write(
            f"swept: {len(transitions)} transitions ({offline} offline, {leaves} room leaves)"
        )

    def do_flush(self, loop: bool = False, **options: Any) -> None:
        while True:
            self.stdout.write(f"flushed: {sweeper.flush_all()} last seen rows")
            if not loop:
                return
            time.sleep(float(conf.get("FLUSH_INTERVAL")))

    def do_clear(self, yes: bool = False, **options: Any) -> None:
        if not yes:
            answer = input(
                f"Delete every presence key (prefix {conf.get('KEY_PREFIX')!r}) from Redis? "
                "Everybody shows offline until their next request or heartbeat. Type 'yes': "
            )
            if answer.strip().lower() != "yes":
                self.stdout.write("Cancelled.")
                return
        self.stdout.write(f"cleared: {get_store().clear()} keys")
