/* Writes a file next to itself and reads it back, as many real test suites do (json-c's
   test_util_file writes json.out): its working directory must accept new files. */
#include <stdio.h>
#include <string.h>
int main(void) {
    char buf[16] = {0};
    FILE *f = fopen("out.txt", "w");
    if (!f) { perror("out.txt"); return 1; }
    fputs("hello", f); fclose(f);
    f = fopen("out.txt", "r");
    if (!f || !fgets(buf, sizeof buf, f)) return 1;
    fclose(f);
    return strcmp(buf, "hello") == 0 ? 0 : 1;
}
