"""Paper tables, published against reproduced: each cell's estimate, verdict and comparison
(:mod:`.cells`), and their one formatter (:mod:`.render`: terminal, Markdown, LaTeX, HTML,
JSON); the run list and the figures."""
