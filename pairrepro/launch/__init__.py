"""Run many (recipe, seed) trainings: one after another in this process, as a local pool of
processes (``reproduce --jobs N``), or as a Slurm job array through submitit
(``reproduce --launcher slurm``).

Every launcher answers with one :class:`~.spec.RunOutcome` per :class:`~.spec.RunSpec` and
never stops because one run failed. Each run trains with ``resume=True``: a finished seed is
left alone and an interrupted or pre-empted one continues from its checkpoint.

Logs: a pool or Slurm run writes its output to ``runs/<recipe>/logs/seed-<n>.<launcher>.log``
(:meth:`~pairrepro.runs.RunFolder.log_path`); submitit keeps its own bootstrap logs and
pickles under ``runs/.submitit/<job id>/``.
"""
