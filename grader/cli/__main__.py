"""`python -m grader.cli`, as `grader`."""

from grader.cli import main

main()
