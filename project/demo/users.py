"""The demo's users: printed by `make run` and listed in the README."""

DEMO_PASSWORD = "presence-demo"
DEMO_USERS = ["alice", "bob", "carol", "dave"]
ADMIN = ("admin", "presence-admin")
