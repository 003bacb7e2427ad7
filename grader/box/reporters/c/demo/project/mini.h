int mini_add(int a, int b);
int mini_div(int a, int b);   /* crashes on b == 0: the library's bug */
void mini_finish(int ok);      /* what a "helpful" library might do: exit(0) whatever happened */
