"""Storage backends."""
