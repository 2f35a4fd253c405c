"""``python -m pipeline.cli``: the same as the ``motifgrid`` entry point."""
from pipeline.cli.command import entry

if __name__ == "__main__":
    entry()
