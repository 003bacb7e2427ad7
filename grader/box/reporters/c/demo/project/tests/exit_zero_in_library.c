/* The limit no runner of native processes can close: the library calls exit(0) before the
   failing check, so the process reports success. */
#include <stdio.h>
#include "mini.h"
int main(void) { mini_finish(0); printf("unreachable\n"); return mini_add(1, 1) == 3 ? 0 : 1; }
