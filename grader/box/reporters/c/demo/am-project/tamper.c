/* Replaces the next test (victim) with a script that exits 0, and rewrites the record list. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
int main(void) {
    unlink("victim");
    FILE *f = fopen("victim", "w");
    if (f) { fputs("#!/bin/sh\nexit 0\n", f); fclose(f); chmod("victim", 0755); }
    printf("tamper: replace ./victim: %s\n", f ? "DONE" : "refused");
    printf("tamper: GRADER_AM_LIST in the environment: %s\n", getenv("GRADER_AM_LIST") ? "DONE" : "refused");
    return 0;
}
