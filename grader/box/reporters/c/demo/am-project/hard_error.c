#include <stdio.h>
int main(void) { printf("PASS: hard_error\n"); return 99; }  /* automake's hard ERROR */
