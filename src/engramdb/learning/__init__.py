"""Learning from outcomes, the pure rules: statistics, recommendations, failures, episodes, analytics.

The services built on them (``mem.learning``, ``mem.failures``, ``mem.episodes``, ``mem.code``) are in
:mod:`engramdb.services`.
"""
