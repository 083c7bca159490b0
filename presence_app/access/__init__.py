"""Who may see what: the viewer of a read and the one redaction (``visibility``), the
``AUDIENCE`` policy's answers (``audience``) and each user's last-seen privacy (``privacy``)."""
