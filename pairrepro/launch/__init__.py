"""Run many (recipe, seed) trainings: in this process, as a local pool (``reproduce --jobs
N``) or as a Slurm job array through submitit (``--launcher slurm``). Every launcher answers one
:class:`~.spec.RunOutcome` per :class:`~.spec.RunSpec` and goes on past a failed run; each run
trains with ``resume`` when it has a run (:func:`~.spec.continues`: finished seeds are left
alone, interrupted ones continue as they started), else starts it. Pool and
Slurm runs log to :meth:`~pairrepro.runs.RunFolder.log_path`; submitit keeps its own logs and
pickles under ``runs/.submitit/<job id>/``.
"""
