"""The services: one attribute each on the facade (``mem.learning``, ``mem.knowledge``, ...), above the write path."""
