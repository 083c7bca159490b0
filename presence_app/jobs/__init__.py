"""Work outside a connection or a request: the sweep loop and its samples, the HTTP touches
written in batches, and last seen made durable in the database."""
