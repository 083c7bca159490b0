"""Workspaces (``TENANT``), as a project names them: ``from presence_app import tenants``, then
``with tenants.activate("acme"): presence.online()``. The implementation, and what a workspace
is, is :mod:`presence_app.core.tenants` (the front door's floor)."""

from .core.tenants import activate, current, in_tenant, limit, resolve

__all__ = ["activate", "current", "in_tenant", "limit", "resolve"]
