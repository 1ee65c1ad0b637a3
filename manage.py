#!/usr/bin/env python
import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "arena.settings")
    from arena.cli import run_command

    run_command(sys.argv)


if __name__ == "__main__":
    main()
