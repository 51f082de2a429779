"""Training engine: epoch loop, losses, optimisers, checkpoints, DDP, run directories."""
