"""Integrations with other libraries, each an optional extra (``presence_app[drf]``)."""
