"""Privacy, the pure rules: redaction, retention policies, consent and provenance of sharing.

The services built on them (``mem.sharing``, ``mem.retention``, ``mem.audit``) are in :mod:`engramdb.services`.
"""
