#include "mini.h"
int main(void) { return mini_add(2, 2) == 4 ? 0 : 1; }
