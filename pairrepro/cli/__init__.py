"""Command-line interface (Typer). Thin: each command calls one library function."""
