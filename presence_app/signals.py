"""Django signals for presence transitions, sent once per transition by the process that saw it.

Every signal is sent with ``sender=Transition`` and the keyword arguments ``user_id`` (str),
``state`` (the public state after the change), ``at`` (an aware UTC datetime: the moment of the
change; for ``user_offline`` the user's last seen) and ``transition`` (the
:class:`~presence_app.store.Transition` itself). Receivers may be sync or async; a failing
receiver is logged and never breaks the sender (``asend_robust``).

- ``user_online``: a user became visible online (first connection, first request, or back from
  invisible).
- ``user_offline``: a user went offline (last lease expired, or went invisible): persist their
  last seen.
- ``status_changed``: an online user's public state, message or emoji changed (dnd,
  idle <-> online).

``user_forgotten`` is sent (``sender=None``, ``user_id``) when :func:`presence.forget` erased a
user from Redis, once for each workspace it visited and inside it (``tenants.current()`` names
it; None for the default space): the app's own receiver deletes their ``LastSeen`` row, room
memberships and last-seen privacy choice of that workspace; a project may erase its own copies.

Every signal is sent inside the workspace of its transition, so a receiver's database writes
(``LastSeen``'s) land in that workspace.
"""

from django.dispatch import Signal

user_online = Signal()
user_offline = Signal()
status_changed = Signal()
user_forgotten = Signal()
