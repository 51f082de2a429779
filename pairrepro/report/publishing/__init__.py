"""What the project publishes: the generated blocks of README.md and docs/, ``verify`` and
``results add``, the benchmark records."""
