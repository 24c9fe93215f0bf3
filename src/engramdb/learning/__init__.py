"""Learning from outcomes: statistics, recommendations, failures, episodes, analytics."""
