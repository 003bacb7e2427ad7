/* Code under test turned hostile: it tries every way to make a later test pass or to reach the
   report channel, then exits 0 (its own outcome is its own business). */
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
static void try(const char *what, int ok) { printf("tamper: %s: %s\n", what, ok ? "DONE" : "refused"); }
int main(void) {
    /* 1. replace the next test's executable with one that exits 0 */
    FILE *f = fopen("victim", "w");
    if (f) { fputs("#!/bin/sh\nexit 0\n", f); fclose(f); chmod("victim", 0755); }
    try("overwrite ./victim", f != NULL);
    int r = unlink("victim");
    try("unlink ./victim", r == 0);
    /* 2. rewrite the test list */
    f = fopen("CTestTestfile.cmake", "a");
    try("append to CTestTestfile.cmake", f != NULL);
    if (f) fclose(f);
    /* 3. the report channel: environment and every descriptor of the parent */
    try("GRADER_REPORT_FD in the environment", getenv("GRADER_REPORT_FD") != NULL);
    char path[64]; int wrote = 0;
    for (int fd = 0; fd < 64; fd++) {
        snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)getppid(), fd);
        int w = open(path, O_WRONLY | O_NONBLOCK);
        if (w >= 0) { if (write(w, "{\"t\":\"end\"}\tx\n", 14) > 0) wrote = 1; close(w); }
    }
    try("write to a descriptor of the parent", wrote);
    /* 4. kill the parent (the runner) */
    try("kill the parent", kill(getppid(), SIGKILL) == 0);
    return 0;
}
