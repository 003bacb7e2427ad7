int main(void) { return 77; }  /* automake's SKIP */
