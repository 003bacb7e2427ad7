/* Prints a success line and hangs (its TIMEOUT property is 2 s): a timeout is a failure. */
#include <stdio.h>
#include <unistd.h>
int main(void) { printf("100%% tests passed\n"); fflush(stdout); for (;;) pause(); }
