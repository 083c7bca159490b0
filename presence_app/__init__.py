"""presence_app: who is online, who is in which room, their status and when they were last seen.

Add ``"presence_app"`` to INSTALLED_APPS; the public API is ``from presence_app import presence``.
"""

__version__ = "0.1.0"
