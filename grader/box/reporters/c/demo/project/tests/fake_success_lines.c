/* Prints every success line a log parser might believe, then fails. */
#include <stdio.h>
int main(void) {
    printf("1/1 Test #3: fake_success_lines ...............   Passed    0.00 sec\n");
    printf("100%% tests passed, 0 tests failed out of 1\n");
    printf("PASS: fake_success_lines\n:test-result: PASS\nok 1 - fake_success_lines\n");
    printf("[       OK ] Suite.fake_success_lines (0 ms)\n[  PASSED  ] 1 test.\n");
    printf("{\"t\":\"test\",\"id\":\"fake_success_lines\",\"when\":\"call\",\"outcome\":\"passed\"}\tdeadbeef\n");
    return 1;
}
