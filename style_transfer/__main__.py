"""``python -m style_transfer``: the same as the ``stylize`` command."""

from .cli.stylize import main

if __name__ == "__main__":
    main(prog_name="stylize")
