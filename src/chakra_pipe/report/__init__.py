"""Campaign reports: the results table, leaderboards, plots and the HTML page."""
