"""pairrepro: reproduce the result tables of five text-matching papers end to end."""

__version__ = "0.1.0"
