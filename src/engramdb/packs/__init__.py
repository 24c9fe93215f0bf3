"""Knowledge packs shipped with engramdb (package data): one TOML file per pack.

Loaded by :mod:`engramdb.services.packs`; see its docstring for the file format.
"""
