"""The HTTP read side: the JSON API and its rate limits, the admin dashboard's view, and the
batched per-request reads the template tags use."""
