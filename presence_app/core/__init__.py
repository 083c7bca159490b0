"""What the front door (:mod:`presence_app.presence`) is built from: the rules it validates
with, the project hooks it calls, the announcements it sends, the Redis clients it calls the
store through, the throttles, and permanent rooms."""
