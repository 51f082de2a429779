"""Paper tables, published against reproduced (:mod:`.cells`), their one formatter
(:mod:`.render`), the run list and the figures."""
