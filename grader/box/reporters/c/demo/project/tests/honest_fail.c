#include <stdio.h>
#include "mini.h"
int main(void) { if (mini_add(2, 2) != 5) { printf("expected 5\n"); return 1; } return 0; }
