module grader.invalid/selftest

go 1.24
