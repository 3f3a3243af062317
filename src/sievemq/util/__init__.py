"""Small helpers with no knowledge of messaging: rate limiting (``ratelimit``), a file reloaded when it changes
(``watched_file``), background tasks started and stopped in one way (``tasks``)."""
