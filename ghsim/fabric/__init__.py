"""The fabric: link instances and their efficiencies, routes of a rank class's transfers with
the copies on each link, and max-min fair sharing (pure; the engine runs it in time)."""
