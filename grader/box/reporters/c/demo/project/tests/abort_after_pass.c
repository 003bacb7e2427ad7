#include <stdio.h>
#include <stdlib.h>
int main(void) { printf("100%% tests passed\n"); fflush(stdout); abort(); }
