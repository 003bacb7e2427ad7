/* PASS_REGULAR_EXPRESSION: ctest looks only at the output; this test prints it and exits 3. */
#include <stdio.h>
int main(void) { printf("all checks good\n"); return 3; }
