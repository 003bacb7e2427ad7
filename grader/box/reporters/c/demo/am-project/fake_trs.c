/* Prints automake's success lines and writes its own .trs/.log saying PASS, then fails. */
#include <stdio.h>
int main(void) {
    printf("PASS: fake_trs\n:test-result: PASS\n# PASS:  1\n");
    FILE *f = fopen("fake_trs.trs", "w");
    if (f) { fputs(":test-result: PASS\n:global-test-result: PASS\n:recheck: no\n:copy-in-global-log: no\n", f); fclose(f); }
    return 1;
}
