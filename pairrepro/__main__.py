"""``python -m pairrepro``: the command line, as the ``pairrepro`` script runs it (what
``pairrepro train --nproc-per-node N`` starts in each rank)."""

from pairrepro.cli import main

if __name__ == "__main__":
    main()
