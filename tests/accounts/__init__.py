"""A user model unlike Django's own, as many projects have: a UUID primary key and the email
address as the login (tests/settings_uuid.py installs it; `nox -s uuid_users` runs the tests
on it)."""
