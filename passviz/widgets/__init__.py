"""The browser's widgets, one per module, and the messages they post (``messages``)."""
