"""Training engine: a recipe's data and model set up, the epoch loop and its optimiser."""
