"""Safe sharing: isolation, consent, redaction, retention, audit, export/import."""
