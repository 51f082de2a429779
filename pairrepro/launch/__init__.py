"""Run many (recipe, seed) trainings: inline, as a local pool or as a Slurm array; one
:class:`~.spec.RunOutcome` per :class:`~.spec.RunSpec`, going on past a failed run."""
