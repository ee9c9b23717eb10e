"""`python -m notifyhub`: the `notifyhub` command, for an environment whose scripts are not
on PATH (a virtual environment not activated, a container's Python)."""

from notifyhub.cli import main

main()
