#include <stdlib.h>
#include "mini.h"
int mini_add(int a, int b) { return a + b; }
int mini_div(int a, int b) { volatile int *p = 0; if (b == 0) return *p; return a / b; }
void mini_finish(int ok) { (void)ok; exit(0); }
