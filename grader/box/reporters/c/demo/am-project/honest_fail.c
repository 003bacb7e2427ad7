#include <stdio.h>
int main(void) { printf("expected 5\n"); return 1; }
