"""Moving knowledge between stores and agents, pure: the knowledge file format, import and merge plans, dedupe."""
