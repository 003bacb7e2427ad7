#!/bin/sh
# A shell test run through SH_LOG_DRIVER: passes.
test "$(echo ok)" = ok
