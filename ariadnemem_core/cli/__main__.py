"""``python -m ariadnemem_core.cli``: the ``ariadnemem`` command without the installed script."""

from . import main

if __name__ == "__main__":
    main()
