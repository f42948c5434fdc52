"""Code locations of the bundled examples: each module's ``defs`` is built when it is imported."""
