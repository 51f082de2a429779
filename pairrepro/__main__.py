"""``python -m pairrepro``: the command line (what ``train --nproc-per-node N`` runs per rank)."""

from pairrepro.cli import main

if __name__ == "__main__":
    main()
