#include <stdio.h>

#include "stats.h"

int main(void)
{
    double xs[] = {4, 1, 3, 2};
    double m = stats_median(xs, 4);
    if (m != 2.5) {
        printf("median of 4 1 3 2 is %g, want 2.5\n", m);
        return 1;
    }
    return 0;
}
