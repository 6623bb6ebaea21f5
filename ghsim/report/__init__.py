"""Reports: plain-data views of inputs and results, and their rich rendering."""
