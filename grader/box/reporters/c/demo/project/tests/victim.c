#include <stdio.h>
int main(void) { printf("victim: the real test, which fails\n"); return 1; }
